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
	"github.com/rlserver/rlserver/values"
)

// Spec describes one command.
type Spec struct {
	Name     string // lower case
	Arity    int    // Redis's convention: n exact, -n at least n (name included)
	FirstKey int    // key positions, as COMMAND reports them (0: no key)
	LastKey  int    // -1: the last argument
	KeyStep  int
	// NumKeysAt, when set, is the position of a numkeys argument that
	// the keys follow (LMPOP, SINTERCARD, ZUNION...): the keys move with
	// it (COMMAND's movablekeys), after the fixed ones above if any.
	NumKeysAt int
	// keysAfter, when set, finds the positions [first, last] of keys
	// named by an option (SORT's STORE): the keys move with it as with
	// NumKeysAt; first is 0 when there is none.
	keysAfter func(args [][]byte) (first, last int)
	Flags     []string // COMMAND flags: "write", "readonly", "denyoom", "fast"
	ACL       []string // ACL categories: "@string", "@write", "@fast"...
	Group     string   // COMMAND DOCS group: "string", "hash", "sorted-set", "generic"
	Since     string
	Summary   string
	// TxnOnly marks a command that the server answers itself outside a
	// transaction (DEL, EXISTS, TTL, PING...): kv runs it inside one.
	TxnOnly bool

	run      func(c *Cmd, ks engine.Keyspace, w *Writer)
	denyOOM  bool // flagged denyoom: refused whole while the engine refuses new keys
	noScript bool // flagged noscript: scripts may not call it
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

// NoScript reports whether scripts may not run the command (Redis's
// noscript flag: the blocking list and sorted-set pops).
func (s *Spec) NoScript() bool { return s.noScript }

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
			s.noScript = s.noScript || f == "noscript"
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
	// Script marks a command a script runs (redis.call): SORT of a set
	// BY a constant then sorts its output, as Redis does for scripts.
	Script bool
	keys   [][]byte
}

// ArityOK reports whether n arguments (name included) fit the arity.
func (s *Spec) ArityOK(n int) bool {
	if s.Arity >= 0 {
		return n == s.Arity
	}
	return n >= -s.Arity
}

// New returns the command for args (name first), which must fit the
// spec's arity (ArityOK). args is kept, not copied: it must stay valid
// until the command has run.
func New(s *Spec, args [][]byte, resp3 bool) *Cmd {
	c := new(Cmd)
	c.Set(s, args, resp3)
	return c
}

// Set makes c the command for args, as New does, reusing c.
func (c *Cmd) Set(s *Spec, args [][]byte, resp3 bool) {
	*c = Cmd{spec: s, Args: args, RESP3: resp3, keys: s.keysOf(args)}
}

// KeysOf lists the keys of args by the spec's key positions.
func (s *Spec) KeysOf(args [][]byte) [][]byte { return s.keysOf(args) }

// keysOf lists the keys of args by the spec's key positions.
func (s *Spec) keysOf(args [][]byte) [][]byte {
	if s.Movable() {
		var keys [][]byte
		if s.FirstKey > 0 && s.FirstKey < len(args) {
			keys = append(keys, args[s.FirstKey])
		}
		first, last := s.MovableRange(args)
		if first > 0 {
			keys = append(keys, args[first:last+1]...)
		}
		return keys
	}
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

// Movable reports whether the command's keys move with its arguments
// (COMMAND's movablekeys): MovableRange finds those after the fixed ones.
func (s *Spec) Movable() bool { return s.NumKeysAt > 0 || s.keysAfter != nil }

// MovableRange is the positions [first, last] of the keys that follow
// the numkeys argument (NumKeysAt); first is 0 when numkeys is not a
// count that the arguments hold, which the command itself refuses.
func (s *Spec) MovableRange(args [][]byte) (first, last int) {
	if s.keysAfter != nil {
		return s.keysAfter(args)
	}
	if s.NumKeysAt <= 0 || s.NumKeysAt >= len(args) {
		return 0, 0
	}
	n, ok := values.ParseInt(args[s.NumKeysAt])
	if !ok || n < 1 || n > int64(len(args)-s.NumKeysAt-1) {
		return 0, 0
	}
	return s.NumKeysAt + 1, s.NumKeysAt + int(n)
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

// oneKeySpec returns the constructor of the Specs of group's commands
// (hash, sorted-set) that take one key, the first argument.
func oneKeySpec(group string) func(name string, arity int, flags, acl []string, since, summary string,
	run func(c *Cmd, ks engine.Keyspace, w *Writer)) *Spec {
	return func(name string, arity int, flags, acl []string, since, summary string,
		run func(c *Cmd, ks engine.Keyspace, w *Writer)) *Spec {
		return &Spec{Name: name, Arity: arity, FirstKey: 1, LastKey: 1, KeyStep: 1,
			Flags: flags, ACL: acl, Group: group, Since: since, Summary: summary, run: run}
	}
}

// kindObj is the value kind of a hash or sorted set command:
// *values.Hash or *values.ZSet.
type kindObj interface {
	comparable
	values.Object
}

// lookupObj returns key's value when it is a T, nil when the key is
// missing, or the error text (WRONGTYPE) when it holds another kind.
func lookupObj[T kindObj](ks engine.Keyspace, key []byte) (T, string) {
	var none T
	e, err := ks.Get(key)
	if err != nil {
		return none, errorText(err)
	}
	if e == nil {
		return none, ""
	}
	obj, ok := e.Obj.(T)
	if !ok {
		return none, ErrWrongType
	}
	return obj, ""
}

// lookupOrZero is lookupObj for the commands that reply 0 for a missing
// key: it returns key's T, or false after replying the error or the 0.
func lookupOrZero[T kindObj](ks engine.Keyspace, w *Writer, key []byte) (T, bool) {
	obj, msg := lookupObj[T](ks, key)
	var none T
	switch {
	case msg != "":
		w.Error(msg)
	case obj == none:
		w.Int(0)
	default:
		return obj, true
	}
	return none, false
}
