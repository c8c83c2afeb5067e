package server

import (
	"bytes"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
)

// Wire texts of errors, following Redis's conventions. This is the only
// place where an error becomes text a client sees.
//
// The exported codes and texts are the refusals another rlserver acts on:
// a node joining through a member (cmd/rlserver) tells credentials it must
// change from a join it may not make by them. A reply's code is its first
// word (ErrorCode).
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
	// ErrTextNoCluster is the reply to RL.CLUSTER on a standalone server.
	ErrTextNoCluster = "ERR This instance has cluster support disabled"
)

const (
	errNotInteger   = command.ErrNotInteger
	errNotFloat     = command.ErrNotFloat
	errSyntax       = command.ErrSyntax
	errNoAuth       = ErrCodeNoAuth + " Authentication required."
	errWrongPass    = ErrCodeWrongPass + " invalid username-password pair or user is disabled."
	errNoPassSet    = ErrTextNoPassSet
	errDBIndex      = command.ErrDBIndex
	errProtoVersion = "NOPROTO unsupported protocol version"
	errWrongType    = command.ErrWrongType
	errInternal     = command.ErrInternal
	errShutdown     = command.ErrShutdown
	errProtected    = ErrCodeDenied + " rlserver is running in protected mode because it listens on a non-loopback address and no password is set. In this mode connections are only accepted from the loopback interface. To accept clients from other hosts: 1) set a password with --requirepass (recommended), or 2) turn protected mode off with --protected-mode=false, making sure the server is not reachable from untrusted networks."
	errNoPermKey    = ErrCodeNoPerm + " No permissions to access a key"
	errOOM          = command.ErrOOM
	errHelloNoAuth  = ErrCodeNoAuth + " HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
)

// Connections and keys (server.go).
const errMaxClients = "ERR max number of clients reached"

func keyTooLong(n int, limit int64) string {
	return "ERR key is too long: " + strconv.Itoa(n) + " bytes, the limit is " +
		strconv.FormatInt(limit, 10) + " (max-key-len)"
}

// HELLO and CLIENT (commands.go, client.go): Redis's texts.
const (
	errProtoNotInteger  = "ERR Protocol version is not an integer or out of range"
	errClientName       = "ERR Client names cannot contain spaces, newlines or special characters."
	errInvalidClientID  = "ERR Invalid client ID"
	errClientIDPositive = "ERR client-id should be greater than 0"
	errMaxAgeNotInteger = "ERR maxage is not an integer or out of range"
	errMaxAgePositive   = "ERR maxage should be greater than 0"
	errNoSuchClient     = "ERR No such client"
)

func helloBadOption(opt []byte) string {
	return "ERR Syntax error in HELLO option '" + acl.Sanitize(opt, 128) + "'"
}

// badClientInfo is CLIENT SETINFO's refusal of a value, naming the
// option as given, upper-cased.
func badClientInfo(opt []byte) string {
	return "ERR " + strings.ToUpper(string(opt)) + " cannot contain spaces, newlines or special characters."
}

func unknownClientInfo(opt []byte) string {
	return "ERR Unrecognized option '" + acl.Sanitize(opt, 128) + "'"
}

func unknownClientType(typ []byte) string {
	return "ERR Unknown client type '" + acl.Sanitize(typ, 64) + "'"
}

func noSuchUser(name []byte) string {
	return "ERR No such user '" + acl.Sanitize(name, 64) + "'"
}

// COMMAND GETKEYS (command_cmd.go): Redis's texts.
const (
	errGetKeysUnknown = "ERR Invalid command specified"
	errGetKeysArity   = "ERR Invalid number of arguments specified for command"
	errGetKeysNoKeys  = "ERR The command has no key arguments"
	errGetKeysBadArgs = "ERR Invalid arguments specified for command"
)

// CONFIG SET (config_cmd.go): Redis's texts; why is the reason a value is
// refused.
func errConfigSetFailed(name, why string) string {
	return "ERR CONFIG SET failed (possibly related to argument '" + acl.Sanitize([]byte(name), 64) + "') - " + why
}

// configSetRefused is CONFIG SET's reply when Config.ConfigSet refuses a
// value: the refusal's text is the reason, so it must be written for
// clients (cmd/rlserver's settings are).
func configSetRefused(name string, err error) string {
	return errConfigSetFailed(name, acl.Sanitize([]byte(err.Error()), 200))
}

func errUnknownSetting(name string) string {
	return "ERR Unknown option or number of arguments for CONFIG SET - '" + acl.Sanitize([]byte(name), 64) + "'"
}

// Snapshots and SHUTDOWN (persist_cmd.go).
const (
	// errMisconf is Redis's MISCONF reply (shared.bgsaveerr), with
	// rlserver's snapshot where Redis names its RDB, so clients and
	// operators that look for MISCONF recognise it.
	errMisconf = "MISCONF rlserver is configured to save snapshots, but it's currently unable to persist to disk. " +
		"Commands that may modify the data set are disabled, because this instance is configured to report errors during writes " +
		"if snapshotting fails (stop-writes-on-bgsave-error option). Please check the rlserver log for details about the snapshot error."
	errNoPersistence  = "ERR this server keeps no snapshots (in cluster mode Raft takes them)"
	errSaveFailed     = "ERR snapshot save failed: see the server log"
	errBgsaveRunning  = "ERR Background save already in progress"
	errShutdownFailed = "ERR Errors trying to SHUTDOWN. Check logs."
	errNoShutdown     = "ERR No shutdown in progress."
)

// ErrorCode returns the code of an error reply's text: its first word
// (ERR, WRONGTYPE, NOAUTH...).
func ErrorCode(text string) string {
	if i := strings.IndexByte(text, ' '); i >= 0 {
		return text[:i]
	}
	return text
}

// engineErrorText maps an error from the engine, the backend or the
// policies to its wire text (command.Text). Unknown errors never leak
// their Go text.
func engineErrorText(err error) string { return command.Text(err) }

// BackendError is an error from a Backend that carries its own wire text
// (for example a cluster's TRYAGAIN): command.BackendError.
type BackendError = command.BackendError

// noPerm is Redis's text for a command the user may not run; a
// subcommand is named container|sub.
func noPerm(u *aclUser, c *entry) string {
	return ErrCodeNoPerm + " User " + u.Name() + " has no permissions to run the '" + c.name + "' command"
}

func unknownCategory(cat []byte) string {
	return "ERR Unknown category '" + acl.Sanitize(cat, 128) + "'"
}

func wrongArity(fullname string) string { return command.WrongArity(fullname) }

func unknownSubcommand(sub []byte, cmd string) string {
	return "ERR unknown subcommand '" + acl.Sanitize(sub, 128) + "'. Try " + cmd + " HELP."
}

// unknownCommand is Redis's text for a command it does not know, byte for
// byte: the name cut to 128 bytes, then quoted arguments while the list is
// shorter than 128 bytes, each cut to what is left of those 128 (C strings:
// a NUL ends a name or argument), and '\r', '\n' shown as spaces.
func unknownCommand(args [][]byte) string {
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
