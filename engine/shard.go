package engine

import (
	"math"
	"sync/atomic"

	"github.com/rlserver/rlserver/values"
)

// shard owns a partition of the keys. Only the shard's goroutine (run)
// touches its fields: there is no mutex on limiter state.
type shard struct {
	ch chan job

	now      int64              // last time seen; time never runs backwards here
	tab      table              // key -> kind and state (GCRA, SHAPE) or slab index (table.go)
	gen      uint64             // incremented by flush, which replaces tab
	fixed    slab[fixedState]   // fixed windows
	sliding  slab[slidingState] // sliding window counters
	log      slab[logState]     // sliding window logs
	scaled   slab[scaledState]  // GCRA and SHAPE states kept with their parameters (scaled.go)
	data     slab[values.Entry] // data keys: strings, hashes, sorted sets (data.go)
	types    [6]int             // data keys by values.Type
	sweepAt  int                // the slot the next sweep starts at
	walks    []*exporter        // exports in progress (record.go)
	retired  []*region          // arrays of replaced tables that exports still read (memory.go)
	noCreate bool               // requests that would create a key fail with ErrOOM (evict.go)
	floor    int                // slots a rebuild keeps at least (Engine.Reserve)
	scratch  Request            // the read-only copy of a group's tier (decideGroup)
	replies  replyArena         // the replies of data commands (OpCmd)

	// dirty counts the state changes of the current job; run adds it to
	// changes once per job, so a write costs a plain increment and only
	// readers of Changes touch the atomic's cache line.
	dirty   uint64
	changes atomic.Uint64
	// cmdWrites counts the data commands (OpCmd) that changed a key:
	// parked blocking clients watch it (Engine.CmdWrites); limiter
	// decisions never touch it.
	cmdWrites atomic.Uint64

	hashes []uint64 // warm's scratch
	warmed uint32   // warm's loads end here, so the compiler keeps them
}

// job is one message to a shard: either a slice of a batch (reqs at idx;
// ^i, negative, for a group that starts at i) or a function to run on the
// shard goroutine.
type job struct {
	now  int64
	reqs []Request
	res  []Result
	idx  []int32
	// groups says idx holds groups (^i): the shard then takes the
	// slower loop that looks for them.
	groups bool
	fn     func(*shard)
	done   chan struct{}
}

func newShard(queue int) *shard {
	return &shard{ch: make(chan job, queue), tab: newTable(minSlots, 0)}
}

func (s *shard) run() {
	for j := range s.ch {
		if j.fn != nil {
			j.fn(s)
		} else {
			s.advance(j.now)
			if j.groups {
				s.applyGroups(&j)
			} else {
				s.warm(j.reqs, j.idx)
				for _, i := range j.idx {
					s.apply(&j.reqs[i], &j.res[i])
				}
			}
		}
		if s.dirty != 0 {
			s.changes.Add(s.dirty)
			s.dirty = 0
		}
		j.done <- struct{}{}
	}
}

// warm loads, ahead of a job's requests, the memory their lookups read
// first: every request's home slot, then the key of each home slot in
// use. The table and its keys are far larger than the cache, so each
// lookup otherwise waits for two misses in turn; here the loads of each
// pass do not depend on one another, and the CPU overlaps their misses.
func (s *shard) warm(reqs []Request, idx []int32) {
	if len(idx) < 4 {
		return
	}
	t := &s.tab
	if cap(s.hashes) < len(idx) {
		s.hashes = make([]uint64, len(idx))
	}
	hs := s.hashes[:len(idx)]
	var sum uint32
	for k, i := range idx {
		h := hashKey(reqs[i].Key)
		hs[k] = h
		sum += t.slots[t.home(h)].meta
	}
	for _, h := range hs {
		sl := &t.slots[t.home(h)]
		if sl.meta&metaUsed != 0 {
			if key := keyOf(t.arena, sl); len(key) > 0 {
				sum += uint32(key[0])
			}
		}
	}
	s.warmed = sum
}

