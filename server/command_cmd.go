package server

import (
	"sort"
	"strings"

	"github.com/rlserver/rlserver/acl"
)

// COMMAND: the command table as Redis reports it, so cluster-aware and
// tool clients find arity, flags and key positions.

func commandCommand() *entry {
	c := container("command", "Returns detailed information about all commands.", "server",
		&entry{name: "command|count", arity: 2, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
			summary: "Returns a count of commands.", group: "server", since: "2.8.13",
			handler: func(_ *Server, c *client, _ [][]byte) outcome {
				c.rep.conn.WriteInt(len(commands))
				return cmdOK
			}},
		&entry{name: "command|list", arity: -2, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
			summary: "Returns a list of command names.", group: "server", since: "7.0.0",
			handler: cmdCommandList},
		&entry{name: "command|info", arity: -2, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
			summary: "Returns information about one, multiple or all commands.", group: "server", since: "2.8.13",
			handler: func(_ *Server, c *client, args [][]byte) outcome {
				if len(args) == 2 {
					writeAllCommandInfo(&c.rep)
					return cmdOK
				}
				c.rep.conn.WriteArray(len(args) - 2)
				for _, a := range args[2:] {
					if cmd := commands[strings.ToLower(string(a))]; cmd != nil {
						writeCommandInfo(&c.rep, cmd)
					} else {
						c.rep.null()
					}
				}
				return cmdOK
			}},
		&entry{name: "command|docs", arity: -2, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
			summary: "Returns documentary information about one, multiple or all commands.", group: "server", since: "7.0.0",
			handler: func(_ *Server, c *client, args [][]byte) outcome {
				var list []*entry
				if len(args) == 2 {
					for _, n := range sortedNames() {
						list = append(list, commands[n])
					}
				} else {
					for _, a := range args[2:] {
						if cmd := commands[strings.ToLower(string(a))]; cmd != nil {
							list = append(list, cmd)
						}
					}
				}
				c.rep.mapHeader(len(list))
				for _, cmd := range list {
					c.rep.conn.WriteBulkString(cmd.name)
					writeCommandDocs(&c.rep, cmd)
				}
				return cmdOK
			}},
		&entry{name: "command|getkeys", arity: -3, flags: []string{"loading", "stale"}, acl: []string{"@slow", "@connection"},
			summary: "Extracts the key names from an arbitrary command.", group: "server", since: "2.8.13",
			handler: func(_ *Server, c *client, args [][]byte) outcome {
				cmd := commands[strings.ToLower(string(args[2]))]
				if cmd == nil {
					c.rep.error(errGetKeysUnknown)
					return cmdOK
				}
				// Redis's order: a command without keys, then the
				// arity, then a keyed command whose arguments hold none
				// (RL.CHECK COST n with no tier).
				if cmd.firstKey == 0 {
					c.rep.error(errGetKeysNoKeys)
					return cmdOK
				}
				cargs := args[2:]
				if !cmd.arityOK(len(cargs)) {
					c.rep.error(errGetKeysArity)
					return cmdOK
				}
				keys := keyArgs(cmd, cargs)
				if len(keys) == 0 {
					c.rep.error(errGetKeysBadArgs)
					return cmdOK
				}
				c.rep.conn.WriteArray(len(keys))
				for _, k := range keys {
					c.rep.conn.WriteBulk(k)
				}
				return cmdOK
			}},
	)
	c.flags = []string{"loading", "stale"}
	c.acl = []string{"@slow", "@connection"} // as Redis's: clients call it at connect
	// COMMAND with no subcommand lists every command.
	inner := c.handler
	c.arity = -1
	c.handler = func(s *Server, cl *client, args [][]byte) outcome {
		if len(args) == 1 {
			writeAllCommandInfo(&cl.rep)
			return cmdOK
		}
		return inner(s, cl, args)
	}
	return c
}

func keyArgs(cmd *entry, args [][]byte) [][]byte {
	if cmd.firstKey == 0 {
		return nil
	}
	first, last, step := cmd.keyRange(args)
	var keys [][]byte
	for i := first; i <= last && i < len(args); i += step {
		keys = append(keys, args[i])
	}
	return keys
}

