package server

import (
	"context"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/acl"
)

// The handshake and server commands that real clients send.

func init() {
	register(
		&entry{name: "ping", arity: -1, flags: []string{"fast"}, acl: []string{"@fast", "@connection"},
			summary: "Returns the server's liveliness response.", group: "connection", since: "1.0.0", handler: cmdPing},
		&entry{name: "echo", arity: 2, flags: []string{"fast"}, acl: []string{"@fast", "@connection"},
			summary: "Returns the given string.", group: "connection", since: "1.0.0", handler: cmdEcho},
		&entry{name: "hello", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"},
			summary: "Handshakes with the server.", group: "connection", since: "6.0.0", noAuth: true, handler: cmdHello},
		&entry{name: "auth", arity: -2, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"},
			summary: "Authenticates the connection.", group: "connection", since: "1.0.0", noAuth: true, handler: cmdAuth},
		&entry{name: "select", arity: 2, flags: []string{"loading", "stale", "fast"}, acl: []string{"@keyspace", "@fast"},
			summary: "Changes the selected database (only 0 exists).", group: "connection", since: "1.0.0", handler: cmdSelect},
		&entry{name: "quit", arity: -1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"},
			summary: "Closes the connection.", group: "connection", since: "1.0.0", noAuth: true, handler: cmdQuitHandler},
		&entry{name: "reset", arity: 1, flags: []string{"noscript", "loading", "stale", "fast", "no_auth", "allow_busy"}, acl: []string{"@fast", "@connection"},
			summary: "Resets the connection.", group: "connection", since: "6.2.0", noAuth: true, handler: cmdReset},
		&entry{name: "time", arity: 1, flags: []string{"loading", "stale", "fast"}, acl: []string{"@fast"},
			summary: "Returns the server time.", group: "server", since: "2.6.0", handler: cmdTime},
		&entry{name: "dbsize", arity: 1, flags: []string{"readonly", "fast"}, acl: []string{"@keyspace", "@read", "@fast"},
			summary: "Returns the number of keys: limiter state and data keys.", group: "server", since: "1.0.0", handler: cmdDBSize},
		&entry{name: "flushall", arity: -1, flags: []string{"write"}, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"},
			summary: "Removes all keys.", group: "server", since: "1.0.0", handler: cmdFlushAll},
		&entry{name: "flushdb", arity: -1, flags: []string{"write"}, acl: []string{"@keyspace", "@write", "@slow", "@dangerous"},
			summary: "Removes all keys of the current database (the only one).", group: "server", since: "1.0.0", handler: cmdFlushAll},
		&entry{name: "info", arity: -1, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@dangerous"},
			summary: "Returns information and statistics about the server.", group: "server", since: "1.0.0", handler: cmdInfo},
		clientCommand(),
		commandCommand(),
		configCommand(configSetCommand(), configResetStatCommand()),
	)
}

func sub(parent, name string, arity int, flags []string, summary string, h func(*Server, *client, [][]byte) outcome) *entry {
	return &entry{name: parent + "|" + name, arity: arity, flags: flags, acl: []string{"@slow", "@connection"},
		summary: summary, group: "connection", since: "1.0.0", handler: h}
}

// admin gives c Redis's categories for an admin command (CLIENT LIST
// shows every client's address): @admin @slow @dangerous @connection.
func admin(c *entry) *entry {
	c.acl = []string{"@admin", "@slow", "@dangerous", "@connection"}
	return c
}

