package engine

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"math"
	"slices"
	"unsafe"

	"github.com/rlserver/rlserver/values"
)

// Memory limits: the engine's side of maxmemory.
//
// The engine never measures memory (that would make replicas disagree): a
// caller that does (the memory monitor standalone, the Raft leader's in a
// cluster) turns the no-create mode on and off and asks for evictions,
// and in a cluster writes both into the log, so every replica makes the
// same decisions in the same order.

// ErrOOM is the Result.Err of a request that would create a key while the
// engine is in no-create mode (SetNoCreate).
var ErrOOM = errors.New("no new keys while memory is above its limit")

// SlotCharge is what Usage charges each stored key besides its own bytes:
// the share of the slot array of a table rebuilt half full (two 16-byte
// slots). A table is between 13/16 and 1/16 full, so its slots take 20
// to 256 bytes per key; the charge is the figure after a rebuild, and
// drops at once when a key goes, so deleting and evicting keys makes room
// at once.
const SlotCharge = 32

// Usage is what an engine's tables hold, read without walking them.
type Usage struct {
	// Keys counts the stored keys by kind (index Kind). Stored keys
	// include those whose state became empty but were not dropped yet
	// (the sweep drops them within seconds), so the counts can exceed
	// Len's, which walks the tables.
	Keys [NumKinds]int
	// Stored is the sum of Keys.
	Stored int
	// Charged is the bytes charged for the stored keys: SlotCharge per
	// key plus the key bytes (plus 8 for keys of 65535 bytes or more).
	// The per-kind state of window and log keys is on the Go heap and is
	// not included.
	Charged int64
	// Allocated is the bytes of the tables' slot arrays and arenas, on
	// the heap or off it, used or not.
	Allocated int64
}

// Usage reads the stored-key counts and the memory of every shard's
// table: one short job per shard, O(shards), whatever the key count.
func (e *Engine) Usage(ctx context.Context) (Usage, error) {
	per := make([]Usage, len(e.shards))
	err := e.onEach(ctx, func(i int, s *shard) { per[i] = s.usage() })
	var u Usage
	for _, p := range per {
		for k, n := range p.Keys {
			u.Keys[k] += n
		}
		u.Stored += p.Stored
		u.Charged += p.Charged
		u.Allocated += p.Allocated
	}
	return u, err
}

// usage is the shard's Usage: its table's, with data keys counted by
// their type and their entries charged.
func (s *shard) usage() Usage {
	u := s.tab.usage()
	for t, n := range s.types {
		if n > 0 {
			u.Keys[dataKind(values.Type(t))] += n
		}
	}
	u.Charged += int64(s.tab.kinds[kindData]) * int64(unsafe.Sizeof(values.Entry{}))
	return u
}

func (t *table) usage() Usage {
	var u Usage
	for k, n := range t.kinds {
		if v := int(Kind(k).visible()); v < NumKinds && Kind(k) != kindData {
			u.Keys[v] += n
		}
	}
	u.Stored = t.live
	u.Charged = int64(t.live)*SlotCharge + int64(t.liveBytes())
	u.Allocated = int64(len(t.slots))*16 + int64(cap(t.arena))
	return u
}

// SetNoCreate turns the no-create mode on or off on every shard. It is a
// job on each shard's queue, so it takes effect between the batches
// before and after it. In no-create mode a request that would create a key
// (a decision that is not read-only, with cost > 0, on a key that is
// missing or whose state is empty) fails with ErrOOM and changes nothing;
// requests on keys that hold state work as always.
func (e *Engine) SetNoCreate(ctx context.Context, on bool) error {
	return e.onEach(ctx, func(_ int, s *shard) { s.noCreate = on })
}

// refuseCreate reports whether r would create a key in no-create mode, and
// then sets out.Err. The read-only evaluation of a group's tier
// (s.scratch, decideGroup) is judged as the tier itself, so a group that
// would create a key fails whole before anything is charged.
func (s *shard) refuseCreate(r *Request, out *Result) bool {
	switch r.Op {
	case OpGCRA, OpFixed, OpSliding, OpLog, OpShape:
	default:
		return false
	}
	if (r.ReadOnly && r != &s.scratch) || r.Cost <= 0 {
		return false
	}
	if _, ok := s.lookup(r.Key, hashKey(r.Key)); ok {
		return false
	}
	out.Err = ErrOOM
	return true
}

// EvictRange is one round of eviction: the keys whose index hash
// (hashKey) lies in [From, To] are the sample, and of those live at the
// round's time, the N whose state empties soonest are removed.
//
// The sample depends only on the keys and the hash, never on a table's
// layout, the shard count or which expired keys a replica's sweep has
// dropped yet, so every replica that applies the same rounds at the same
// times removes the same keys. A caller sizes the range to hold a few
// times N keys (Redis samples 5 keys per eviction) and moves it along the
// hash space from round to round, so every key is sampled in turn.
type EvictRange struct {
	From, To uint64
	N        int
	// LRU picks by last use instead of soonest empty (allkeys-lru): the
	// data keys used least recently first, whatever their TTL, then the
	// limiter keys, soonest empty first (a limiter key keeps no time of
	// last use; its state empties on its own).
	LRU bool
}