// applyGroups applies a job whose list holds groups (^i for a group that
// starts at i) as well as plain requests.
func (s *shard) applyGroups(j *job) {
	for _, i := range j.idx {
		if i < 0 {
			i = ^i
			end := groupEnd(j.reqs, int(i))
			decideGroup(j.reqs[i:end], j.res[i:end], func(int) *shard { return s })
			continue
		}
		s.apply(&j.reqs[i], &j.res[i])
	}
}

// advance clamps now so it never goes backwards: a clock that jumps back
// adds no tokens.
func (s *shard) advance(now int64) {
	if now > s.now {
		s.now = min(now, MaxNow)
	}
}

// lookup returns the slot of the key's live state (h = hashKey(key)).
// State that has expired (is back to empty) is dropped here and reported
// missing.
func (s *shard) lookup(key []byte, h uint64) (int, bool) {
	i := s.tab.find(key, h)
	if i < 0 {
		return -1, false
	}
	if len(s.walks) != 0 {
		s.touch(i)
	}
	if s.expiresAt(s.tab.slots[i].kind(), s.tab.slots[i].val) <= s.now {
		s.remove(i)
		return -1, false
	}
	return i, true
}

// expiresAt is the time at which the key of kind k with value v (a
// slot's) is dropped: when its state is empty again (emptyAt), except
// that a token bucket's key lasts until that time rounded up to a whole
// millisecond, as Redis's GCRA sets PXAT. Between the two the bucket is
// full, so every decision is the one a missing key gets, but EXISTS and
// PTTL see the key in the millisecond in which a call left state.
func (s *shard) expiresAt(k Kind, v int64) int64 {
	switch k {
	case KindGCRA, kindGCRAScaled:
		return ceilMilli(s.emptyAt(k, v))
	}
	return s.emptyAt(k, v)
}

// emptyAt is the time at which the state of kind k in value v (a slot's)
// is empty again.
func (s *shard) emptyAt(k Kind, v int64) int64 {
	switch k {
	case KindGCRA, KindShape:
		return v
	case kindGCRAScaled, kindShapeScaled:
		return s.scaled.vals[v].val
	case KindFixed:
		return s.fixed.vals[v].end
	case KindSliding:
		return s.sliding.vals[v].expiresAt()
	case KindLog:
		return s.log.vals[v].expiresAt()
	case kindData:
		return dataExpiresAt(&s.data.vals[v])
	}
	panic("engine: unknown kind in index")
}

// insert adds a key that is not in the table, with value 0, and returns
// its slot, in which the caller stores the value. It rebuilds the table
// first when it is full, which may renumber slab entries: a new key's slab
// entry is added only after insert returns. It tells the exports in
// progress which slot the key took.
func (s *shard) insert(key []byte, h uint64, k Kind) int {
	if s.tab.full(len(key)) {
		s.rebuild()
	}
	i := s.tab.insert(key, h, k, 0)
	for _, x := range s.walks {
		x.inserted(i)
	}
	return i
}

// remove deletes the key in used slot i and frees its state.
func (s *shard) remove(i int) {
	if len(s.walks) != 0 {
		s.touch(i)
	}
	sl := &s.tab.slots[i]
	k, v := sl.kind(), sl.val
	s.tab.remove(i)
	s.free(k, v)
}

// free releases the slab entry v of kind k, if that kind has a slab.
func (s *shard) free(k Kind, v int64) {
	switch k {
	case KindFixed:
		s.fixed.del(v)
	case KindSliding:
		s.sliding.del(v)
	case KindLog:
		s.log.del(v)
	case kindGCRAScaled, kindShapeScaled:
		s.scaled.del(v)
	case kindData:
		s.types[s.data.vals[v].Type()]--
		s.data.del(v)
	}
}

