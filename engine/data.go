package engine

import (
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"math"
	"unsafe"

	"github.com/rlserver/rlserver/values"
)

// Data keys: Redis's strings, hashes and sorted sets (package values),
// with an optional expiry, on the same shards and tables as the limiter
// kinds. Package kv runs Redis's commands on them through a Keyspace; the
// engine stores one values.Entry per key in the shard's data slab and
// never looks inside a value.
//
// A data key's slot has kind kindData (0, with the used bit set, so it is
// never mistaken for an empty slot) and its slab index as value. Records,
// TYPE and the key counts show it as KindString, KindHash, KindZSet,
// KindList or KindSet by
// the entry's type.

// kindData is the slot kind of every data key.
const kindData Kind = 0

// Kinds of data keys, as records, TYPE and the key counts show them.
const (
	KindString Kind = 8
	KindHash   Kind = 9
	KindZSet   Kind = 10
	KindList   Kind = 11
	KindSet    Kind = 12
)

// IsData reports whether k is the kind of a data key (a Redis value).
func (k Kind) IsData() bool { return k >= KindString && int(k) < NumKinds }

// DataKind is the Kind that records, TYPE and the key counts show for a
// data value of type t.
func DataKind(t values.Type) Kind { return dataKind(t) }

// dataKind is the Kind of an entry's type.
func dataKind(t values.Type) Kind {
	return KindString + Kind(t-values.TypeString)
}

// OpCmd runs a data command (Request.Cmd).
const OpCmd Op = 9

// Command is one Redis data command, or a transaction of them, built by
// package kv. The engine runs it on the shards of its keys, atomically: no
// other request on those shards runs while it does.
type Command interface {
	// Keys lists every key the command may read or write; Request.Key is
	// the first. A command with no key runs on the shard of Request.Key.
	Keys() [][]byte
	// Exec runs the command and appends its reply (RESP) to dst.
	Exec(ks Keyspace, dst []byte) []byte
}

// Keyspace is what a Command sees of the engine while it runs: the keys
// of its shards at the stamped time. Pointers it returns stay valid until
// the next Create or Delete.
type Keyspace interface {
	// Now is the time of the command in Unix nanoseconds: the stamped
	// time of its batch, clamped so it never runs backwards.
	Now() int64
	// Get returns the key's data entry, nil when the key is missing
	// (expired keys are missing), or ErrWrongType when it holds limiter
	// state.
	Get(key []byte) (*values.Entry, error)
	// Create adds key, which must be missing, with an empty value of type
	// t (the integer 0, an empty hash or sorted set) that the caller
	// fills, or fails with ErrOOM in no-create mode. A key's type never
	// changes in place: a command that stores another type deletes the key
	// and creates it again, so the key counts by type stay exact.
	Create(key []byte, t values.Type) (*values.Entry, error)
	// Delete removes the key, of any kind, and reports whether it
	// existed.
	Delete(key []byte) bool
	// Kind is the kind of the key's live state, KindNone when missing.
	Kind(key []byte) Kind
	// TTL is the nanoseconds until the key expires: -1 when it never
	// does, -2 when it is missing. A limiter key expires when its state
	// is empty again.
	TTL(key []byte) int64
	// Changed records that the command modified key's entry in place.
	Changed(key []byte)
	// Digest is a hash of the key's whole state (kind, value, expiry), 0
	// when it is missing: WATCH compares it.
	Digest(key []byte) uint64
	// Record is the key's whole state as a snapshot record, of any kind.
	Record(key []byte) (Record, bool)
	// Put replaces the key's state by rec (a record Export could have
	// made, for rec.Key), or fails with ErrBadRecord.
	Put(rec Record) error
	// Refusing reports whether the engine refuses new keys (maxmemory
	// with noeviction, SetNoCreate): a command that may grow memory is
	// then refused whole, before it changes anything, as Redis refuses
	// its denyoom commands.
	Refusing() bool
}

// CommandRequest is the request that runs cmd. A command whose keys may
// lie on several shards is a group of one (Tiers 1), so the engine takes
// hold of every shard it needs.
func CommandRequest(cmd Command, readOnly bool) Request {
	r := Request{Op: OpCmd, Cmd: cmd, ReadOnly: readOnly}
	if keys := cmd.Keys(); len(keys) > 0 {
		r.Key = keys[0]
		if len(keys) > 1 {
			r.Tiers = 1
		}
	}
	return r
}

