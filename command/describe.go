package command

import (
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/kv"
)

// COMMAND: the command table as Redis 7 reports it, so cluster-aware and
// tool clients find arity, flags and key positions.

func init() {
	server := []string{"loading", "stale"}
	conn := []string{"@slow", "@connection"}
	c := container("command", "Returns detailed information about all commands.", "server",
		&Cmd{Name: "command|count", Arity: 2, Flags: server, ACL: conn,
			Summary: "Returns a count of commands.", Group: "server", Since: "2.8.13",
			Run: func(x *Call, _ [][]byte) { x.W.Int(int64(len(table))) }},
		&Cmd{Name: "command|list", Arity: -2, Flags: server, ACL: conn,
			Summary: "Returns a list of command names.", Group: "server", Since: "7.0.0", Run: commandList},
		&Cmd{Name: "command|info", Arity: -2, Flags: server, ACL: conn,
			Summary: "Returns information about one, multiple or all commands.", Group: "server", Since: "2.8.13", Run: commandInfo},
		&Cmd{Name: "command|docs", Arity: -2, Flags: server, ACL: conn,
			Summary: "Returns documentary information about one, multiple or all commands.", Group: "server", Since: "7.0.0", Run: commandDocs},
		&Cmd{Name: "command|getkeys", Arity: -3, Flags: server, ACL: conn,
			Summary: "Extracts the key names from an arbitrary command.", Group: "server", Since: "2.8.13", Run: commandGetKeys},
	)
	c.Flags = server
	c.ACL = conn // as Redis's: clients call it at connect
	// COMMAND with no subcommand lists every command.
	c.Arity = -1
	c.Run = func(x *Call, args [][]byte) {
		if len(args) == 1 {
			writeAllInfo(&x.W)
			return
		}
		WriteHelp(&x.W, c)
	}
	register(c)
}

func writeAllInfo(w *kv.Writer) {
	names := sortedNames()
	w.Array(len(names))
	for _, n := range names {
		writeInfo(w, table[n])
	}
}

func commandInfo(x *Call, args [][]byte) {
	if len(args) == 2 {
		writeAllInfo(&x.W)
		return
	}
	x.W.Array(len(args) - 2)
	for _, a := range args[2:] {
		if cmd := table[strings.ToLower(string(a))]; cmd != nil {
			writeInfo(&x.W, cmd)
		} else {
			x.W.Nil()
		}
	}
}

func commandDocs(x *Call, args [][]byte) {
	var list []*Cmd
	if len(args) == 2 {
		for _, n := range sortedNames() {
			list = append(list, table[n])
		}
	} else {
		for _, a := range args[2:] {
			if cmd := table[strings.ToLower(string(a))]; cmd != nil {
				list = append(list, cmd)
			}
		}
	}
	x.W.Map(len(list))
	for _, cmd := range list {
		x.W.BulkString(cmd.Name)
		writeDocs(&x.W, cmd)
	}
}

// commandGetKeys: COMMAND GETKEYS command [arg ...], with Redis's order of
// refusals: a command without keys, then the arity, then a keyed command
// whose arguments hold none (RL.CHECK COST n with no tier).
func commandGetKeys(x *Call, args [][]byte) {
	cmd := table[strings.ToLower(string(args[2]))]
	if cmd == nil {
		x.fail(errGetKeysUnknown)
		return
	}
	if !cmd.Keyed() {
		x.fail(errGetKeysNoKeys)
		return
	}
	cargs := args[2:]
	if !cmd.ArityOK(len(cargs)) {
		x.fail(errGetKeysArity)
		return
	}
	var keys [][]byte
	for i := range cmd.KeyPositions(cargs) {
		keys = append(keys, cargs[i])
	}
	if len(keys) == 0 {
		x.fail(errGetKeysBadArgs)
		return
	}
	x.W.Array(len(keys))
	for _, k := range keys {
		x.W.Bulk(k)
	}
}