func sortedNames() []string {
	names := make([]string, 0, len(commands))
	for n := range commands {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

func writeAllCommandInfo(r *replier) {
	names := sortedNames()
	r.conn.WriteArray(len(names))
	for _, n := range names {
		writeCommandInfo(r, commands[n])
	}
}

// writeCommandInfo writes Redis 7's ten-field command description:
// name, arity, flags, first key, last key, step, ACL categories, tips,
// key specifications, subcommands.
func writeCommandInfo(r *replier, c *entry) {
	r.conn.WriteArray(10)
	r.conn.WriteBulkString(c.name)
	r.conn.WriteInt(c.arity)
	r.setHeader(len(c.flags))
	for _, f := range c.flags {
		r.conn.WriteString(f)
	}
	r.conn.WriteInt(c.firstKey)
	r.conn.WriteInt(c.lastKey)
	r.conn.WriteInt(c.keyStep)
	r.setHeader(len(c.acl))
	for _, a := range c.acl {
		r.conn.WriteString(a)
	}
	r.conn.WriteArray(0) // tips
	if c.firstKey == 0 {
		r.conn.WriteArray(0)
	} else {
		r.conn.WriteArray(1)
		writeKeySpec(r, c)
	}
	r.conn.WriteArray(len(c.subcommands))
	for _, sc := range c.subcommands {
		writeCommandInfo(r, sc)
	}
}

// writeKeySpec describes the keys as one range starting at firstKey,
// with Redis's key-spec flags (an access flag in upper case, the logical
// ones in lower case, as Redis spells them). A command whose keys move
// with its options (RL.CHECK [COST n]) has the range of its plainest form
// flagged incomplete, which is what makes Redis and its clients treat it
// as movablekeys and ask COMMAND GETKEYS.
func writeKeySpec(r *replier, c *entry) {
	flags := []string{"RW", "update"}
	switch {
	case hasFlag(c, "readonly"):
		flags = []string{"RO", "access"}
	case c.name == "del" || c.name == "unlink" || c.name == "rl.reset":
		flags = []string{"RM", "delete"}
	}
	if c.movableKeys != nil {
		flags = append(flags, "incomplete")
	}
	lastKey := 0
	if c.lastKey < 0 {
		lastKey = -1
	}
	r.mapHeader(3)
	r.conn.WriteBulkString("flags")
	r.setHeader(len(flags))
	for _, f := range flags {
		r.conn.WriteString(f)
	}
	r.conn.WriteBulkString("begin_search")
	r.mapHeader(2)
	r.conn.WriteBulkString("type")
	r.conn.WriteBulkString("index")
	r.conn.WriteBulkString("spec")
	r.mapHeader(1)
	r.conn.WriteBulkString("index")
	r.conn.WriteInt(c.firstKey)
	r.conn.WriteBulkString("find_keys")
	r.mapHeader(2)
	r.conn.WriteBulkString("type")
	r.conn.WriteBulkString("range")
	r.conn.WriteBulkString("spec")
	r.mapHeader(3)
	r.conn.WriteBulkString("lastkey")
	r.conn.WriteInt(lastKey)
	r.conn.WriteBulkString("keystep")
	r.conn.WriteInt(c.keyStep)
	r.conn.WriteBulkString("limit")
	r.conn.WriteInt(0)
}

func hasFlag(c *entry, f string) bool {
	for _, x := range c.flags {
		if x == f {
			return true
		}
	}
	return false
}

func writeCommandDocs(r *replier, c *entry) {
	n := 3
	if len(c.subcommands) > 0 {
		n++
	}
	r.mapHeader(n)
	r.conn.WriteBulkString("summary")
	r.conn.WriteBulkString(c.summary)
	r.conn.WriteBulkString("since")
	r.conn.WriteBulkString(c.since)
	r.conn.WriteBulkString("group")
	r.conn.WriteBulkString(c.group)
	if len(c.subcommands) > 0 {
		r.conn.WriteBulkString("subcommands")
		r.mapHeader(len(c.subcommands))
		for _, sc := range c.subcommands {
			r.conn.WriteBulkString(sc.name)
			writeCommandDocs(r, sc)
		}
	}
}

// cmdCommandList: COMMAND LIST [FILTERBY MODULE name | ACLCAT category |
// PATTERN glob]. Without a filter it names the commands (COMMAND COUNT of
// them). A filter, as Redis's, looks at subcommands too ("config|get"):
// ACLCAT takes a category without its '@' (an unknown one matches
// nothing), PATTERN a glob matched against the full name ignoring case,
// MODULE a module's name (rlserver has none: always empty). Anything else
// is a syntax error.
func cmdCommandList(_ *Server, c *client, args [][]byte) outcome {
	if len(args) == 2 {
		names := sortedNames()
		c.rep.conn.WriteArray(len(names))
		for _, n := range names {
			c.rep.conn.WriteBulkString(n)
		}
		return cmdOK
	}
	if len(args) != 5 || !equalFold(args[2], "filterby") {
		c.rep.error(errSyntax)
		return cmdOK
	}
	arg := strings.ToLower(string(args[4]))
	var keep func(*entry) bool
	switch {
	case equalFold(args[3], "module"):
		keep = func(*entry) bool { return false }
	case equalFold(args[3], "aclcat"):
		keep = func(cmd *entry) bool {
			for _, a := range cmd.acl {
				if a[1:] == arg {
					return true
				}
			}
			return false
		}
	case equalFold(args[3], "pattern"):
		keep = func(cmd *entry) bool { return acl.Glob(arg, cmd.name) }
	default:
		c.rep.error(errSyntax)
		return cmdOK
	}
	var names []string
	for _, n := range sortedNames() {
		cmd := commands[n]
		if keep(cmd) {
			names = append(names, cmd.name)
		}
		for _, sc := range cmd.subcommands {
			if keep(sc) {
				names = append(names, sc.name)
			}
		}
	}
	c.rep.conn.WriteArray(len(names))
	for _, n := range names {
		c.rep.conn.WriteBulkString(n)
	}
	return cmdOK
}