// The shard is the Keyspace of a command whose keys are all its own.

// Now implements Keyspace.
func (s *shard) Now() int64 { return s.now }

// Get implements Keyspace.
func (s *shard) Get(key []byte) (*values.Entry, error) {
	i, ok := s.lookup(key, hashKey(key))
	if !ok {
		return nil, nil
	}
	sl := &s.tab.slots[i]
	if sl.kind() != kindData {
		return nil, ErrWrongType
	}
	e := &s.data.vals[sl.val]
	e.Used = s.now
	return e, nil
}

// Create implements Keyspace.
func (s *shard) Create(key []byte, t values.Type) (*values.Entry, error) {
	if s.noCreate {
		return nil, ErrOOM
	}
	i := s.insert(key, hashKey(key), kindData)
	e := values.Entry{Used: s.now, Obj: values.NewObject(t)}
	if e.Obj == nil {
		t = values.TypeString
	}
	v := s.data.add(e)
	s.tab.slots[i].val = v
	s.types[t]++
	s.dirty++
	return &s.data.vals[v], nil
}

// Delete implements Keyspace.
func (s *shard) Delete(key []byte) bool {
	i, ok := s.lookup(key, hashKey(key))
	if ok {
		s.remove(i)
		s.dirty++
	}
	return ok
}

// Kind implements Keyspace.
func (s *shard) Kind(key []byte) Kind {
	i, ok := s.lookup(key, hashKey(key))
	if !ok {
		return KindNone
	}
	return s.visibleKind(&s.tab.slots[i])
}

// TTL implements Keyspace.
func (s *shard) TTL(key []byte) int64 {
	i, ok := s.lookup(key, hashKey(key))
	if !ok {
		return -2
	}
	sl := &s.tab.slots[i]
	if sl.kind() == kindData {
		if exp := s.data.vals[sl.val].Expire; exp != 0 {
			return exp - s.now
		}
		return -1
	}
	return max(s.emptyAt(sl.kind(), sl.val)-s.now, 1)
}

// Changed implements Keyspace.
func (s *shard) Changed([]byte) { s.dirty++ }

// Refusing implements Keyspace.
func (s *shard) Refusing() bool { return s.noCreate }

// Record implements Keyspace.
func (s *shard) Record(key []byte) (Record, bool) {
	i, ok := s.lookup(key, hashKey(key))
	if !ok {
		return Record{}, false
	}
	sl := &s.tab.slots[i]
	return s.record(key, sl.kind(), sl.val), true
}

// Put implements Keyspace.
func (s *shard) Put(rec Record) error {
	if why := checkRecord(&rec); why != "" {
		return fmt.Errorf("%w: %s", ErrBadRecord, why)
	}
	s.put(&rec)
	return nil
}

// Simulate applies r (a limiter request, not a group) to key's state rec
// (nil: the key is missing) at now, on a private shard, and returns its
// result and the key's state after it (nil: missing). The engine's state
// is untouched: a program that runs limiter commands on a copy of its
// keys (a script on a kv.Overlay) uses it.
func Simulate(key []byte, rec *Record, r *Request, now int64) (Result, *Record, error) {
	s := &shard{tab: newTable(minSlots, 0)}
	defer s.tab.release()
	s.advance(now)
	if rec != nil {
		if err := s.Put(*rec); err != nil {
			return Result{}, nil, err
		}
	}
	var out Result
	s.apply(r, &out)
	after, ok := s.Record(key)
	if !ok {
		return out, nil, nil
	}
	return out, &after, nil
}

// Digest implements Keyspace.
func (s *shard) Digest(key []byte) uint64 {
	i, ok := s.lookup(key, hashKey(key))
	if !ok {
		return 0
	}
	sl := &s.tab.slots[i]
	rec := s.record(key, sl.kind(), sl.val)
	h := fnv.New64a()
	var w [8]byte
	h.Write([]byte{byte(rec.Kind)})
	for _, f := range rec.Fields {
		binary.LittleEndian.PutUint64(w[:], uint64(f))
		h.Write(w[:])
	}
	return h.Sum64() | 1
}

