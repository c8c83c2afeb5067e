package server

import (
	"sort"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/kv"
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

// desc describes c for COMMAND INFO and DOCS.
func (c *entry) desc() *command.Desc {
	d := &command.Desc{Name: c.name, Arity: c.arity, Flags: c.flags,
		FirstKey: c.firstKey, LastKey: c.lastKey, KeyStep: c.keyStep, ACL: c.acl,
		Summary: c.summary, Group: c.group, Since: c.since, Movable: c.movableKeys != nil}
	for _, sc := range c.subcommands {
		d.Subcommands = append(d.Subcommands, sc.desc())
	}
	return d
}

func writeCommandInfo(r *replier, c *entry) {
	w := kv.Writer{B: r.scratch[:0], RESP3: r.resp3()}
	command.WriteInfo(&w, c.desc())
	r.conn.WriteRaw(w.B)
	r.scratch = w.B
}

func writeCommandDocs(r *replier, c *entry) {
	w := kv.Writer{B: r.scratch[:0], RESP3: r.resp3()}
	command.WriteDocs(&w, c.desc())
	r.conn.WriteRaw(w.B)
	r.scratch = w.B
}

func hasFlag(c *entry, f string) bool {
	for _, x := range c.flags {
		if x == f {
			return true
		}
	}
	return false
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
