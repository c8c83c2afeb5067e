package kv

import (
	"encoding/binary"
	"errors"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Optimistic runs: a program (a Lua script) runs its commands on an
// Overlay, a private copy of the keys it touches, read from the engine
// when first touched; its writes stay in the copy. Its effects are then
// one transaction: the final state of every key it wrote (a restore), under
// WATCH digests of every key it read or wrote as they were read. Applied
// through the engine (in a cluster, the Raft log), the transaction takes
// effect only if no other command changed those keys in between, so the
// run is serializable; otherwise the caller runs the program again. The
// log carries the effects, never the program, so replicas do not run it,
// and a restore is absolute (an expiry is a time, not a duration), so it
// means the same at whatever time it is applied.

// KeyState is one key as the engine holds it, for an Overlay.
type KeyState struct {
	Kind   engine.Kind
	Digest uint64
	TTL    int64          // ns until it expires or empties; -1 never; -2 missing
	Entry  *values.Entry  // a data key's value (a private copy); nil otherwise
	Limit  *engine.Record // a limiter key's state; nil otherwise
}

// Fetch reads the states of keys from the engine.
type Fetch func(keys [][]byte) ([]KeyState, error)

// Overlay is an engine.Keyspace over a private copy of the keys a program
// touches. Not safe for concurrent use.
type Overlay struct {
	now      int64
	fetch    Fetch
	live     engine.Keyspace   // a live overlay's keyspace (NewLiveOverlay); nil otherwise
	local    func([]byte) bool // whether live holds a key
	writing  bool              // the command running writes: Get hands out private copies
	allowOOM bool              // a script flagged allow-oom: never refuse (SetAllowOOM)
	keys     map[string]*overlayKey
	order    []string // keys in the order first touched
	err      error    // the first fetch error
	written  int
	fetches  int
	spare    []overlayKey // a live overlay's keys come from here (ResetLive reuses it)
	used     int
}

type overlayKey struct {
	base    KeyState       // as read
	entry   *values.Entry  // the current data value; nil when missing or a limiter key
	limit   *engine.Record // the current limiter state; nil when missing or a data key
	kind    engine.Kind    // the current kind
	written bool
	shared  bool // entry is the live keyspace's own (a live overlay's key not written yet)
}

// NewOverlay returns an overlay at time now over the keys fetch reads.
func NewOverlay(now int64, fetch Fetch) *Overlay {
	return &Overlay{now: now, fetch: fetch, keys: map[string]*overlayKey{}}
}

// ErrNotLocal is a live overlay's error: the program touched a key that
// the keyspace it runs on does not hold, or asked for something only the
// whole engine can answer. The run is to be discarded (nothing it did
// reached the keyspace) and run again on a copy (NewOverlay).
var ErrNotLocal = errors.New("kv: the run reached past the keys it holds")

// NewLiveOverlay returns an overlay over ks itself, for a program that
// runs while it holds ks (a script on the shard of its keys): a key is
// read from ks when first touched, without a copy, and copied only when a
// write command (SetWriting) first reaches it, so until ApplyLive
// nothing the program does changes ks. local reports whether ks holds a
// key; touching one it does not fails the run with ErrNotLocal.
func NewLiveOverlay(ks engine.Keyspace, local func(key []byte) bool) *Overlay {
	return &Overlay{now: ks.Now(), live: ks, local: local, keys: map[string]*overlayKey{}}
}

// ResetLive makes o a new live overlay (NewLiveOverlay) over ks,
// reusing its memory: a batch of scripts runs one after another on one.
func (o *Overlay) ResetLive(ks engine.Keyspace, local func(key []byte) bool) {
	if o.keys == nil {
		o.keys = map[string]*overlayKey{}
	}
	clear(o.keys)
	clear(o.spare[:o.used])
	*o = Overlay{now: ks.Now(), live: ks, local: local, keys: o.keys, order: o.order[:0], spare: o.spare}
}

// Release drops everything a live overlay refers to (the keyspace, the
// keys' values), keeping its memory for the next ResetLive: a pooled
// overlay then holds no value alive.
func (o *Overlay) Release() {
	clear(o.keys)
	clear(o.spare[:o.used])
	clear(o.order)
	*o = Overlay{keys: o.keys, order: o.order[:0], spare: o.spare}
}

// Live reports whether the overlay runs over a live keyspace.
func (o *Overlay) Live() bool { return o.live != nil }

// Abort fails a live run with ErrNotLocal (the program asked for what
// only the whole engine can answer, such as DBSIZE).
func (o *Overlay) Abort() {
	if o.err == nil {
		o.err = ErrNotLocal
	}
}

// SetWriting tells a live overlay whether the command about to run
// writes: while it does, Get copies a key's live value before handing
// it out, so the command changes the copy.
func (o *Overlay) SetWriting(w bool) { o.writing = w }

// ApplyLive writes a live run's writes into its keyspace: each written
// key takes its final state, in the order first touched. It returns
// false when the keyspace refused a key it had to create (no-create
// mode): the keys before it are written, as Redis keeps the writes a
// script made before an error.
func (o *Overlay) ApplyLive() bool {
	ks := o.live
	for _, name := range o.order {
		k := o.keys[name]
		if !k.written {
			continue
		}
		key := []byte(name)
		switch {
		case k.entry != nil && k.shared:
			ks.Changed(key) // written in place: cannot happen, a write copies first
		case k.entry != nil:
			if e, err := ks.Get(key); err == nil && e != nil && e.Type() == k.entry.Type() {
				used := e.Used
				*e = *k.entry
				e.Used = used
				ks.Changed(key)
				continue
			}
			ks.Delete(key)
			if k.entry.Expire != 0 && k.entry.Expire <= ks.Now() {
				continue
			}
			e, err := ks.Create(key, k.entry.Type())
			if err != nil {
				return false
			}
			used := e.Used
			*e = *k.entry
			e.Used = used
		case k.limit != nil:
			ks.Delete(key)
			if ks.Put(*k.limit) != nil {
				return false
			}
		default:
			ks.Delete(key)
		}
	}
	return true
}

// Err is the first error of a fetch: the run's replies are not to be
// trusted after one.
func (o *Overlay) Err() error { return o.err }

// Wrote reports whether the program wrote a key.
func (o *Overlay) Wrote() bool { return o.written > 0 }

// Consistent reports whether every key the program read came from one
// fetch, hence one instant: a program that wrote nothing then needs no
// effects to be serializable. Otherwise its Effects (watches alone) check
// that nothing changed between its reads.
func (o *Overlay) Consistent() bool { return o.fetches <= 1 }

// Load reads keys not read yet in one fetch (a program declares its keys:
// loading them at once costs one round trip).
func (o *Overlay) Load(keys [][]byte) {
	var want [][]byte
	for _, k := range keys {
		if _, ok := o.keys[string(k)]; !ok {
			want = append(want, k)
		}
	}
	if len(want) == 0 || o.err != nil {
		return
	}
	states, err := o.fetch(want)
	if err != nil {
		o.fetches++
		o.err = err
		return
	}
	o.Preload(want, states)
}

// Preload takes states[i] as keys[i]'s state, read from the engine in
// one request (NewDump, ParseDump) before the run: a batch of programs
// reads every program's keys in one backend call. Keys already read keep
// their state.
func (o *Overlay) Preload(keys [][]byte, states []KeyState) {
	o.fetches++
	for i, k := range keys {
		if _, ok := o.keys[string(k)]; ok {
			continue // named twice
		}
		st := states[i]
		name := string(k)
		if st.Limit != nil {
			st.Limit.Key = name
		}
		o.keys[name] = &overlayKey{base: st, entry: st.Entry, limit: st.Limit, kind: st.Kind}
		o.order = append(o.order, name)
	}
}

// Touched returns the keys the program touched, in the order first
// touched; the caller must not change it.
func (o *Overlay) Touched() []string { return o.order }

func (o *Overlay) key(k []byte) *overlayKey {
	if ok := o.keys[string(k)]; ok != nil {
		return ok
	}
	if o.live != nil {
		return o.liveKey(k)
	}
	o.Load([][]byte{k})
	if ok := o.keys[string(k)]; ok != nil {
		return ok
	}
	// A failed fetch: the key reads as missing, and Err says why.
	ok := &overlayKey{base: KeyState{TTL: -2}}
	o.keys[string(k)] = ok
	return ok
}

// liveKey reads k from a live overlay's keyspace.
func (o *Overlay) liveKey(k []byte) *overlayKey {
	name := string(k)
	if o.used == len(o.spare) {
		o.spare, o.used = make([]overlayKey, max(8, 2*len(o.spare))), 0
	}
	ok := &o.spare[o.used]
	o.used++
	ok.base.TTL = -2
	o.keys[name] = ok
	o.order = append(o.order, name)
	if !o.local(k) {
		o.Abort()
		return ok
	}
	ks := o.live
	kind := ks.Kind(k)
	ok.kind, ok.base.Kind = kind, kind
	switch {
	case kind == engine.KindNone:
		return ok
	case kind.IsData():
		e, _ := ks.Get(k)
		if e == nil {
			ok.kind, ok.base.Kind = engine.KindNone, engine.KindNone
			return ok
		}
		ok.entry, ok.base.Entry, ok.shared = e, e, true
	default:
		if rec, found := ks.Record(k); found {
			rec.Key = name
			ok.limit, ok.base.Limit = &rec, &rec
		}
	}
	ok.base.TTL = ks.TTL(k)
	return ok
}

// own gives k a private copy of its live value, once.
func (o *Overlay) own(k *overlayKey) {
	if k.shared {
		c := k.entry.Clone()
		k.entry, k.shared = &c, false
	}
}

func (o *Overlay) wrote(k *overlayKey) {
	if !k.written {
		k.written = true
		o.written++
	}
}

// Now implements engine.Keyspace.
func (o *Overlay) Now() int64 { return o.now }

// Get implements engine.Keyspace.
func (o *Overlay) Get(key []byte) (*values.Entry, error) {
	k := o.key(key)
	switch {
	case k.kind == engine.KindNone:
		return nil, nil
	case k.entry == nil:
		return nil, engine.ErrWrongType
	}
	if k.entry.Expire != 0 && k.entry.Expire <= o.now {
		k.entry, k.kind, k.shared = nil, engine.KindNone, false
		return nil, nil
	}
	if o.writing {
		o.own(k)
	}
	return k.entry, nil
}

// Create implements engine.Keyspace.
func (o *Overlay) Create(key []byte, t values.Type) (*values.Entry, error) {
	k := o.key(key)
	e := &values.Entry{Obj: values.NewObject(t)}
	if e.Obj == nil {
		t = values.TypeString
	}
	k.entry, k.limit, k.kind, k.shared = e, nil, dataKindOf(t), false
	o.wrote(k)
	return e, nil
}

// Delete implements engine.Keyspace.
func (o *Overlay) Delete(key []byte) bool {
	k := o.key(key)
	if k.kind == engine.KindNone {
		return false
	}
	k.entry, k.limit, k.kind, k.shared = nil, nil, engine.KindNone, false
	o.wrote(k)
	return true
}

// Kind implements engine.Keyspace.
func (o *Overlay) Kind(key []byte) engine.Kind {
	k := o.key(key)
	if k.entry != nil {
		return dataKindOf(k.entry.Type())
	}
	return k.kind
}

// TTL implements engine.Keyspace.
func (o *Overlay) TTL(key []byte) int64 {
	k := o.key(key)
	switch {
	case k.kind == engine.KindNone:
		return -2
	case k.entry == nil && k.limit != nil:
		// A limiter key: until its state is empty, as the engine says.
		res, _, err := engine.Simulate(key, k.limit, &engine.Request{Op: engine.OpTTL, Key: key}, o.now)
		if err != nil {
			return k.base.TTL
		}
		return res.Value
	case k.entry == nil:
		return k.base.TTL
	case k.entry.Expire == 0:
		return -1
	}
	return k.entry.Expire - o.now
}

// Changed implements engine.Keyspace.
func (o *Overlay) Changed(key []byte) { o.wrote(o.key(key)) }

// Digest implements engine.Keyspace: the key's digest as read.
func (o *Overlay) Digest(key []byte) uint64 { return o.key(key).base.Digest }

// Record implements engine.Keyspace: a limiter key's state (a data key
// has none here: its value is the entry).
func (o *Overlay) Record(key []byte) (engine.Record, bool) {
	k := o.key(key)
	if k.limit == nil {
		return engine.Record{}, false
	}
	return *k.limit, true
}

// Put implements engine.Keyspace for limiter records (SetLimiter).
func (o *Overlay) Put(rec engine.Record) error {
	o.SetLimiter([]byte(rec.Key), &rec)
	return nil
}

// SetLimiter replaces key's state by a limiter record (nil: the key is
// gone), as a limiter command run on a copy of it left it
// (engine.Simulate).
func (o *Overlay) SetLimiter(key []byte, rec *engine.Record) {
	k := o.key(key)
	if rec != nil {
		rec.Key = string(key)
	}
	k.entry, k.limit, k.kind, k.shared = nil, rec, engine.KindNone, false
	if rec != nil {
		k.kind = rec.Kind
	}
	o.wrote(k)
}

// Refusing implements engine.Keyspace: the effects' restores are refused
// when they are applied, if the engine refuses new keys then; a live
// overlay refuses as its keyspace does, at the command, as Redis does.
func (o *Overlay) Refusing() bool { return o.live != nil && !o.allowOOM && o.live.Refusing() }

// SetAllowOOM makes a live overlay refuse nothing while its keyspace
// refuses new keys: a script flagged allow-oom writes anyway (a key it
// creates is still refused when it applies).
func (o *Overlay) SetAllowOOM(on bool) { o.allowOOM = on }

// Effects returns the transaction that applies the run's writes: a
// restore of every written key, under the digests of every key touched.
// It is nil when the run wrote nothing and read nothing.
func (o *Overlay) Effects(resp3 bool) *Txn {
	if len(o.order) == 0 {
		return nil
	}
	var cmds []*Cmd
	var watches []Watch
	for _, name := range o.order {
		k := o.keys[name]
		watches = append(watches, Watch{Key: []byte(name), Digest: k.base.Digest})
		if k.written {
			cmds = append(cmds, restoreCmd([]byte(name), k.entry, k.limit))
		}
	}
	return NewTxn(cmds, watches, resp3)
}

func dataKindOf(t values.Type) engine.Kind { return engine.DataKind(t) }

// restoreSpec replaces a key by a data value given as its snapshot fields
// (values.AppendFields), or deletes it ("-"): the effect of a program's
// writes on one key. Internal: clients cannot send it.
var restoreSpec = &Spec{Name: "kv.restore", Arity: -3, FirstKey: 1, LastKey: 1, KeyStep: 1,
	Flags: []string{"write"}, run: runRestore}

// dumpSpec reads keys for an Overlay: per key an array of its kind, its
// digest, its TTL in ns and its data value's fields (ParseDump).
var dumpSpec = &Spec{Name: "kv.dump", Arity: -2, FirstKey: 1, LastKey: -1, KeyStep: 1,
	Flags: []string{"readonly"}, run: runDump}

// internal are the commands only rlserver itself builds: the log carries
// them (kv.Decode), clients cannot send them (Lookup does not find them).
var internal = map[string]*Spec{restoreSpec.Name: restoreSpec, dumpSpec.Name: dumpSpec}

// restoreCmd is the restore of key to a data value e ("kv.restore key D
// fields"), a limiter state lim ("kv.restore key L<kind> fields"), or
// nothing ("kv.restore key -"); fields are packed in one argument, each
// a varint.
func restoreCmd(key []byte, e *values.Entry, lim *engine.Record) *Cmd {
	var form []byte
	var fields []int64
	switch {
	case e != nil:
		form, fields = []byte("D"), values.AppendFields(nil, e)
	case lim != nil:
		form, fields = strconv.AppendInt([]byte("L"), int64(lim.Kind), 10), lim.Fields
	default:
		return New(restoreSpec, [][]byte{[]byte(restoreSpec.Name), key, []byte("-")}, false)
	}
	packed := make([]byte, 0, 2*len(fields)+8)
	for _, f := range fields {
		packed = binary.AppendVarint(packed, f)
	}
	return New(restoreSpec, [][]byte{[]byte(restoreSpec.Name), key, form, packed}, false)
}

// unpack reads the packed fields of a restore, or reports them corrupt.
func unpack(b []byte) ([]int64, bool) {
	fields := make([]int64, 0, len(b)/2+1)
	for len(b) > 0 {
		v, n := binary.Varint(b)
		if n <= 0 {
			return nil, false
		}
		fields = append(fields, v)
		b = b[n:]
	}
	return fields, true
}

func runRestore(c *Cmd, ks engine.Keyspace, w *Writer) {
	key := c.Args[1]
	if len(c.Args) == 3 && string(c.Args[2]) == "-" {
		ks.Delete(key)
		w.OK()
		return
	}
	if len(c.Args) != 4 {
		w.Error(ErrSyntax)
		return
	}
	fields, ok := unpack(c.Args[3])
	if !ok {
		w.Error(ErrSyntax)
		return
	}
	if a := c.Args[2]; len(a) > 1 && a[0] == 'L' {
		kind, err := strconv.Atoi(string(a[1:]))
		if err != nil || kind <= 0 || kind >= engine.NumKinds {
			w.Error(ErrSyntax)
			return
		}
		ks.Delete(key)
		if perr := ks.Put(engine.Record{Key: string(key), Kind: engine.Kind(kind), Fields: fields}); perr != nil {
			w.Error(ErrSyntax)
			return
		}
		w.OK()
		return
	}
	if string(c.Args[2]) != "D" {
		w.Error(ErrSyntax)
		return
	}
	v, err := values.FromFields(fields)
	if err != nil {
		w.Error(ErrSyntax)
		return
	}
	ks.Delete(key)
	if v.Expire != 0 && v.Expire <= ks.Now() {
		w.OK() // due already: nothing to keep
		return
	}
	e, err := ks.Create(key, v.Type())
	if err != nil {
		w.Error(errorText(err))
		return
	}
	used := e.Used
	*e = v
	e.Used = used
	w.OK()
}

func runDump(c *Cmd, ks engine.Keyspace, w *Writer) {
	w.Array(len(c.keys))
	for _, k := range c.keys {
		kind := ks.Kind(k)
		var fields []int64
		if kind.IsData() {
			if e, err := ks.Get(k); err == nil && e != nil {
				fields = values.AppendFields(nil, e)
			}
		} else if rec, ok := ks.Record(k); ok {
			fields = rec.Fields
		}
		w.Array(3 + len(fields))
		w.Int(int64(kind))
		w.Int(int64(ks.Digest(k)))
		w.Int(ks.TTL(k))
		for _, f := range fields {
			w.Int(f)
		}
	}
}

// NewDump returns the command that reads keys for an Overlay.
func NewDump(keys [][]byte) *Cmd {
	return New(dumpSpec, append([][]byte{[]byte(dumpSpec.Name)}, keys...), false)
}

// ParseDump reads the reply of NewDump's command for n keys.
func ParseDump(reply string, n int) ([]KeyState, bool) {
	p := intReader{s: reply}
	if p.header('*') != n {
		return nil, false
	}
	out := make([]KeyState, n)
	for i := range out {
		m := p.header('*')
		if m < 3 {
			return nil, false
		}
		out[i].Kind = engine.Kind(p.int())
		out[i].Digest = uint64(p.int())
		out[i].TTL = p.int()
		if m > 3 {
			fields := make([]int64, m-3)
			for j := range fields {
				fields[j] = p.int()
			}
			switch out[i].Kind {
			case engine.KindString, engine.KindHash, engine.KindZSet, engine.KindList, engine.KindSet:
				e, err := values.FromFields(fields)
				if err != nil {
					return nil, false
				}
				out[i].Entry = &e
			default:
				out[i].Limit = &engine.Record{Kind: out[i].Kind, Fields: fields}
			}
		}
	}
	return out, !p.bad && p.s == ""
}

// intReader reads RESP headers and integers; the first error sticks.
type intReader struct {
	s   string
	bad bool
}

func (p *intReader) line(prefix byte) string {
	for i := 0; i+1 < len(p.s); i++ {
		if p.s[i] == '\r' && p.s[i+1] == '\n' {
			l := p.s[:i]
			p.s = p.s[i+2:]
			if len(l) < 2 || l[0] != prefix {
				p.bad = true
				return "0"
			}
			return l[1:]
		}
	}
	p.bad = true
	return "0"
}

func (p *intReader) header(prefix byte) int {
	n, err := strconv.Atoi(p.line(prefix))
	if err != nil {
		p.bad = true
	}
	return n
}

func (p *intReader) int() int64 {
	n, err := strconv.ParseInt(p.line(':'), 10, 64)
	if err != nil {
		p.bad = true
	}
	return n
}