// commandList: COMMAND LIST [FILTERBY MODULE name | ACLCAT category |
// PATTERN glob]. Without a filter it names the commands (COMMAND COUNT of
// them). A filter, as Redis's, looks at subcommands too ("config|get"):
// ACLCAT takes a category without its '@' (an unknown one matches
// nothing), PATTERN a glob matched against the full name ignoring case,
// MODULE a module's name (rlserver has none: always empty). Anything else
// is a syntax error.
func commandList(x *Call, args [][]byte) {
	if len(args) == 2 {
		names := sortedNames()
		x.W.Array(len(names))
		for _, n := range names {
			x.W.BulkString(n)
		}
		return
	}
	if len(args) != 5 || !EqualFold(args[2], "filterby") {
		x.fail(ErrSyntax)
		return
	}
	arg := strings.ToLower(string(args[4]))
	var keep func(*Cmd) bool
	switch {
	case EqualFold(args[3], "module"):
		keep = func(*Cmd) bool { return false }
	case EqualFold(args[3], "aclcat"):
		keep = func(cmd *Cmd) bool {
			for _, a := range cmd.ACL {
				if a[1:] == arg {
					return true
				}
			}
			return false
		}
	case EqualFold(args[3], "pattern"):
		keep = func(cmd *Cmd) bool { return acl.Glob(arg, cmd.Name) }
	default:
		x.fail(ErrSyntax)
		return
	}
	var names []string
	for _, n := range sortedNames() {
		cmd := table[n]
		if keep(cmd) {
			names = append(names, cmd.Name)
		}
		for _, sc := range cmd.Subcommands {
			if keep(sc) {
				names = append(names, sc.Name)
			}
		}
	}
	x.W.Array(len(names))
	for _, n := range names {
		x.W.BulkString(n)
	}
}

// set writes a set header (RESP2: an array).
func set(w *kv.Writer, n int) {
	if w.RESP3 {
		w.B = append(w.B, '~')
	} else {
		w.B = append(w.B, '*')
	}
	w.B = strconv.AppendInt(w.B, int64(n), 10)
	w.B = append(w.B, '\r', '\n')
}

// writeInfo writes Redis 7's ten-field command description: name, arity,
// flags, first key, last key, step, ACL categories, tips, key
// specifications, subcommands.
func writeInfo(w *kv.Writer, d *Cmd) {
	w.Array(10)
	w.BulkString(d.Name)
	w.Int(int64(d.Arity))
	set(w, len(d.Flags))
	for _, f := range d.Flags {
		w.Status(f)
	}
	w.Int(int64(d.FirstKey))
	w.Int(int64(d.LastKey))
	w.Int(int64(d.KeyStep))
	set(w, len(d.ACL))
	for _, a := range d.ACL {
		w.Status(a)
	}
	w.Array(0) // tips
	if d.FirstKey == 0 {
		w.Array(0)
	} else {
		w.Array(1)
		writeKeySpec(w, d)
	}
	w.Array(len(d.Subcommands))
	for _, sc := range d.Subcommands {
		writeInfo(w, sc)
	}
}

// writeKeySpec describes the keys as one range starting at FirstKey,
// with Redis's key-spec flags (an access flag in upper case, the logical
// ones in lower case, as Redis spells them). A command whose keys move
// with its options (RL.CHECK [COST n]) has the range of its plainest form
// flagged incomplete, which is what makes Redis and its clients treat it
// as movablekeys and ask COMMAND GETKEYS.
func writeKeySpec(w *kv.Writer, d *Cmd) {
	flags := []string{"RW", "update"}
	switch {
	case d.HasFlag("readonly"):
		flags = []string{"RO", "access"}
	case d.Name == "del" || d.Name == "unlink" || d.Name == "rl.reset":
		flags = []string{"RM", "delete"}
	}
	if d.MovableKeys != nil {
		flags = append(flags, "incomplete")
	}
	lastKey := int64(0)
	if d.LastKey < 0 {
		lastKey = -1
	}
	w.Map(3)
	w.BulkString("flags")
	set(w, len(flags))
	for _, f := range flags {
		w.Status(f)
	}
	w.BulkString("begin_search")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("index")
	w.BulkString("spec")
	w.Map(1)
	w.BulkString("index")
	w.Int(int64(d.FirstKey))
	w.BulkString("find_keys")
	w.Map(2)
	w.BulkString("type")
	w.BulkString("range")
	w.BulkString("spec")
	w.Map(3)
	w.BulkString("lastkey")
	w.Int(lastKey)
	w.BulkString("keystep")
	w.Int(int64(d.KeyStep))
	w.BulkString("limit")
	w.Int(0)
}

// writeDocs writes COMMAND DOCS's map of one command: summary, since,
// group, and its subcommands' docs.
func writeDocs(w *kv.Writer, d *Cmd) {
	n := 3
	if len(d.Subcommands) > 0 {
		n++
	}
	w.Map(n)
	w.BulkString("summary")
	w.BulkString(d.Summary)
	w.BulkString("since")
	w.BulkString(d.Since)
	w.BulkString("group")
	w.BulkString(d.Group)
	if len(d.Subcommands) > 0 {
		w.BulkString("subcommands")
		w.Map(len(d.Subcommands))
		for _, sc := range d.Subcommands {
			w.BulkString(sc.Name)
			writeDocs(w, sc)
		}
	}
}