// Evict removes up to r.N keys among those whose hash lies in the range
// and whose state is not empty at nowNanos: the ones whose state empties
// soonest (for a token bucket: the one closest to full, whose loss admits
// least), ties broken by hash, then key. It returns the number removed.
// Each shard first advances to nowNanos. Like Do, it honours ctx only
// before it starts; it takes two jobs per shard, and requests applied
// between them may change the candidates' states (standalone; a cluster
// applies entries one at a time).
func (e *Engine) Evict(ctx context.Context, nowNanos int64, r EvictRange) (int, error) {
	if r.N <= 0 || r.From > r.To {
		return 0, nil
	}
	per := make([][]evictCand, len(e.shards))
	if err := e.onEach(ctx, func(i int, s *shard) {
		s.advance(nowNanos)
		per[i] = s.evictCandidates(r)
	}); err != nil {
		return 0, err
	}
	var all []evictCand
	for i, p := range per {
		for j := range p {
			p[j].shard = i
		}
		all = append(all, p...)
	}
	slices.SortFunc(all, evictCand.compare)
	all = all[:min(len(all), r.N)]
	byShard := make([][]evictCand, len(e.shards))
	for _, c := range all {
		byShard[c.shard] = append(byShard[c.shard], c)
	}
	evicted := make([]int, len(e.shards))
	err := e.onEach(context.WithoutCancel(ctx), func(i int, s *shard) {
		for _, c := range byShard[i] {
			if j, ok := s.lookup(c.key, c.hash); ok {
				s.remove(j)
				s.dirty++
				evicted[i]++
			}
		}
	})
	n := 0
	for _, v := range evicted {
		n += v
	}
	return n, err
}

// evictCand is a key sampled for eviction.
type evictCand struct {
	class   int   // the order between kinds: 0 first
	expires int64 // the order within a class: soonest empty, or least recently used (LRU)
	hash    uint64
	key     []byte // a copy
	shard   int
}

func (a evictCand) compare(b evictCand) int {
	if c := cmp.Compare(a.class, b.class); c != 0 {
		return c
	}
	if c := cmp.Compare(a.expires, b.expires); c != 0 {
		return c
	}
	if c := cmp.Compare(a.hash, b.hash); c != 0 {
		return c
	}
	return bytes.Compare(a.key, b.key)
}

// evictCandidates returns the r.N first keys, in evictCand order, among
// the live keys of the shard whose hash lies in [r.From, r.To].
//
// A key sits at its home slot or after it, before the next empty slot
// (linear probing, wrapping), and home is monotone in the hash. So the
// keys of the range are among the slots from home(From) up to the first
// empty slot at or after home(To): the walk reads those, recomputes each
// key's hash and keeps those in range.
func (s *shard) evictCandidates(r EvictRange) []evictCand {
	t := &s.tab
	n := len(t.slots)
	if t.live == 0 {
		return nil
	}
	var out []evictCand
	i, end := t.home(r.From), t.home(r.To)
	reached := false
	for range n {
		if i == end {
			reached = true
		}
		sl := &t.slots[i]
		if sl.used() {
			key := keyOf(t.arena, sl)
			if h := hashKey(key); h >= r.From && h <= r.To {
				exp := s.expiresAt(sl.kind(), sl.val)
				switch {
				case exp <= s.now:
					// expired: dropped on access or by the sweep
				case r.LRU && sl.kind() == kindData:
					out = append(out, evictCand{expires: s.data.vals[sl.val].Used, hash: h, key: bytes.Clone(key)})
				case r.LRU:
					out = append(out, evictCand{class: 1, expires: exp, hash: h, key: bytes.Clone(key)})
				case exp != math.MaxInt64: // volatile: keys without a TTL stay
					out = append(out, evictCand{expires: exp, hash: h, key: bytes.Clone(key)})
				}
			}
		} else if sl.meta == 0 && reached {
			break
		}
		if i++; i == n {
			i = 0
		}
	}
	slices.SortFunc(out, evictCand.compare)
	return out[:min(len(out), r.N)]
}

// DeleteMatching deletes every key for which match reports true, on each
// shard's goroutine in one pass over its table (no copy of a key or a
// record), and returns how many of them held a state that was not empty
// at nowNanos (what Export would have listed: every replica counts the
// same, whichever expired keys its sweeper has already dropped). match
// runs on the shards' goroutines, one call per key, several shards at
// once; it must not keep the key. A slot move's release drops its range
// this way.
func (e *Engine) DeleteMatching(ctx context.Context, nowNanos int64, match func(key []byte) bool) (int, error) {
	live := make([]int, len(e.shards))
	err := e.onEach(ctx, func(i int, s *shard) {
		s.advance(nowNanos)
		t := &s.tab
		removed := 0
		for j := range t.slots {
			sl := &t.slots[j]
			if !sl.used() || !match(keyOf(t.arena, sl)) {
				continue
			}
			if s.expiresAt(sl.kind(), sl.val) > s.now {
				live[i]++
			}
			s.remove(j)
			removed++
		}
		if removed > 0 {
			s.dirty += uint64(removed)
			s.shrink()
		}
	})
	n := 0
	for _, c := range live {
		n += c
	}
	return n, err
}
