package resp

import (
	"context"
	"errors"

	"github.com/rlserver/rlserver/engine"
)

// Wire texts of errors, following Redis's conventions. This is the only
// place where an error becomes text a client sees.
const (
	errNotInteger   = "ERR value is not an integer or out of range"
	errNotFloat     = "ERR value is not a valid float"
	errSyntax       = "ERR syntax error"
	errNoAuth       = "NOAUTH Authentication required."
	errWrongPass    = "WRONGPASS invalid username-password pair or user is disabled."
	errNoPassSet    = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	errDBIndex      = "ERR DB index is out of range"
	errProtoVersion = "NOPROTO unsupported protocol version"
	errWrongType    = "WRONGTYPE Operation against a key holding the wrong kind of value"
	errInternal     = "ERR internal error"
	errShutdown     = "ERR server is shutting down"
	errHelloNoAuth  = "NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
)

// engineErrorText maps an error from the engine or the backend to its wire
// text. Unknown errors never leak their Go text.
func engineErrorText(err error) string {
	switch {
	case errors.Is(err, engine.ErrWrongType):
		return errWrongType
	case errors.Is(err, engine.ErrBadCapacity):
		return "ERR capacity must be an integer >= 1"
	case errors.Is(err, engine.ErrBadRate):
		return "ERR rate must be a finite number > 0"
	case errors.Is(err, engine.ErrBadCost):
		return "ERR cost must be an integer >= 0"
	case errors.Is(err, engine.ErrPeriodTooLong):
		return "ERR capacity/rate too large: a full refill would take longer than 2^60 ns (about 36 years)"
	case errors.Is(err, engine.ErrClosed), errors.Is(err, context.Canceled):
		return errShutdown
	}
	if t, ok := backendErrorText(err); ok {
		return t
	}
	return errInternal
}

// BackendError is an error from a Backend that carries its own wire text
// (for example a cluster's TRYAGAIN). The text must follow Redis's
// conventions: an upper-case code, a space, a message.
type BackendError interface {
	error
	WireText() string
}

func backendErrorText(err error) (string, bool) {
	var be BackendError
	if errors.As(err, &be) {
		return be.WireText(), true
	}
	return "", false
}

func wrongArity(fullname string) string {
	return "ERR wrong number of arguments for '" + fullname + "' command"
}

func unknownSubcommand(sub []byte, cmd string) string {
	return "ERR unknown subcommand '" + sanitize(sub, 128) + "'. Try " + cmd + " HELP."
}

// unknownCommand is Redis's text for a command it does not know.
func unknownCommand(args [][]byte) string {
	s := "ERR unknown command '" + sanitize(args[0], 128) + "', with args beginning with: "
	for _, a := range args[1:] {
		if len(s) > 256 {
			break
		}
		s += "'" + sanitize(a, 128) + "' "
	}
	return s
}

// sanitize makes b safe inside a one-line error: at most n bytes,
// control characters and newlines replaced by spaces.
func sanitize(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	out := make([]byte, len(b))
	for i, c := range b {
		if c < ' ' || c == 0x7f {
			c = ' '
		}
		out[i] = c
	}
	return string(out)
}
