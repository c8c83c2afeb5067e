package server

import (
	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
)

// entry is one command of the command table.
type entry struct {
	name     string // lower case; "container|sub" for subcommands
	arity    int    // Redis convention: n exact, -n at least n (name included)
	flags    []string
	firstKey int // key positions, as COMMAND reports them
	lastKey  int
	keyStep  int
	acl      []string // ACL categories, as COMMAND reports them
	summary  string   // COMMAND DOCS
	group    string   // COMMAND DOCS
	since    string   // COMMAND DOCS
	noAuth   bool     // allowed before AUTH, and to every ACL user

	// id indexes the command's bit in an ACL user's permission bitmap
	// (acl.go); subcommands have their own. Assigned by register.
	id      int
	parent  *entry   // the container of a subcommand
	keyPerm acl.Perm // the access its keys need from a user's key patterns
	write   bool     // flagged write: refused with MISCONF while writes stop (persist_cmd.go)

	// A limiter command appends its engine requests to reqs (or returns an
	// error reply) and later renders the results; it reports how many
	// decisions allowed and denied, for INFO.
	batch  command.BatchFunc
	render func(r *replier, res []engine.Result) (allowed, denied int64)

	// Any other command runs at once, after the pending batch is answered.
	handler func(s *Server, c *client, args [][]byte) outcome

	subcommands []*entry

	// Tiered limiter commands (RL.CHECK, policy_cmd.go) name a policy per
	// request instead of batch and render: tiered appends the requests and,
	// aligned with them, their policy names; renderTiered writes the reply
	// from the requests, names and results, errors included, and reports
	// the decision, the key to count as denied, and whether it failed.
	tiered       func(reqs []engine.Request, names, args [][]byte) ([]engine.Request, [][]byte, string)
	renderTiered func(s *Server, r *replier, reqs []engine.Request, names [][]byte, res []engine.Result) (allowed, denied int64, deniedKey []byte, failed bool)
	// movableKeys, when set, gives the key positions of a command whose
	// keys move with its options (RL.CHECK [COST n] ...); firstKey,
	// lastKey and keyStep then describe its plainest form for COMMAND.
	movableKeys func(args [][]byte) (first, last, step int)
}

// keyRange returns the positions of cmd's keys in args: first, last
// (inclusive, already resolved against len(args)) and step.
func (c *entry) keyRange(args [][]byte) (first, last, step int) {
	if c.movableKeys != nil {
		return c.movableKeys(args)
	}
	last = c.lastKey
	if last < 0 {
		last += len(args)
	}
	return c.firstKey, last, c.keyStep
}

func (c *entry) arityOK(n int) bool {
	if c.arity >= 0 {
		return n == c.arity
	}
	return n >= -c.arity
}

// commands is the command table, filled by register at start-up.
var commands = map[string]*entry{}

// byID lists every command and subcommand by id. It is complete once the
// package's init functions have run, before any ACL is built.
var byID []*entry

// register adds commands to the table; a duplicate name is a programming
// error and panics at start-up.
func register(cmds ...*entry) {
	for _, c := range cmds {
		if _, dup := commands[c.name]; dup {
			panic("server: duplicate command " + c.name)
		}
		batched := c.batch != nil || c.tiered != nil
		if batched == (c.handler != nil) || (c.batch != nil) != (c.render != nil) || (c.tiered != nil) != (c.renderTiered != nil) {
			panic("server: command " + c.name + " needs either batch+render or handler")
		}
		commands[c.name] = c
		addID(c)
		for _, sc := range c.subcommands {
			sc.parent = c
			addID(sc)
		}
	}
}

func addID(c *entry) {
	c.id = len(byID)
	byID = append(byID, c)
	c.write = hasFlag(c, "write")
	switch {
	case hasFlag(c, "readonly"):
		c.keyPerm = acl.Read
	case c.name == "del" || c.name == "unlink" || c.name == "rl.reset":
		c.keyPerm = acl.Write
	default:
		c.keyPerm = acl.Read | acl.Write
	}
}

func lookup(lowerName []byte) *entry {
	return commands[string(lowerName)]
}

// lookupSub finds a container's subcommand by its lower-case name.
func (c *entry) lookupSub(lowerSub []byte) *entry {
	for _, sc := range c.subcommands {
		if sc.name[len(c.name)+1:] == string(lowerSub) {
			return sc
		}
	}
	return nil
}
