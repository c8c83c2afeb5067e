package kv

import (
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Redis's error texts.
const (
	ErrSyntax       = "ERR syntax error"
	ErrWrongType    = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrNotInteger   = "ERR value is not an integer or out of range"
	ErrNotFloat     = "ERR value is not a valid float"
	ErrOverflow     = "ERR increment or decrement would overflow"
	ErrOOM          = "OOM command not allowed when used memory > 'maxmemory'."
	ErrHashNotInt   = "ERR hash value is not an integer"
	ErrHashNotFloat = "ERR hash value is not a float"
	ErrNaN          = "ERR increment would produce NaN or Infinity"
	ErrElementLong  = "ERR hash field or value, or sorted set member, is longer than the limit of 512 bytes"
	ErrTooMany      = "ERR the hash or sorted set would hold more than 10000 elements"
	ErrExecAbort    = "EXECABORT Transaction discarded because of previous errors."
)

// ErrTooLong refuses a string that would grow past values.MaxValueLen;
// Redis's text, with rlserver's bound in place of proto-max-bulk-len.
var ErrTooLong = "ERR string exceeds maximum allowed size (" + strconv.Itoa(values.MaxValueLen) + " bytes)"

// errorText is the reply text of an error from the engine or values.
func errorText(err error) string {
	switch {
	case errors.Is(err, engine.ErrWrongType):
		return ErrWrongType
	case errors.Is(err, engine.ErrOOM):
		return ErrOOM
	case errors.Is(err, values.ErrTooLong):
		return ErrTooLong
	case errors.Is(err, values.ErrElementTooLong):
		return ErrElementLong
	case errors.Is(err, values.ErrTooMany):
		return ErrTooMany
	}
	return "ERR " + err.Error()
}
