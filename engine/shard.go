package engine

// shard owns a partition of the keys. Only the shard's goroutine (run)
// touches its fields: there is no mutex on limiter state.
type shard struct {
	ch chan job

	now   int64          // last time seen; time never runs backwards here
	index map[string]ref // key -> kind and slot
	gcra  slab[int64]    // TATs
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
	}
	panic("engine: unknown kind in index")
}

func (s *shard) drop(key []byte, r ref) {
	delete(s.index, string(key))
	s.free(r)
}

func (s *shard) free(r ref) {
	switch r.kind() {
	case KindGCRA:
		s.gcra.del(r.slot())
	}
}

func (s *shard) apply(r *Request, out *Result) {
	*out = Result{}
	switch r.Op {
	case OpGCRA:
		s.applyGCRA(r, out)
	case OpDel:
		if ref, ok := s.lookup(r.Key); ok {
			s.drop(r.Key, ref)
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
	if ok {
		s.gcra.vals[ref.slot()] = next
		return
	}
	s.index[string(r.Key)] = makeRef(KindGCRA, s.gcra.add(next))
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
	s.index = make(map[string]ref)
	s.gcra.reset()
}
