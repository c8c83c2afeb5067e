package command

import (
	"bytes"
	"context"
	"errors"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Wire texts of errors, following Redis's conventions: the one table of
// them, for the commands here and the edge's gates alike. This is where
// an error becomes text a client sees; Text maps the engine's, a
// backend's and the policies' errors to it. Texts that quote a client's
// input cut and sanitize it (acl.Sanitize).

// The refusals another rlserver acts on: a node joining through a member
// (cmd/rlserver) tells credentials it must change from a join it may not
// make by them. A reply's code is its first word (ErrorCode).
const (
	// ErrCodeNoAuth starts the reply to a command sent before
	// authenticating to a server that requires it.
	ErrCodeNoAuth = "NOAUTH"
	// ErrCodeWrongPass starts the reply to AUTH with a wrong user or
	// password.
	ErrCodeWrongPass = "WRONGPASS"
	// ErrCodeNoPerm starts the reply to a command the user may not run, or
	// whose keys it may not touch.
	ErrCodeNoPerm = "NOPERM"
	// ErrCodeDenied starts protected mode's refusal of a connection.
	ErrCodeDenied = "DENIED"

	// ErrTextNoPassSet is the reply to AUTH password when the default user
	// has no password.
	ErrTextNoPassSet = "ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"
	// ErrTextNoCluster is the reply to RL.CLUSTER on a standalone server,
	// and to CLUSTER without hash slots.
	ErrTextNoCluster = "ERR This instance has cluster support disabled"
	// ErrTextNotSharded answers the group commands on a cluster without
	// --groups.
	ErrTextNotSharded = "ERR this node is not sharded: start the cluster with --groups to use Raft groups"
)

// ErrorCode returns the code of an error reply's text: its first word
// (ERR, WRONGTYPE, NOAUTH...).
func ErrorCode(text string) string {
	if i := strings.IndexByte(text, ' '); i >= 0 {
		return text[:i]
	}
	return text
}

// Arguments and values.
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

// WrongArity is Redis's text for a command given the wrong number of
// arguments.
func WrongArity(fullname string) string {
	return "ERR wrong number of arguments for '" + fullname + "' command"
}

// UnknownSubcommand is Redis's text for a container's subcommand it does
// not know; cmd is the container's name as the client should type it.
func UnknownSubcommand(sub []byte, cmd string) string {
	return "ERR unknown subcommand '" + acl.Sanitize(sub, 128) + "'. Try " + cmd + " HELP."
}

// UnknownCommand is Redis's text for a command it does not know, byte for
// byte: the name cut to 128 bytes, then quoted arguments while the list is
// shorter than 128 bytes, each cut to what is left of those 128 (C strings:
// a NUL ends a name or argument), and '\r', '\n' shown as spaces.
func UnknownCommand(args [][]byte) string {
	cstr := func(b []byte, n int) []byte {
		if i := bytes.IndexByte(b, 0); i >= 0 {
			b = b[:i]
		}
		return b[:min(len(b), n)]
	}
	s := []byte("ERR unknown command '")
	s = append(s, cstr(args[0], 128)...)
	s = append(s, "', with args beginning with: "...)
	list := len(s)
	for _, a := range args[1:] {
		if len(s)-list >= 128 {
			break
		}
		s = append(s, '\'')
		s = append(s, cstr(a, 128-(len(s)-1-list))...)
		s = append(s, '\'', ' ')
	}
	for i, c := range s {
		if c == '\r' || c == '\n' {
			s[i] = ' '
		}
	}
	return string(s)
}

// The edge's gates: connections, AUTH, ACL, key length, routing.
const (
	ErrNoAuth      = ErrCodeNoAuth + " Authentication required."
	ErrWrongPass   = ErrCodeWrongPass + " invalid username-password pair or user is disabled."
	ErrHelloNoAuth = ErrCodeNoAuth + " HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	ErrNoPermKey   = ErrCodeNoPerm + " No permissions to access a key"
	ErrProtected   = ErrCodeDenied + " rlserver is running in protected mode because it listens on a non-loopback address and no password is set. In this mode connections are only accepted from the loopback interface. To accept clients from other hosts: 1) set a password with --requirepass (recommended), or 2) turn protected mode off with --protected-mode=false, making sure the server is not reachable from untrusted networks."
	ErrMaxClients  = "ERR max number of clients reached"
	// ErrMisconf is Redis's MISCONF reply (shared.bgsaveerr), with
	// rlserver's snapshot where Redis names its RDB, so clients and
	// operators that look for MISCONF recognise it.
	ErrMisconf = "MISCONF rlserver is configured to save snapshots, but it's currently unable to persist to disk. " +
		"Commands that may modify the data set are disabled, because this instance is configured to report errors during writes " +
		"if snapshotting fails (stop-writes-on-bgsave-error option). Please check the rlserver log for details about the snapshot error."
	// ErrCrossSlot is Redis Cluster's refusal of keys in several slots.
	ErrCrossSlot   = "CROSSSLOT Keys in request don't hash to the same slot"
	ErrClusterDown = "CLUSTERDOWN Hash slot not served"
)

// NoPerm is Redis's text for a command the user may not run; a
// subcommand is named container|sub.
func NoPerm(user, cmd string) string {
	return ErrCodeNoPerm + " User " + user + " has no permissions to run the '" + cmd + "' command"
}

// KeyTooLong refuses a key of n bytes, above limit (max-key-len).
func KeyTooLong(n int, limit int64) string {
	return "ERR key is too long: " + strconv.Itoa(n) + " bytes, the limit is " +
		strconv.FormatInt(limit, 10) + " (max-key-len)"
}

// Moved redirects a command on slot to the node at addr.
func Moved(slot int, addr string) string {
	return "MOVED " + strconv.Itoa(slot) + " " + addr
}

// HELLO and CLIENT: Redis's texts.
const (
	ErrProtoVersion     = "NOPROTO unsupported protocol version"
	ErrProtoNotInteger  = "ERR Protocol version is not an integer or out of range"
	ErrClientName       = "ERR Client names cannot contain spaces, newlines or special characters."
	ErrInvalidClientID  = "ERR Invalid client ID"
	ErrClientIDPositive = "ERR client-id should be greater than 0"
	ErrMaxAgeNotInteger = "ERR maxage is not an integer or out of range"
	ErrMaxAgePositive   = "ERR maxage should be greater than 0"
	ErrNoSuchClient     = "ERR No such client"
)

// HelloBadOption refuses an option of HELLO.
func HelloBadOption(opt []byte) string {
	return "ERR Syntax error in HELLO option '" + acl.Sanitize(opt, 128) + "'"
}

// BadClientInfo is CLIENT SETINFO's refusal of a value, naming the
// option as given, upper-cased.
func BadClientInfo(opt []byte) string {
	return "ERR " + strings.ToUpper(string(opt)) + " cannot contain spaces, newlines or special characters."
}

// UnknownClientInfo refuses an option of CLIENT SETINFO.
func UnknownClientInfo(opt []byte) string {
	return "ERR Unrecognized option '" + acl.Sanitize(opt, 128) + "'"
}

// UnknownClientType refuses a client type of CLIENT LIST or KILL.
func UnknownClientType(typ []byte) string {
	return "ERR Unknown client type '" + acl.Sanitize(typ, 64) + "'"
}

// NoSuchUser refuses CLIENT KILL USER of a user that does not exist.
func NoSuchUser(name []byte) string {
	return "ERR No such user '" + acl.Sanitize(name, 64) + "'"
}

func unknownCategory(cat []byte) string {
	return "ERR Unknown category '" + acl.Sanitize(cat, 128) + "'"
}

// CONFIG SET: Redis's texts; why is the reason a value is refused.

// ConfigSetFailed refuses a value of the setting name.
func ConfigSetFailed(name, why string) string {
	return "ERR CONFIG SET failed (possibly related to argument '" + acl.Sanitize([]byte(name), 64) + "') - " + why
}

// ConfigSetRefused is CONFIG SET's reply when the server's configuration
// refuses a value: the refusal's text is the reason, so it must be
// written for clients (cmd/rlserver's settings are).
func ConfigSetRefused(name string, err error) string {
	return ConfigSetFailed(name, acl.Sanitize([]byte(err.Error()), 200))
}

// UnknownSetting refuses CONFIG SET of a setting the server does not have.
func UnknownSetting(name string) string {
	return "ERR Unknown option or number of arguments for CONFIG SET - '" + acl.Sanitize([]byte(name), 64) + "'"
}

// COMMAND GETKEYS: Redis's texts.
const (
	errGetKeysUnknown = "ERR Invalid command specified"
	errGetKeysArity   = "ERR Invalid number of arguments specified for command"
	errGetKeysNoKeys  = "ERR The command has no key arguments"
	errGetKeysBadArgs = "ERR Invalid arguments specified for command"
)

// Snapshots and SHUTDOWN.
const (
	ErrNoPersistence  = "ERR this server keeps no snapshots (in cluster mode Raft takes them)"
	errSaveFailed     = "ERR snapshot save failed: see the server log"
	errBgsaveRunning  = "ERR Background save already in progress"
	errShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs."
	errNoShutdown     = "ERR No shutdown in progress."
)

// The cluster commands.
const (
	errInvalidSlot      = "ERR Invalid slot"
	errInvalidSlotKeys  = "ERR Invalid slot or number of keys"
	errRebalanceRunning = "ERR a rebalance is already running on this node"
)

// Transactions and scripts.
const (
	errMultiNested       = "ERR MULTI calls can not be nested"
	errDiscardNoMulti    = "ERR DISCARD without MULTI"
	errWatchInMulti      = "ERR WATCH inside MULTI is not allowed"
	errExecNoMulti       = "ERR EXEC without MULTI"
	errExecReply         = "ERR unexpected reply to EXEC"
	errNumKeysNegative   = "ERR Number of keys can't be negative"
	errNumKeysTooMany    = "ERR Number of keys can't be greater than number of args"
	errScriptStopped     = "ERR the server is shutting down: the script was stopped and none of its writes applied"
	errScriptKeysChanged = "BUSY the script's keys kept changing while it ran; try again"
	errScriptFlushOption = "ERR SCRIPT FLUSH only support SYNC|ASYNC option"
	errCrossSlotScript   = "ERR Script attempted to access keys that do not hash to the same slot"
)

// notInTransaction refuses to queue a command inside MULTI.
func notInTransaction(name []byte) string {
	return "ERR Command not allowed inside a transaction: " + string(name) + " is not a data, limiter or script command"
}

// RL.CHECK and the policies.
const (
	errTooManyTiers   = "ERR too many tiers in one RL.CHECK (at most 64)"
	ErrNoPolicies     = "ERR this server keeps no policies"
	ErrNoPolicyFile   = "ERR no policy file is configured (start rlserver with --policies FILE)"
	ErrPolicyBadName  = "ERR invalid policy name: 1 to 64 letters, digits, '_', '-' or '.', and not COST"
	ErrPolicyKind     = "ERR unknown policy kind: use ALLOW, THROTTLE, FIXED, SLIDING, LOG or SHAPE"
	ErrPolicyArity    = "ERR wrong number of parameters: ALLOW capacity rate | THROTTLE max_burst count_per_period period | FIXED, SLIDING or LOG limit window_ms | SHAPE capacity rate"
	errPolicyTooMany  = "ERR too many policies (at most 10000)"
	errPolicyTwice    = "ERR policy defined twice"
	errPolicyFileRead = "ERR the policy file cannot be read: see the server log"
)

func duplicateTierKey(key []byte) string {
	return "ERR key '" + acl.Sanitize(key, 128) + "' appears twice in one RL.CHECK"
}

func unknownPolicy(name []byte) string {
	return "ERR unknown policy '" + acl.Sanitize(name, 128) + "'"
}

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
		return ErrRangePositive, true
	case errors.Is(err, engine.ErrBadPeriod):
		return "ERR period must be > 0 and < 1e12", true
	case errors.Is(err, engine.ErrBadTokens):
		return ErrRangeOneToMax, true
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
		return ErrNotInteger, true
	case errors.Is(err, policy.ErrNotFloat):
		return ErrNotFloat, true
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