// container makes a command whose first argument names a subcommand.
func container(name, summary, group string, subs ...*entry) *entry {
	c := &entry{name: name, arity: -2, acl: []string{"@slow"}, summary: summary, group: group, since: "1.0.0", subcommands: subs}
	c.handler = func(s *Server, cl *client, args [][]byte) outcome {
		cl.lower = appendLower(cl.lower[:0], args[1])
		if string(cl.lower) == "help" {
			lines := []string{strings.ToUpper(name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:"}
			for _, sc := range c.subcommands {
				lines = append(lines, strings.ToUpper(sc.name[len(name)+1:]), "    "+sc.summary)
			}
			cl.rep.conn.WriteArray(len(lines))
			for _, l := range lines {
				cl.rep.conn.WriteString(l)
			}
			return cmdOK
		}
		sc := c.lookupSub(cl.lower)
		if sc == nil {
			cl.rep.error(unknownSubcommand(args[1], strings.ToUpper(name)))
			return cmdOK
		}
		if !sc.arityOK(len(args)) {
			cl.rep.error(wrongArity(sc.name))
			return cmdOK
		}
		if s.refusesWrite(sc) {
			cl.rep.error(errMisconf)
			return cmdOK
		}
		// CLIENT LIST's cmd= and INFO commandstats name the subcommand,
		// as Redis's do.
		cl.sub = sc
		cl.mu.Lock()
		cl.lastCmd = sc.name
		cl.mu.Unlock()
		return sc.handler(s, cl, args)
	}
	return c
}

func cmdPing(_ *Server, c *client, args [][]byte) outcome {
	switch len(args) {
	case 1:
		c.rep.conn.WriteString("PONG")
	case 2:
		c.rep.conn.WriteBulk(args[1])
	default:
		c.rep.error(wrongArity("ping"))
	}
	return cmdOK
}

func cmdEcho(_ *Server, c *client, args [][]byte) outcome {
	c.rep.conn.WriteBulk(args[1])
	return cmdOK
}

// authenticate returns the user that user/pass open (user nil: the
// default user), counting a failure.
func (s *Server) authenticate(user, pass []byte) *aclUser {
	if user == nil {
		user = []byte("default")
	}
	u := s.acl.authenticate(user, pass)
	if u == nil {
		s.Stats.AuthFailures.Add(1)
		s.warn("auth", "authentication failed", "user", acl.Sanitize(user, 64))
	}
	return u
}

func cmdAuth(s *Server, c *client, args [][]byte) outcome {
	var user, pass []byte
	switch len(args) {
	case 2:
		if s.acl.defaultUser().NoPass() {
			c.rep.error(errNoPassSet)
			return cmdOK
		}
		pass = args[1]
	case 3:
		user, pass = args[1], args[2]
	default:
		c.rep.error(errSyntax)
		return cmdOK
	}
	u := s.authenticate(user, pass)
	if u == nil {
		c.rep.error(errWrongPass)
		return cmdOK
	}
	s.setUser(c, u)
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdHello(s *Server, c *client, args [][]byte) outcome {
	proto := 0
	if len(args) >= 2 {
		v, ok := parseInt(args[1])
		if !ok {
			c.rep.error(errProtoNotInteger)
			return cmdOK
		}
		if v != 2 && v != 3 {
			c.rep.error(errProtoVersion)
			return cmdOK
		}
		proto = int(v)
	}
	var name []byte
	user := c.user
	for i := 2; i < len(args); i++ {
		switch {
		case equalFold(args[i], "auth") && i+2 < len(args):
			if user = s.authenticate(args[i+1], args[i+2]); user == nil {
				c.rep.error(errWrongPass)
				return cmdOK
			}
			i += 2
		case equalFold(args[i], "setname") && i+1 < len(args):
			name = args[i+1]
			if !validClientName(name) {
				c.rep.error(errClientName)
				return cmdOK
			}
			i++
		default:
			c.rep.error(helloBadOption(args[i]))
			return cmdOK
		}
	}
	if user == nil {
		c.rep.error(errHelloNoAuth)
		return cmdOK
	}
	if user != c.user {
		s.setUser(c, user)
	}
	if proto != 0 {
		c.setProto(proto)
	}
	if name != nil {
		c.mu.Lock()
		c.name = string(name)
		c.mu.Unlock()
	}
	r := &c.rep
	r.mapHeader(7)
	r.conn.WriteBulkString("server")
	r.conn.WriteBulkString("rlserver")
	// Clients gate features on the Redis version they see here; rlserver's
	// own version is in INFO (rlserver_version).
	r.conn.WriteBulkString("version")
	r.conn.WriteBulkString(redisVersion)
	r.conn.WriteBulkString("proto")
	if r.resp3() {
		r.conn.WriteInt(3)
	} else {
		r.conn.WriteInt(2)
	}
	r.conn.WriteBulkString("id")
	r.conn.WriteInt64(c.id)
	r.conn.WriteBulkString("mode")
	r.conn.WriteBulkString(s.redisMode())
	r.conn.WriteBulkString("role")
	r.conn.WriteBulkString("master")
	r.conn.WriteBulkString("modules")
	r.conn.WriteArray(0)
	return cmdOK
}

func cmdSelect(_ *Server, c *client, args [][]byte) outcome {
	n, ok := parseInt(args[1])
	switch {
	case !ok:
		c.rep.error(errNotInteger)
	case n != 0:
		c.rep.error(errDBIndex)
	default:
		c.rep.conn.WriteString("OK")
	}
	return cmdOK
}

func cmdQuitHandler(_ *Server, c *client, _ [][]byte) outcome {
	c.rep.conn.WriteString("OK")
	return cmdQuit
}

func cmdReset(s *Server, c *client, _ [][]byte) outcome {
	c.setProto(2)
	s.setUser(c, s.initialUser())
	c.mu.Lock()
	c.name = ""
	c.noEvict = false
	c.mu.Unlock()
	c.resetReplyMode() // client.go
	c.txn.Reset()      // command.Txn
	c.rep.conn.WriteString("RESET")
	return cmdOK
}

func cmdTime(_ *Server, c *client, _ [][]byte) outcome {
	now := time.Now()
	c.rep.conn.WriteArray(2)
	c.rep.conn.WriteBulkString(strconv.FormatInt(now.Unix(), 10))
	c.rep.conn.WriteBulkString(strconv.FormatInt(int64(now.Nanosecond()/1000), 10))
	return cmdOK
}

func cmdDBSize(s *Server, c *client, _ [][]byte) outcome {
	n, err := s.backend.Len(context.Background())
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteInt(n)
	return cmdOK
}

func cmdFlushAll(s *Server, c *client, args [][]byte) outcome {
	if len(args) > 2 || (len(args) == 2 && !equalFold(args[1], "sync") && !equalFold(args[1], "async")) {
		c.rep.error(errSyntax)
		return cmdOK
	}
	if err := s.backend.Flush(context.Background()); err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

// CLIENT

func validClientName(b []byte) bool {
	for _, c := range b {
		if c < '!' || c > '~' {
			return false
		}
	}
	return true
}

func clientCommand() *entry {
	return container("client", "A container for client connection commands.", "connection",
		sub("client", "setname", 3, []string{"noscript", "loading", "stale"}, "Sets the connection name.", func(_ *Server, c *client, args [][]byte) outcome {
			if !validClientName(args[2]) {
				c.rep.error(errClientName)
				return cmdOK
			}
			c.mu.Lock()
			c.name = string(args[2])
			c.mu.Unlock()
			c.rep.conn.WriteString("OK")
			return cmdOK
		}),
		sub("client", "getname", 2, []string{"noscript", "loading", "stale"}, "Returns the name of the connection.", func(_ *Server, c *client, _ [][]byte) outcome {
			c.mu.Lock()
			name := c.name
			c.mu.Unlock()
			if name == "" {
				c.rep.null()
			} else {
				c.rep.conn.WriteBulkString(name)
			}
			return cmdOK
		}),
		sub("client", "id", 2, []string{"noscript", "loading", "stale"}, "Returns the unique client ID of the connection.", func(_ *Server, c *client, _ [][]byte) outcome {
			c.rep.conn.WriteInt64(c.id)
			return cmdOK
		}),
		sub("client", "setinfo", 4, []string{"noscript", "loading", "stale"}, "Sets information specific to the client or connection.", func(_ *Server, c *client, args [][]byte) outcome {
			if !validClientName(args[3]) {
				c.rep.error(badClientInfo(args[2]))
				return cmdOK
			}
			c.mu.Lock()
			defer c.mu.Unlock()
			switch {
			case equalFold(args[2], "lib-name"):
				c.libName = string(args[3])
			case equalFold(args[2], "lib-ver"):
				c.libVer = string(args[3])
			default:
				c.rep.error(unknownClientInfo(args[2]))
				return cmdOK
			}
			c.rep.conn.WriteString("OK")
			return cmdOK
		}),
		sub("client", "info", 2, []string{"noscript", "loading", "stale"}, "Returns information about the connection.", func(_ *Server, c *client, args [][]byte) outcome {
			c.rep.verbatim(c.info(time.Now(), args) + "\n")
			return cmdOK
		}),
		admin(sub("client", "list", -2, []string{"admin", "noscript", "loading", "stale"}, "Lists open connections.", cmdClientList)),
		clientKillCommand(), // client.go
		admin(sub("client", "no-evict", 3, []string{"admin", "noscript", "loading", "stale"}, "Sets the client eviction mode of the connection.", cmdClientNoEvict)),
		sub("client", "reply", 3, []string{"noscript", "loading", "stale"}, "Instructs the server whether to reply to commands.", cmdClientReply),
	)
}

// CONFIG

func configCommand(more ...*entry) *entry {
	c := container("config", "A container for server configuration commands.", "server", append([]*entry{
		&entry{name: "config|get", arity: -3, flags: []string{"admin", "noscript", "loading", "stale"}, acl: []string{"@admin", "@slow", "@dangerous"},
			summary: "Returns the effective values of configuration parameters.", group: "server", since: "2.0.0",
			handler: func(s *Server, c *client, args [][]byte) outcome {
				found := map[string]string{}
				for _, p := range args[2:] {
					pat := strings.ToLower(string(p))
					for k, v := range s.settings() {
						if acl.Glob(pat, k) {
							found[k] = v
						}
					}
				}
				keys := make([]string, 0, len(found))
				for k := range found {
					keys = append(keys, k)
				}
				sort.Strings(keys)
				c.rep.mapHeader(len(keys))
				for _, k := range keys {
					c.rep.conn.WriteBulkString(k)
					c.rep.conn.WriteBulkString(found[k])
				}
				return cmdOK
			}}}, more...)...,
	)
	c.flags = []string{"admin"}
	return c
}
