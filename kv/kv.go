// Package kv runs Redis's data commands (strings, hashes, sorted sets,
// expiry, transactions) on the engine's data keys: the commands that
// existing limiters send to Redis.
//
// A command is parsed into a Cmd (New), which the engine runs on the
// shard of its keys (engine.Command): the reply is RESP, written for the
// connection's protocol. Commands are deterministic given the keyspace
// and the stamped time, so a Raft log that carries them replays them
// exactly on every replica.
package kv

import (
	"bytes"
	"strings"

	"github.com/rlserver/rlserver/engine"
)

// Spec describes one command.
type Spec struct {
	Name     string // lower case
	Arity    int    // Redis's convention: n exact, -n at least n (name included)
	FirstKey int    // key positions, as COMMAND reports them (0: no key)
	LastKey  int    // -1: the last argument
	KeyStep  int
	Flags    []string // COMMAND flags: "write", "readonly", "denyoom", "fast"
	ACL      []string // ACL categories: "@string", "@write", "@fast"...
	Group    string   // COMMAND DOCS group: "string", "hash", "sorted-set", "generic"
	Since    string
	Summary  string
	// TxnOnly marks a command that the server answers itself outside a
	// transaction (DEL, EXISTS, TTL, PING...): kv runs it inside one.
	TxnOnly bool

	run     func(c *Cmd, ks engine.Keyspace, w *Writer)
	denyOOM bool // flagged denyoom: refused whole while the engine refuses new keys
}

// Write reports whether the command may write.
func (s *Spec) Write() bool {
	for _, f := range s.Flags {
		if f == "write" {
			return true
		}
	}
	return false
}

var specs = map[string]*Spec{}

// All is every command, in no particular order.
func All() []*Spec {
	out := make([]*Spec, 0, len(specs))
	for _, s := range specs {
		out = append(out, s)
	}
	return out
}

func register(list ...*Spec) {
	for _, s := range list {
		if specs[s.Name] != nil {
			panic("kv: " + s.Name + " registered twice")
		}
		for _, f := range s.Flags {
			s.denyOOM = s.denyOOM || f == "denyoom"
		}
		specs[s.Name] = s
	}
}

// Lookup returns the command named name (any case).
func Lookup(name []byte) (*Spec, bool) {
	var buf [32]byte
	if len(name) > len(buf) {
		return nil, false
	}
	lower := buf[:len(name)]
	for i, c := range name {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		lower[i] = c
	}
	s, ok := specs[string(lower)]
	return s, ok
}

// Cmd is one parsed command: it implements engine.Command.
type Cmd struct {
	spec  *Spec
	Args  [][]byte // the whole command, name first; aliased, not copied
	RESP3 bool     // reply in RESP3
	keys  [][]byte
}

// ArityOK reports whether n arguments (name included) fit the arity.
func (s *Spec) ArityOK(n int) bool {
	if s.Arity >= 0 {
		return n == s.Arity
	}
	return n >= -s.Arity
}

// New returns the command for args (name first), which must fit the
// spec's arity (ArityOK). args is copied, its bytes are not: they must stay
// valid until the command has run.
func New(s *Spec, args [][]byte, resp3 bool) *Cmd {
	c := &Cmd{spec: s, Args: append([][]byte(nil), args...), RESP3: resp3}
	c.keys = s.keysOf(c.Args)
	return c
}

// KeysOf lists the keys of args by the spec's key positions.
func (s *Spec) KeysOf(args [][]byte) [][]byte { return s.keysOf(args) }

// keysOf lists the keys of args by the spec's key positions.
func (s *Spec) keysOf(args [][]byte) [][]byte {
	if s.FirstKey == 0 || s.FirstKey >= len(args) {
		return nil
	}
	last := s.LastKey
	if last < 0 {
		last += len(args)
	}
	last = min(last, len(args)-1)
	if s.KeyStep == 1 || s.FirstKey == last {
		return args[s.FirstKey : last+1 : last+1]
	}
	var keys [][]byte
	for i := s.FirstKey; i <= last; i += s.KeyStep {
		keys = append(keys, args[i])
	}
	return keys
}

// Spec is the command's description.
func (c *Cmd) Spec() *Spec { return c.spec }

// Keys implements engine.Command.
func (c *Cmd) Keys() [][]byte { return c.keys }

// Exec implements engine.Command.
func (c *Cmd) Exec(ks engine.Keyspace, dst []byte) []byte {
	w := Writer{B: dst, RESP3: c.RESP3}
	if c.spec.denyOOM && ks.Refusing() {
		w.Error(ErrOOM)
		return w.B
	}
	c.spec.run(c, ks, &w)
	return w.B
}

// Request is the engine request that runs c.
func (c *Cmd) Request() engine.Request {
	return engine.CommandRequest(c, !c.spec.Write())
}

// is reports whether b equals the lower-case word (any case).
func is(b []byte, word string) bool {
	return len(b) == len(word) && strings.EqualFold(string(b), word)
}

var _ = bytes.Equal
