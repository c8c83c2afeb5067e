package command

import (
	"strconv"

	"github.com/rlserver/rlserver/kv"
)

// COMMAND INFO and COMMAND DOCS: a command described as Redis 7 describes
// it, so cluster-aware and tool clients find arity, flags and key
// positions. The edge keeps the table; it describes each entry as a Desc.

// Desc describes one command or subcommand (name "container|sub").
type Desc struct {
	Name     string // lower case
	Arity    int
	Flags    []string
	FirstKey int // key positions of its plainest form
	LastKey  int
	KeyStep  int
	ACL      []string // ACL categories, "@" first
	Summary  string
	Group    string
	Since    string
	// Movable: its keys move with its options (RL.CHECK [COST n], EVAL):
	// the key range is flagged incomplete, so clients ask COMMAND GETKEYS.
	Movable     bool
	Subcommands []*Desc
}

func (d *Desc) hasFlag(f string) bool {
	for _, x := range d.Flags {
		if x == f {
			return true
		}
	}
	return false
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

// WriteInfo writes Redis 7's ten-field command description: name, arity,
// flags, first key, last key, step, ACL categories, tips, key
// specifications, subcommands.
func WriteInfo(w *kv.Writer, d *Desc) {
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
		WriteInfo(w, sc)
	}
}

// writeKeySpec describes the keys as one range starting at FirstKey,
// with Redis's key-spec flags (an access flag in upper case, the logical
// ones in lower case, as Redis spells them). A command whose keys move
// with its options (RL.CHECK [COST n]) has the range of its plainest form
// flagged incomplete, which is what makes Redis and its clients treat it
// as movablekeys and ask COMMAND GETKEYS.
func writeKeySpec(w *kv.Writer, d *Desc) {
	flags := []string{"RW", "update"}
	switch {
	case d.hasFlag("readonly"):
		flags = []string{"RO", "access"}
	case d.Name == "del" || d.Name == "unlink" || d.Name == "rl.reset":
		flags = []string{"RM", "delete"}
	}
	if d.Movable {
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

// WriteDocs writes COMMAND DOCS's map of one command: summary, since,
// group, and its subcommands' docs.
func WriteDocs(w *kv.Writer, d *Desc) {
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
			WriteDocs(w, sc)
		}
	}
}
