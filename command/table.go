package command

import (
	"iter"
	"slices"
	"strings"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// Cmd is one command, or one subcommand of a container (named
// "container|sub"), of the command table: what COMMAND reports of it,
// what ACL rules name, and how it runs.
//
// It runs in one of five ways, by the fields set:
//   - Batch and Render: a limiter command (RL.ALLOW, CL.THROTTLE, DEL,
//     TTL...) whose requests join the pipeline's batch; Batch and Data: a
//     data command (package kv), whose reply is the engine's as it is;
//   - Tiered and RenderTiered: RL.CHECK, whose requests name policies;
//   - Run: answered at once, after the pending batch, into a Call;
//   - Subcommands: a container (CONFIG, CLIENT, CLUSTER...); its Run, if
//     set, answers it called bare or with HELP, else HELP lists them;
//   - none of them: the edge's own (connections, AUTH, CLIENT, CONFIG,
//     INFO...), which need the connection or the server: the edge keeps
//     their handlers (Edge).
type Cmd struct {
	Name     string // lower case; "container|sub" for a subcommand
	Arity    int    // Redis's convention: n exact, -n at least n (name included)
	Flags    []string
	FirstKey int // key positions, as COMMAND reports them; 0: no keys
	LastKey  int // -1: the last argument
	KeyStep  int
	ACL      []string // ACL categories, "@" first, as COMMAND reports them
	Summary  string   // COMMAND DOCS
	Group    string   // COMMAND DOCS
	Since    string   // COMMAND DOCS
	NoAuth   bool     // allowed before AUTH, and to every ACL user
	// MovableKeys, when set, gives the key positions of a command whose
	// keys move with its options (RL.CHECK [COST n], EVAL); FirstKey,
	// LastKey and KeyStep then describe its plainest form for COMMAND.
	MovableKeys func(args [][]byte) (first, last, step int)
	// LeadKey, when set with MovableKeys, is the position of a key before
	// the movable ones (ZUNIONSTORE's destination, before its numkeys),
	// which the range MovableKeys gives does not hold: KeyPositions
	// yields it first.
	LeadKey int

	Batch  BatchFunc
	Render RenderFunc
	Data   bool // Batch's one request carries a kv command: its reply is the engine's
	// Tiered appends the requests and, aligned with them, their policy
	// names (or returns the error reply); RenderTiered writes the reply
	// (or returns its error text) and reports the decisions, the key to
	// count as denied, counting them per policy in store (nil: not
	// counted).
	Tiered       func(reqs []engine.Request, names, args [][]byte) ([]engine.Request, [][]byte, string)
	RenderTiered func(w *kv.Writer, reqs []engine.Request, names [][]byte, res []engine.Result, store *policy.Store) (allowed, denied int64, deniedKey []byte, errText string)
	Run          Handler

	Subcommands []*Cmd

	// Set when the command is registered.
	ID      int      // its index in All: its bit in an ACL user's bitmap, its counters; subcommands have their own
	Parent  *Cmd     // the container of a subcommand
	KeyPerm acl.Perm // the access its keys need from a user's key patterns
	Write   bool     // flagged write: refused with MISCONF while writes stop
	Blocks  bool     // flagged blocking: outside MULTI and scripts the edge parks the client while the reply is null
}

// Handler answers a command at once: it writes its reply into x.W, or
// sets an error reply (x.fail). args fit the command's arity.
type Handler func(x *Call, args [][]byte)

// ArityOK reports whether n arguments (name included) fit the arity.
func (c *Cmd) ArityOK(n int) bool {
	if c.Arity >= 0 {
		return n == c.Arity
	}
	return n >= -c.Arity
}

// Keys returns the positions of the command's keys in args: first
// (0: none), last (inclusive, resolved against len(args)) and step.
func (c *Cmd) Keys(args [][]byte) (first, last, step int) {
	if c.MovableKeys != nil {
		return c.MovableKeys(args)
	}
	last = c.LastKey
	if last < 0 {
		last += len(args)
	}
	return c.FirstKey, last, c.KeyStep
}

// KeyPositions yields the positions of the command's keys in args:
// LeadKey's, then the range of Keys. Routing, ACL key patterns, the key
// length limit and BUSY go through it, so no key escapes them.
func (c *Cmd) KeyPositions(args [][]byte) iter.Seq[int] {
	return func(yield func(int) bool) {
		if c.LeadKey > 0 && c.LeadKey < len(args) && !yield(c.LeadKey) {
			return
		}
		first, last, step := c.Keys(args)
		for i := first; i > 0 && i <= last && i < len(args); i += step {
			if !yield(i) {
				return
			}
		}
	}
}

// Keyed reports whether the command may have keys (fixed or movable).
func (c *Cmd) Keyed() bool { return c.FirstKey > 0 || c.MovableKeys != nil }

// HasFlag reports whether the command has the COMMAND flag f.
func (c *Cmd) HasFlag(f string) bool { return slices.Contains(c.Flags, f) }

// Edge reports whether the edge answers the command itself: it has no
// way to run of its own here.
func (c *Cmd) Edge() bool {
	return c.Batch == nil && c.Tiered == nil && c.Run == nil && c.Subcommands == nil
}

// Decides reports whether the command's replies are limiter decisions
// (status.Command.Decides): the algorithm commands and RL.PEEK (batched,
// in @ratelimit, not a keyspace command such as RL.RESET) and RL.CHECK
// (tiered).
func (c *Cmd) Decides() bool {
	return c.Tiered != nil || (c.Batch != nil && slices.Contains(c.ACL, "@ratelimit") && !slices.Contains(c.ACL, "@keyspace"))
}

// Sub finds a container's subcommand by its lower-case name.
func (c *Cmd) Sub(lowerSub []byte) *Cmd {
	for _, sc := range c.Subcommands {
		if sc.Name[len(c.Name)+1:] == string(lowerSub) {
			return sc
		}
	}
	return nil
}

var (
	table = map[string]*Cmd{} // the commands by name, subcommands inside them
	byID  []*Cmd              // every command and subcommand by ID
)

// register adds commands to the table; a duplicate name, or a command
// with two ways to run, is a programming error and panics at start-up.
func register(cmds ...*Cmd) {
	for _, c := range cmds {
		if _, dup := table[c.Name]; dup {
			panic("command: duplicate command " + c.Name)
		}
		ways := 0
		for _, set := range []bool{c.Batch != nil, c.Tiered != nil, c.Run != nil && c.Subcommands == nil} {
			if set {
				ways++
			}
		}
		if ways > 1 || (c.Batch != nil) != (c.Render != nil || c.Data) || (c.Tiered != nil) != (c.RenderTiered != nil) {
			panic("command: " + c.Name + " needs one of Batch+Render, Batch+Data, Tiered+RenderTiered, Run")
		}
		table[c.Name] = c
		addID(c)
		for _, sc := range c.Subcommands {
			sc.Parent = c
			addID(sc)
		}
	}
}

func addID(c *Cmd) {
	c.ID = len(byID)
	byID = append(byID, c)
	c.Write = c.HasFlag("write")
	c.Blocks = c.HasFlag("blocking")
	switch {
	case c.HasFlag("readonly"):
		c.KeyPerm = acl.Read
	case c.Name == "del" || c.Name == "unlink" || c.Name == "rl.reset":
		c.KeyPerm = acl.Write
	default:
		c.KeyPerm = acl.Read | acl.Write
	}
}

// All lists every command and subcommand by ID. It is complete once the
// package's init functions have run.
func All() []*Cmd { return byID }

// Lookup returns the command named lowerName (lower case), or nil.
func Lookup(lowerName []byte) *Cmd { return table[string(lowerName)] }

// ByName finds a command or, as container|sub, a subcommand.
func ByName(name string) *Cmd {
	parent, sub, isSub := strings.Cut(name, "|")
	c := table[parent]
	if c == nil || !isSub {
		return c
	}
	return c.Sub([]byte(sub))
}

// lookupLimiter returns the limiter command named lowerName, or nil.
func lookupLimiter(lowerName []byte) *Cmd {
	if c := table[string(lowerName)]; c != nil && c.Render != nil {
		return c
	}
	return nil
}

// sortedNames lists the commands' names (not subcommands'), sorted.
func sortedNames() []string {
	names := make([]string, 0, len(table))
	for n := range table {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// WriteHelp writes a container's HELP: its usage line, then each
// subcommand's name and summary.
func WriteHelp(w *kv.Writer, c *Cmd) {
	w.Array(1 + 2*len(c.Subcommands))
	w.Status(strings.ToUpper(c.Name) + " <subcommand> [<arg> [value] [opt] ...]. Subcommands are:")
	for _, sc := range c.Subcommands {
		w.Status(strings.ToUpper(sc.Name[len(c.Name)+1:]))
		w.Status("    " + sc.Summary)
	}
}

// container makes a command whose first argument names a subcommand.
func container(name, summary, group string, subs ...*Cmd) *Cmd {
	return &Cmd{Name: name, Arity: -2, ACL: []string{"@slow"}, Summary: summary, Group: group, Since: "1.0.0", Subcommands: subs}
}

// sub makes a subcommand of the connection group.
func sub(parent, name string, arity int, flags []string, summary string, run Handler) *Cmd {
	return &Cmd{Name: parent + "|" + name, Arity: arity, Flags: flags, ACL: []string{"@slow", "@connection"},
		Summary: summary, Group: "connection", Since: "1.0.0", Run: run}
}

// admin gives c Redis's categories for an admin command (CLIENT LIST
// shows every client's address): @admin @slow @dangerous @connection.
func admin(c *Cmd) *Cmd {
	c.ACL = []string{"@admin", "@slow", "@dangerous", "@connection"}
	return c
}
