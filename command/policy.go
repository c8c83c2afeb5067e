package command

import (
	"errors"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// Named policies: the policy package's errors.

const (
	ErrNoPolicies     = "ERR this server keeps no policies"
	ErrNoPolicyFile   = "ERR no policy file is configured (start rlserver with --policies FILE)"
	ErrPolicyBadName  = "ERR invalid policy name: 1 to 64 letters, digits, '_', '-' or '.', and not COST"
	ErrPolicyKind     = "ERR unknown policy kind: use ALLOW, THROTTLE, FIXED, SLIDING, LOG or SHAPE"
	ErrPolicyArity    = "ERR wrong number of parameters: ALLOW capacity rate | THROTTLE max_burst count_per_period period | FIXED, SLIDING or LOG limit window_ms | SHAPE capacity rate"
	errPolicyTooMany  = "ERR too many policies (at most 10000)"
	errPolicyTwice    = "ERR policy defined twice"
	errPolicyFileRead = "ERR the policy file cannot be read: see the server log"
)

// policyErrorText maps the policy package's errors to wire text.
func policyErrorText(err error) (string, bool) {
	var le *policy.LineError
	switch {
	case errors.As(err, &le):
		inner := PolicyErrorText(le.Err)
		if len(inner) > 4 && inner[:4] == "ERR " {
			inner = inner[4:]
		}
		return "ERR policy file line " + strconv.Itoa(le.Line) + ": " + inner, true
	case errors.Is(err, policy.ErrUnknown):
		return "ERR unknown policy", true
	case errors.Is(err, policy.ErrBadName):
		return ErrPolicyBadName, true
	case errors.Is(err, policy.ErrUnknownKind):
		return ErrPolicyKind, true
	case errors.Is(err, policy.ErrArity):
		return ErrPolicyArity, true
	case errors.Is(err, policy.ErrNotInteger):
		return errNotInteger, true
	case errors.Is(err, policy.ErrNotFloat):
		return errNotFloat, true
	case errors.Is(err, policy.ErrTooMany):
		return errPolicyTooMany, true
	case errors.Is(err, policy.ErrDuplicate):
		return errPolicyTwice, true
	case errors.Is(err, policy.ErrLineTooLong):
		return "ERR line too long (at most 4096 bytes)", true
	}
	return "", false
}

// PolicyErrorText is Text with the policy errors first: a policy file's
// *policy.LineError wraps an engine error, and its text must name the
// line.
func PolicyErrorText(err error) string {
	if t, ok := policyErrorText(err); ok {
		return t
	}
	return Text(err)
}

// PolicyLoadErrorText is RL.POLICY LOAD's reply to a refused file. A file
// that cannot be read gets a generic text: the OS error names paths, which
// go to the log only.
func PolicyLoadErrorText(err error) string {
	var le *policy.LineError
	var be BackendError
	if !errors.As(err, &le) && !errors.Is(err, policy.ErrFileTooLarge) && !errors.As(err, &be) {
		return errPolicyFileRead
	}
	return PolicyErrorText(err)
}

// PolicyFileError is the text of a refused policy file for the log and the
// start-up error: RL.POLICY LOAD's reply without "ERR " (so a bad line
// reads the same to the client and in the log), or the read error.
func PolicyFileError(err error) string {
	t := PolicyLoadErrorText(err)
	if t == errPolicyFileRead {
		return err.Error()
	}
	return strings.TrimPrefix(t, "ERR ")
}

// WritePolicy writes a policy's definition [name, KIND, params...].
func WritePolicy(w *kv.Writer, p *policy.Policy) {
	words := p.Words()
	w.Array(len(words))
	for _, s := range words {
		w.BulkString(s)
	}
}