// rebuild replaces the table by one sized for its live keys (tableSize:
// half full, so more keys fit; never below shrinkFloor slots when
// shrinking). It first drops every expired key, then copies the rest into
// new arrays, compacting the arena and any slab that is mostly free. The
// old arrays are never written again: the exports in progress keep reading
// them (record.go). The work is proportional to the table's size (a few
// milliseconds per million keys, during which the shard serves nothing);
// growth multiplies the size by 1.625, so it is constant per insert on
// average.
func (s *shard) rebuild() {
	for i := range s.tab.slots {
		if sl := &s.tab.slots[i]; sl.used() && s.expiresAt(sl.kind(), sl.val) <= s.now {
			s.remove(i)
		}
	}
	size := tableSize(s.tab.live)
	if n := len(s.tab.slots); size < n {
		size = max(size, min(n, shrinkFloor))
	}
	size = max(size, s.floor)
	var fixed slab[fixedState]
	var sliding slab[slidingState]
	var log slab[logState]
	var scaled slab[scaledState]
	var data slab[values.Entry]
	compactFixed, compactSliding, compactLog := s.fixed.sparse(), s.sliding.sparse(), s.log.sparse()
	compactScaled, compactData := s.scaled.sparse(), s.data.sparse()
	remap := func(k Kind, v int64) int64 {
		switch {
		case k == KindFixed && compactFixed:
			return fixed.add(s.fixed.vals[v])
		case k == KindSliding && compactSliding:
			return sliding.add(s.sliding.vals[v])
		case k == KindLog && compactLog:
			return log.add(s.log.vals[v])
		case (k == kindGCRAScaled || k == kindShapeScaled) && compactScaled:
			return scaled.add(s.scaled.vals[v])
		case k == kindData && compactData:
			return data.add(s.data.vals[v])
		}
		return v
	}
	old := s.tab
	s.tab = old.rehash(size, remap)
	if compactFixed {
		s.fixed = fixed
	}
	if compactSliding {
		s.sliding = sliding
	}
	if compactLog {
		s.log = log
	}
	if compactScaled {
		s.scaled = scaled
	}
	if compactData {
		s.data = data
	}
	for _, x := range s.walks {
		x.freeze(old.arena)
	}
	s.retire(&old)
	s.sweepAt = 0
}

// sparse reports whether most of the slab's slots are free, so a rebuild
// should renumber its states into a new, smaller slab.
func (sl *slab[T]) sparse() bool {
	return len(sl.free) > 64 && len(sl.free)*2 > len(sl.vals)
}

func (s *shard) apply(r *Request, out *Result) {
	*out = Result{}
	if s.noCreate && s.refuseCreate(r, out) {
		return
	}
	switch r.Op {
	case OpGCRA:
		s.applyBucket(KindGCRA, r, out, gcra)
	case OpFixed:
		applyValue(s, KindFixed, &s.fixed, r, out, fixed)
	case OpSliding:
		applyValue(s, KindSliding, &s.sliding, r, out, sliding)
	case OpLog:
		s.applyLog(r, out)
	case OpShape:
		s.applyBucket(KindShape, r, out, shape)
	case OpCmd:
		before := s.dirty
		out.Reply = s.replies.exec(r.Cmd, s)
		if s.dirty != before {
			s.cmdWrites.Add(1)
		}
	case OpDel:
		if i, ok := s.lookup(r.Key, hashKey(r.Key)); ok {
			s.remove(i)
			s.dirty++
			out.Value = 1
		}
	case OpExists:
		if _, ok := s.lookup(r.Key, hashKey(r.Key)); ok {
			out.Value = 1
		}
	case OpTTL:
		out.Value = -2
		if i, ok := s.lookup(r.Key, hashKey(r.Key)); ok {
			sl := &s.tab.slots[i]
			// Until the state is empty; a key held to the end of its
			// millisecond after that reports 1 ns (PTTL 1).
			out.Value = s.TTL(r.Key)
			out.Kind = s.visibleKind(sl)
		}
	default:
		panic("engine: unknown op")
	}
}

// applyValue decides a request whose state is a plain value of type T in
// sl: decide gets the stored value (the zero value when the key is missing)
// and returns the value to store when store is true.
func applyValue[T any](s *shard, k Kind, sl *slab[T], r *Request, out *Result,
	decide func(now int64, st T, r *Request, out *Result) (T, bool)) {
	h := hashKey(r.Key)
	i, ok := s.lookup(r.Key, h)
	var st T
	if ok {
		e := &s.tab.slots[i]
		if e.kind() != k {
			out.Err = ErrWrongType
			return
		}
		st = sl.vals[e.val]
	}
	next, store := decide(s.now, st, r, out)
	if !store {
		return
	}
	s.dirty++
	if ok {
		sl.vals[s.tab.slots[i].val] = next
		return
	}
	i = s.insert(r.Key, h, k)
	s.tab.slots[i].val = sl.add(next)
}

