package command

import (
	"context"
	"errors"

	"github.com/rlserver/rlserver/engine"
)

// Wire texts of the errors of the commands here, following Redis's
// conventions; the edge's own (connections, AUTH, ACL, CONFIG...) are in
// server's errors.go.
const (
	ErrNotInteger = "ERR value is not an integer or out of range"
	ErrNotFloat   = "ERR value is not a valid float"
	ErrSyntax     = "ERR syntax error"
	ErrWrongType  = "WRONGTYPE Operation against a key holding the wrong kind of value"
	ErrOOM        = "OOM command not allowed when used memory > 'maxmemory'."
	ErrDBIndex    = "ERR DB index is out of range"
	ErrInternal   = "ERR internal error"
	ErrShutdown   = "ERR server is shutting down"

	// GCRA and the other algorithms' arguments: Redis 8.8's texts for GCRA.
	ErrRangePositive     = "ERR value is out of range, must be positive"
	ErrRangeOneToMax     = "ERR value is out of range, value must between 1 and 9223372036854775807"
	errGCRAMissingTokens = "ERR Missing TOKENS value"
)

// Short names for this package's own use.
const (
	errNotInteger    = ErrNotInteger
	errNotFloat      = ErrNotFloat
	errSyntax        = ErrSyntax
	errRangePositive = ErrRangePositive
	errRangeOneToMax = ErrRangeOneToMax
)

// WrongArity is Redis's text for a command given the wrong number of
// arguments.
func WrongArity(fullname string) string {
	return "ERR wrong number of arguments for '" + fullname + "' command"
}

func wrongArity(fullname string) string { return WrongArity(fullname) }

// BackendError is an error from a backend that carries its own wire text
// (for example a cluster's TRYAGAIN). The text must follow Redis's
// conventions: an upper-case code, a space, a message.
type BackendError interface {
	error
	WireText() string
}

// ErrorText maps an error from the engine or a backend to its wire text,
// and reports whether it knew the error. Unknown errors never leak their
// Go text: the caller maps its own or answers ErrInternal.
func ErrorText(err error) (string, bool) {
	switch {
	case errors.Is(err, engine.ErrWrongType):
		return ErrWrongType, true
	case errors.Is(err, engine.ErrOOM):
		return ErrOOM, true
	case errors.Is(err, engine.ErrBadCapacity):
		return "ERR capacity must be an integer >= 1", true
	case errors.Is(err, engine.ErrBadRate):
		return "ERR rate must be a finite number > 0", true
	case errors.Is(err, engine.ErrBadCost):
		return "ERR cost must be an integer >= 0", true
	case errors.Is(err, engine.ErrPeriodTooLong):
		return "ERR capacity/rate too large: a full refill would take longer than 2^60 ns (about 36 years)", true
	case errors.Is(err, engine.ErrZeroRate):
		return "ERR zero rates are not supported", true
	case errors.Is(err, engine.ErrBadBurst):
		return errRangePositive, true
	case errors.Is(err, engine.ErrBadPeriod):
		return "ERR period must be > 0 and < 1e12", true
	case errors.Is(err, engine.ErrBadTokens):
		return errRangeOneToMax, true
	case errors.Is(err, engine.ErrGCRATokensOverflow):
		return "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow", true
	case errors.Is(err, engine.ErrGCRABurstOverflow):
		return "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow", true
	case errors.Is(err, engine.ErrBadLimit):
		return "ERR limit must be an integer >= 1", true
	case errors.Is(err, engine.ErrLimitTooLarge):
		return "ERR limit is above the maximum of 2^60", true
	case errors.Is(err, engine.ErrLogLimitTooLarge):
		return "ERR limit is above RL.LOG's maximum of 100000 entries per key", true
	case errors.Is(err, engine.ErrBadWindow):
		return "ERR window must be an integer >= 1 (milliseconds)", true
	case errors.Is(err, engine.ErrWindowTooLong):
		return "ERR window is above the maximum of 2^60 ns (about 36 years)", true
	case errors.Is(err, engine.ErrDuplicateTier):
		return "ERR a key appears twice in one RL.CHECK", true
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		return ErrShutdown, true
	}
	var be BackendError
	if errors.As(err, &be) {
		return be.WireText(), true
	}
	return "", false
}

// Text maps an error from the engine, a backend or the policies to its
// wire text: ErrorText, then the policy errors, else ErrInternal.
func Text(err error) string {
	if t, ok := ErrorText(err); ok {
		return t
	}
	if t, ok := policyErrorText(err); ok {
		return t
	}
	return ErrInternal
}

func errorText(err error) string { return Text(err) }
