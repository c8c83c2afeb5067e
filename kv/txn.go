package kv

import (
	"strconv"

	"github.com/rlserver/rlserver/engine"
)

// Txn is a transaction (MULTI ... EXEC): its commands run in order as one
// engine command, so no other request on their keys runs between them,
// unless a watched key changed since WATCH, in which case none runs and
// the reply is a null array.
//
// WATCH compares a digest of the key's whole state (kind, value, expiry)
// taken at WATCH time with the digest at EXEC: a key that was written,
// deleted, created or expired in between fails the transaction, as in
// Redis; a key written back to the very state it had when watched does
// not (Redis would fail it). Because the check is a function of the
// replicated state alone, a transaction applied from the Raft log decides
// the same on every replica.
type Txn struct {
	Cmds    []*Cmd
	Watches []Watch
	RESP3   bool
	keys    [][]byte
}

// Watch is one watched key and its digest when it was watched.
type Watch struct {
	Key    []byte
	Digest uint64
}

// NewTxn returns the transaction of cmds under watches.
func NewTxn(cmds []*Cmd, watches []Watch, resp3 bool) *Txn {
	t := &Txn{Cmds: cmds, Watches: watches, RESP3: resp3}
	for _, w := range watches {
		t.keys = append(t.keys, w.Key)
	}
	for _, c := range cmds {
		t.keys = append(t.keys, c.keys...)
	}
	return t
}

// Keys implements engine.Command.
func (t *Txn) Keys() [][]byte { return t.keys }

// Exec implements engine.Command.
func (t *Txn) Exec(ks engine.Keyspace, dst []byte) []byte {
	w := Writer{B: dst, RESP3: t.RESP3}
	if ks.Refusing() {
		for _, c := range t.Cmds {
			if c.spec.denyOOM { // as Redis refuses such an EXEC whole
				w.Error(ErrOOM)
				return w.B
			}
		}
	}
	for _, wt := range t.Watches {
		if ks.Digest(wt.Key) != wt.Digest {
			w.NilArray()
			return w.B
		}
	}
	w.Array(len(t.Cmds))
	for _, c := range t.Cmds {
		c.spec.run(c, ks, &w)
	}
	return w.B
}

// Request is the engine request that runs t.
func (t *Txn) Request() engine.Request {
	ro := true
	for _, c := range t.Cmds {
		ro = ro && !c.spec.Write()
	}
	return engine.CommandRequest(t, ro)
}

// digestSpec is WATCH's read: the digest of each key, as an array of
// integers (ParseDigests).
var digestSpec = &Spec{Name: "kv.digest", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
	Flags: []string{"readonly"},
	run: func(c *Cmd, ks engine.Keyspace, w *Writer) {
		w.Array(len(c.keys))
		for _, k := range c.keys {
			w.Int(int64(ks.Digest(k)))
		}
	}}

// NewDigests returns the command that reads the digests of keys (WATCH).
func NewDigests(keys [][]byte) *Cmd {
	args := append([][]byte{[]byte(digestSpec.Name)}, keys...)
	return New(digestSpec, args, false)
}

// ParseDigests reads the reply of NewDigests's command: n digests.
func ParseDigests(reply string, n int) ([]uint64, bool) {
	// *n\r\n then n integers :d\r\n
	line := func() (string, bool) {
		for i := 0; i+1 < len(reply); i++ {
			if reply[i] == '\r' && reply[i+1] == '\n' {
				l := reply[:i]
				reply = reply[i+2:]
				return l, true
			}
		}
		return "", false
	}
	h, ok := line()
	if !ok || h != "*"+strconv.Itoa(n) {
		return nil, false
	}
	out := make([]uint64, n)
	for i := range out {
		l, ok := line()
		if !ok || len(l) < 2 || l[0] != ':' {
			return nil, false
		}
		v, err := strconv.ParseInt(l[1:], 10, 64)
		if err != nil {
			return nil, false
		}
		out[i] = uint64(v)
	}
	return out, reply == ""
}