// visibleKind is the Kind a used slot shows.
func (s *shard) visibleKind(sl *slot) Kind {
	if k := sl.kind(); k != kindData {
		return k.visible()
	}
	return dataKind(s.data.vals[sl.val].Type())
}

// dataExpiresAt is when a data entry expires: never (MaxInt64) without a
// TTL.
func dataExpiresAt(e *values.Entry) int64 {
	if e.Expire == 0 {
		return math.MaxInt64
	}
	return e.Expire
}

// crossView is the Keyspace of a command whose keys lie on several
// shards, all held by the caller (Engine.cross) and advanced to now.
type crossView struct {
	e     *Engine
	now   int64
	first *shard // a held shard: every shard has the same no-create mode
}

func (v *crossView) at(key []byte) *shard {
	return v.e.shards[ShardOf(key, len(v.e.shards))]
}

func (v *crossView) Now() int64                            { return v.now }
func (v *crossView) Get(key []byte) (*values.Entry, error) { return v.at(key).Get(key) }
func (v *crossView) Create(key []byte, t values.Type) (*values.Entry, error) {
	return v.at(key).Create(key, t)
}
func (v *crossView) Delete(key []byte) bool           { return v.at(key).Delete(key) }
func (v *crossView) Kind(key []byte) Kind             { return v.at(key).Kind(key) }
func (v *crossView) TTL(key []byte) int64             { return v.at(key).TTL(key) }
func (v *crossView) Changed(key []byte)               { v.at(key).Changed(key) }
func (v *crossView) Digest(key []byte) uint64         { return v.at(key).Digest(key) }
func (v *crossView) Record(key []byte) (Record, bool) { return v.at(key).Record(key) }
func (v *crossView) Put(rec Record) error             { return v.at([]byte(rec.Key)).Put(rec) }
func (v *crossView) Refusing() bool                   { return v.first.noCreate }

// cmdShards appends the shards of every key of r's command.
func cmdShards(dst []int32, r *Request, n int) []int32 {
	for _, k := range r.Cmd.Keys() {
		dst = append(dst, int32(ShardOf(k, n)))
	}
	return dst
}

// onOneShard reports whether every key of r's command lives on shard si.
func onOneShard(r *Request, si, n int) bool {
	for _, k := range r.Cmd.Keys() {
		if ShardOf(k, n) != si {
			return false
		}
	}
	return true
}

// dataRecordFields returns a data key's record fields.
func (s *shard) dataRecord(v int64) (Kind, []int64) {
	e := &s.data.vals[v]
	return dataKind(e.Type()), values.AppendFields(nil, e)
}

// checkDataRecord reports why rec is not a data key's record, or "".
func checkDataRecord(rec *Record) string {
	e, err := values.FromFields(rec.Fields)
	if err != nil {
		return "invalid data value"
	}
	if dataKind(e.Type()) != rec.Kind {
		return "the value's type is not the record's kind"
	}
	return ""
}

// putData stores a data record (checked) under key, unless it expired.
func (s *shard) putData(key []byte, h uint64, rec *Record) {
	e, _ := values.FromFields(rec.Fields)
	if dataExpiresAt(&e) <= s.now {
		return
	}
	e.Used = s.now
	i := s.insert(key, h, kindData)
	s.tab.slots[i].val = s.data.add(e)
	s.types[e.Type()]++
}

// replyArena holds the replies of a shard's data commands: each reply is
// appended after the last and handed out as a string over its bytes,
// which are never written again (a full arena is replaced, not reused),
// so a reply costs no allocation of its own and stays valid as long as
// the caller keeps it.
type replyArena struct{ buf []byte }

// arenaBlock is the size of a new arena block.
const arenaBlock = 16 << 10

func (a *replyArena) exec(cmd Command, ks Keyspace) string {
	if cap(a.buf)-len(a.buf) < 256 {
		a.buf = make([]byte, 0, arenaBlock)
	}
	start := len(a.buf)
	a.buf = cmd.Exec(ks, a.buf)
	n := len(a.buf) - start
	if n == 0 {
		return ""
	}
	reply := unsafe.String(&a.buf[start], n)
	if cap(a.buf) > arenaBlock {
		a.buf = nil // a large reply grew its own array: do not keep it
	}
	return reply
}
