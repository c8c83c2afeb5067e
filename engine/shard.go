package engine

import "sync/atomic"

// shard owns a partition of the keys. Only the shard's goroutine (run)
// touches its fields: there is no mutex on limiter state.
type shard struct {
	ch chan job

	now     int64              // last time seen; time never runs backwards here
	index   map[string]ref     // key -> kind and slot
	gen     uint64             // incremented by flush, which replaces index
	gcra    slab[int64]        // TATs
	fixed   slab[fixedState]   // fixed windows
	sliding slab[slidingState] // sliding window counters
	log     slab[logState]     // sliding window logs
	shape   slab[int64]        // queue schedule ends
	walks   []*exporter        // exports in progress (record.go)

	// dirty counts the state changes of the current job; run adds it to
	// changes once per job, so a write costs a plain increment and only
	// readers of Changes touch the atomic's cache line.
	dirty   uint64
	changes atomic.Uint64
}

// job is one message to a shard: either a slice of a batch (reqs at idx) or
// a function to run on the shard goroutine.
type job struct {
	now  int64
	reqs []Request
	res  []Result
	idx  []int32
	fn   func(*shard)
	done chan struct{}
}

func newShard(queue int) *shard {
	return &shard{ch: make(chan job, queue), index: make(map[string]ref)}
}

func (s *shard) run() {
	for j := range s.ch {
		if j.fn != nil {
			j.fn(s)
		} else {
			s.advance(j.now)
			for _, i := range j.idx {
				s.apply(&j.reqs[i], &j.res[i])
			}
		}
		if s.dirty != 0 {
			s.changes.Add(s.dirty)
			s.dirty = 0
		}
		j.done <- struct{}{}
	}
}

// advance clamps now so it never goes backwards: a clock that jumps back
// adds no tokens.
func (s *shard) advance(now int64) {
	if now > s.now {
		s.now = min(now, MaxNow)
	}
}

// lookup returns the key's live state. State that has expired (is back to
// empty) is dropped here and reported missing.
func (s *shard) lookup(key []byte) (ref, bool) {
	r, ok := s.index[string(key)]
	if !ok {
		return 0, false
	}
	if s.expiresAt(r) <= s.now {
		s.drop(key, r)
		return 0, false
	}
	return r, true
}

// expiresAt is the time at which the state in r is empty again.
func (s *shard) expiresAt(r ref) int64 {
	switch r.kind() {
	case KindGCRA:
		return s.gcra.vals[r.slot()]
	case KindFixed:
		return s.fixed.vals[r.slot()].end
	case KindSliding:
		return s.sliding.vals[r.slot()].expiresAt()
	case KindLog:
		return s.log.vals[r.slot()].expiresAt()
	case KindShape:
		return s.shape.vals[r.slot()]
	}
	panic("engine: unknown kind in index")
}

// insert adds a new key. Exports in progress note it, so that a key
// created (or deleted and created again) during an export is never
// exported twice.
func (s *shard) insert(key string, r ref) {
	s.index[key] = r
	for _, x := range s.walks {
		x.created[key] = struct{}{}
	}
}

func (s *shard) drop(key []byte, r ref) {
	delete(s.index, string(key))
	s.free(r)
}

func (s *shard) free(r ref) {
	switch r.kind() {
	case KindGCRA:
		s.gcra.del(r.slot())
	case KindFixed:
		s.fixed.del(r.slot())
	case KindSliding:
		s.sliding.del(r.slot())
	case KindLog:
		s.log.del(r.slot())
	case KindShape:
		s.shape.del(r.slot())
	}
}

func (s *shard) apply(r *Request, out *Result) {
	*out = Result{}
	switch r.Op {
	case OpGCRA:
		s.applyGCRA(r, out)
	case OpFixed:
		applyValue(s, KindFixed, &s.fixed, r, out, fixed)
	case OpSliding:
		applyValue(s, KindSliding, &s.sliding, r, out, sliding)
	case OpLog:
		s.applyLog(r, out)
	case OpShape:
		applyValue(s, KindShape, &s.shape, r, out, shape)
	case OpDel:
		if ref, ok := s.lookup(r.Key); ok {
			s.drop(r.Key, ref)
			s.dirty++
			out.Value = 1
		}
	case OpExists:
		if _, ok := s.lookup(r.Key); ok {
			out.Value = 1
		}
	case OpTTL:
		out.Value = -2
		if ref, ok := s.lookup(r.Key); ok {
			out.Value = s.expiresAt(ref) - s.now
			out.Kind = ref.kind()
		}
	default:
		panic("engine: unknown op")
	}
}

func (s *shard) applyGCRA(r *Request, out *Result) {
	ref, ok := s.lookup(r.Key)
	if ok && ref.kind() != KindGCRA {
		out.Err = ErrWrongType
		return
	}
	var tat int64
	if ok {
		tat = s.gcra.vals[ref.slot()]
	}
	next, store := gcra(s.now, tat, r, out)
	if !store {
		return
	}
	s.dirty++
	if ok {
		s.gcra.vals[ref.slot()] = next
		return
	}
	s.insert(string(r.Key), makeRef(KindGCRA, s.gcra.add(next)))
}

// applyValue decides a request whose state is a plain value of type T in
// sl: decide gets the stored value (the zero value when the key is missing)
// and returns the value to store when store is true.
func applyValue[T any](s *shard, k Kind, sl *slab[T], r *Request, out *Result,
	decide func(now int64, st T, r *Request, out *Result) (T, bool)) {
	ref, ok := s.lookup(r.Key)
	if ok && ref.kind() != k {
		out.Err = ErrWrongType
		return
	}
	var st T
	if ok {
		st = sl.vals[ref.slot()]
	}
	next, store := decide(s.now, st, r, out)
	if !store {
		return
	}
	s.dirty++
	if ok {
		sl.vals[ref.slot()] = next
		return
	}
	s.insert(string(r.Key), makeRef(k, sl.add(next)))
}

// applyLog decides a sliding window log request; the log is updated in
// place, so an existing key's ring is reused.
func (s *shard) applyLog(r *Request, out *Result) {
	ref, ok := s.lookup(r.Key)
	if ok && ref.kind() != KindLog {
		out.Err = ErrWrongType
		return
	}
	if ok {
		if slidingLog(s.now, &s.log.vals[ref.slot()], r, out) {
			s.dirty++
		}
		return
	}
	var st logState
	if slidingLog(s.now, &st, r, out) {
		s.dirty++
		s.insert(string(r.Key), makeRef(KindLog, s.log.add(st)))
	}
}

// sweep examines up to budget keys and drops those whose state is empty
// again. It reports how many it examined and dropped. Map iteration starts
// at a random place, so repeated sweeps cover the whole map; which keys are
// dropped first does not matter because dropping is invisible.
func (s *shard) sweep(now int64, budget int) (examined, dropped int) {
	s.advance(now)
	for k, r := range s.index {
		if examined >= budget {
			break
		}
		examined++
		if s.expiresAt(r) <= s.now {
			delete(s.index, k)
			s.free(r)
			dropped++
		}
	}
	return examined, dropped
}

// live counts keys whose state is not empty at the shard's time.
func (s *shard) live(now int64) int {
	s.advance(now)
	n := 0
	for _, r := range s.index {
		if s.expiresAt(r) > s.now {
			n++
		}
	}
	return n
}

func (s *shard) flush() {
	if len(s.index) > 0 {
		s.dirty++
	}
	s.index = make(map[string]ref)
	s.gen++
	s.gcra.reset()
	s.fixed.reset()
	s.sliding.reset()
	s.log.reset()
	s.shape.reset()
}
