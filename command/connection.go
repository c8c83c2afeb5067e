package command

import (
	"strconv"
	"time"
)

// The handshake and connection commands that real clients send. The ones
// that change the connection (HELLO, AUTH, QUIT, RESET, CLIENT) are the
// edge's to answer (Cmd.Edge); they are described here with the rest.

func init() {
	handshake := []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}
	conn := []string{"noscript", "loading", "stale"}
	register(
		&Cmd{Name: "ping", Arity: -1, Flags: []string{"fast"}, ACL: []string{"@fast", "@connection"},
			Summary: "Returns the server's liveliness response.", Group: "connection", Since: "1.0.0", Run: ping},
		&Cmd{Name: "echo", Arity: 2, Flags: []string{"fast"}, ACL: []string{"@fast", "@connection"},
			Summary: "Returns the given string.", Group: "connection", Since: "1.0.0",
			Run: func(x *Call, args [][]byte) { x.W.Bulk(args[1]) }},
		&Cmd{Name: "hello", Arity: -1, Flags: handshake, ACL: []string{"@fast", "@connection"},
			Summary: "Handshakes with the server.", Group: "connection", Since: "6.0.0", NoAuth: true},
		&Cmd{Name: "auth", Arity: -2, Flags: handshake, ACL: []string{"@fast", "@connection"},
			Summary: "Authenticates the connection.", Group: "connection", Since: "1.0.0", NoAuth: true},
		&Cmd{Name: "select", Arity: 2, Flags: []string{"loading", "stale", "fast"}, ACL: []string{"@keyspace", "@fast"},
			Summary: "Changes the selected database (only 0 exists).", Group: "connection", Since: "1.0.0", Run: selectDB},
		&Cmd{Name: "quit", Arity: -1, Flags: handshake, ACL: []string{"@fast", "@connection"},
			Summary: "Closes the connection.", Group: "connection", Since: "1.0.0", NoAuth: true},
		&Cmd{Name: "reset", Arity: 1, Flags: handshake, ACL: []string{"@fast", "@connection"},
			Summary: "Resets the connection.", Group: "connection", Since: "6.2.0", NoAuth: true},
		&Cmd{Name: "time", Arity: 1, Flags: []string{"loading", "stale", "fast"}, ACL: []string{"@fast"},
			Summary: "Returns the server time.", Group: "server", Since: "2.6.0", Run: serverTime},
		container("client", "A container for client connection commands.", "connection",
			sub("client", "setname", 3, conn, "Sets the connection name.", nil),
			sub("client", "getname", 2, conn, "Returns the name of the connection.", nil),
			sub("client", "id", 2, conn, "Returns the unique client ID of the connection.", nil),
			sub("client", "setinfo", 4, conn, "Sets information specific to the client or connection.", nil),
			sub("client", "info", 2, conn, "Returns information about the connection.", nil),
			admin(sub("client", "list", -2, []string{"admin", "noscript", "loading", "stale"}, "Lists open connections.", nil)),
			admin(sub("client", "kill", -3, []string{"admin", "noscript", "loading", "stale"}, "Terminates open connections.", nil)),
			admin(sub("client", "unblock", -3, []string{"admin", "noscript", "loading", "stale"}, "Unblocks a client blocked by a blocking command from a different connection.", nil)),
			admin(sub("client", "no-evict", 3, []string{"admin", "noscript", "loading", "stale"}, "Sets the client eviction mode of the connection.", nil)),
			sub("client", "reply", 3, conn, "Instructs the server whether to reply to commands.", nil),
		),
	)
}

func ping(x *Call, args [][]byte) {
	switch len(args) {
	case 1:
		x.W.Status("PONG")
	case 2:
		x.W.Bulk(args[1])
	default:
		x.fail(WrongArity("ping"))
	}
}

func selectDB(x *Call, args [][]byte) {
	n, ok := ParseInt(args[1])
	switch {
	case !ok:
		x.fail(ErrNotInteger)
	case n != 0:
		x.fail(ErrDBIndex)
	default:
		x.W.OK()
	}
}

func serverTime(x *Call, _ [][]byte) {
	now := time.Now()
	x.W.Array(2)
	x.W.BulkString(strconv.FormatInt(now.Unix(), 10))
	x.W.BulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
}

// ValidClientName reports whether b may name a client (CLIENT SETNAME,
// HELLO SETNAME) or be a CLIENT SETINFO value: no spaces, newlines or
// special characters.
func ValidClientName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}