// applyLog decides a sliding window log request; the log is updated in
// place, so an existing key's ring is reused.
func (s *shard) applyLog(r *Request, out *Result) {
	h := hashKey(r.Key)
	i, ok := s.lookup(r.Key, h)
	if ok {
		e := &s.tab.slots[i]
		if e.kind() != KindLog {
			out.Err = ErrWrongType
			return
		}
		if slidingLog(s.now, &s.log.vals[e.val], r, out) {
			s.dirty++
		}
		return
	}
	var st logState
	if slidingLog(s.now, &st, r, out) {
		s.dirty++
		i = s.insert(r.Key, h, KindLog)
		s.tab.slots[i].val = s.log.add(st)
	}
}

// sweep examines up to budget keys and drops those whose state is empty
// again. It reports how many it examined and dropped. A cursor walks the
// slots in order and wraps around, so repeated sweeps examine every key in
// turn (keys inserted behind the cursor wait for the next round, at most
// one table's worth of examinations away), and one sweep with a budget of
// at least the key count examines each key once. A sweep reads at most
// 16*budget slots, so a sparse table costs no more than a dense one; the
// table is shrunk below 1/16 full, so that bound reaches budget keys.
// Which keys are dropped first does not matter because dropping is
// invisible.
func (s *shard) sweep(now int64, budget int) (examined, dropped int) {
	s.advance(now)
	n := len(s.tab.slots)
	scan := n
	if budget < n/16 {
		scan = 16 * budget
	}
	i := s.sweepAt
	for ; scan > 0 && examined < budget; scan-- {
		if i == n {
			i = 0
		}
		if sl := &s.tab.slots[i]; sl.used() {
			examined++
			if s.expiresAt(sl.kind(), sl.val) <= s.now {
				s.remove(i)
				dropped++
			}
		}
		i++
	}
	s.sweepAt = i % n
	s.shrink()
	return examined, dropped
}

// shrink rebuilds a table that mass expiry left below 1/16 full, or whose
// arena is more than half dead bytes (at least 1 MiB of them), so memory
// follows the live keys down as well as up.
func (s *shard) shrink() {
	t := &s.tab
	if (len(t.slots) > max(shrinkFloor, s.floor) && t.live*16 < len(t.slots)) ||
		(t.deadBytes >= 1<<20 && t.deadBytes*2 > len(t.arena)) {
		s.rebuild()
	}
}

// live counts keys whose state is not empty at the shard's time.
func (s *shard) live(now int64) int {
	n := 0
	for _, c := range s.countKinds(now) {
		n += c
	}
	return n
}

// countKinds counts the keys whose state is not empty at now, by kind.
func (s *shard) countKinds(now int64) [NumKinds]int {
	s.advance(now)
	var n [NumKinds]int
	for i := range s.tab.slots {
		if sl := &s.tab.slots[i]; sl.used() && s.expiresAt(sl.kind(), sl.val) > s.now {
			n[s.visibleKind(sl)]++
		}
	}
	return n
}

func (s *shard) flush() {
	if s.tab.live > 0 {
		s.dirty++
	}
	for _, x := range s.walks {
		x.freeze(s.tab.arena) // an Export ends at its next step: gen changes
		x.detach(s)           // a point-in-time walk goes on over the old state
	}
	s.retire(&s.tab)
	s.tab = newTable(minSlots, 0)
	s.gen++
	s.sweepAt = 0
	s.fixed.reset()
	s.sliding.reset()
	s.log.reset()
	s.scaled.reset()
	s.data.reset()
	s.types = [6]int{}
}

// ceilMilli rounds a time in nanoseconds up to a whole millisecond.
func ceilMilli(ns int64) int64 {
	const ms = int64(1e6)
	if ns > math.MaxInt64-ms {
		return math.MaxInt64
	}
	if r := ns % ms; r > 0 {
		return ns - r + ms
	}
	return ns
}
