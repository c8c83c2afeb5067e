package server

import (
	"bytes"
	"container/heap"
	"hash/maphash"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

// Who is being limited: RL.TOP [COUNT n] lists the keys denied most in the
// recent past, from a bounded-memory heavy-hitters summary.
//
// The summary is Space-Saving (Metwally et al.) with topCapacity counters:
// a denied key that has a counter adds to it; one that has none takes over
// the smallest counter, inheriting its count as its error bound. Any key
// denied more than (total denials)/topCapacity times is guaranteed to hold a
// counter, and a reported count overestimates the truth by at most its
// error. Counts decay exponentially with a half-life of topHalfLife, so the
// list follows who is being limited now: a denial a minute ago weighs half
// of one now. Decay uses forward weights: a denial at time t adds
// 2^((t-origin)/halfLife), reading divides by the weight of now, and when
// the weights grow large every counter is rescaled once; no timer walks the
// counters.
//
// It is fed from the denial path without a shared lock per command or per
// pipeline: each connection counts its denials in a local table (localTop)
// that it moves into the summary every 100 ms. Keys longer than topKeyMax
// bytes are counted by their first topKeyMax bytes.

const (
	topCapacity = 1024
	topHalfLife = time.Minute
	topKeyMax   = 256
)

type topEntry struct {
	key   string
	count float64 // weighted denials, in the units of the current origin
	err   float64 // overestimation bound, same units
	idx   int     // position in the heap
}

// topKeys is the summary. Its methods are safe for concurrent use.
type topKeys struct {
	mu      sync.Mutex
	origin  time.Time // weight 1; later denials weigh more
	entries map[string]*topEntry
	heap    topHeap // min-heap by count: the counter to take over
}

type topHeap []*topEntry

func (h topHeap) Len() int           { return len(h) }
func (h topHeap) Less(i, j int) bool { return h[i].count < h[j].count }
func (h topHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx, h[j].idx = i, j
}
func (h *topHeap) Push(x any) { e := x.(*topEntry); e.idx = len(*h); *h = append(*h, e) }
func (h *topHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// weight is the weight of a denial at now, rescaling every counter first
// when the weights would grow past 2^40 (after 40 half-lives).
func (t *topKeys) weight(now time.Time) float64 {
	if t.origin.IsZero() {
		t.origin = now
	}
	x := float64(now.Sub(t.origin)) / float64(topHalfLife)
	if x > 40 {
		w := math.Exp2(x)
		for _, e := range t.heap {
			e.count /= w
			e.err /= w
		}
		t.origin = now
		return 1
	}
	return math.Exp2(x)
}

// add counts key with weight w; t.mu is held.
func (t *topKeys) add(key []byte, w float64) {
	if t.entries == nil {
		t.entries = make(map[string]*topEntry, topCapacity)
	}
	if e := t.entries[string(key)]; e != nil {
		e.count += w
		heap.Fix(&t.heap, e.idx)
		return
	}
	if len(t.heap) < topCapacity {
		e := &topEntry{key: string(key), count: w}
		t.entries[e.key] = e
		heap.Push(&t.heap, e)
		return
	}
	e := t.heap[0]
	delete(t.entries, e.key)
	e.key = string(key)
	e.err = e.count
	e.count += w
	t.entries[e.key] = e
	heap.Fix(&t.heap, 0)
}

// top returns the n keys with the most recent denials, most first (ties
// by key, so the order is stable).
func (t *topKeys) top(n int, now time.Time) []status.TopKey {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(t.heap) == 0 {
		return nil
	}
	w := t.weight(now)
	out := make([]status.TopKey, 0, len(t.heap))
	for _, e := range t.heap {
		out = append(out, status.TopKey{Key: e.key, Denied: e.count / w, Error: e.err / w})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Denied != out[j].Denied {
			return out[i].Denied > out[j].Denied
		}
		return out[i].Key < out[j].Key
	})
	// Counters that decayed below half a denial say nothing any more.
	for len(out) > 0 && out[len(out)-1].Denied < 0.5 {
		out = out[:len(out)-1]
	}
	return out[:min(n, len(out))]
}

// TopDenied returns the n keys denied most in the recent past (RL.TOP).
// It first moves every connection's unmerged denials into the summary, so
// the answer includes every denial made so far.
func (s *Server) TopDenied(n int) []status.TopKey {
	now := time.Now()
	s.mu.Lock()
	list := make([]*client, 0, len(s.clients))
	for _, cl := range s.clients {
		list = append(list, cl)
	}
	s.mu.Unlock()
	for _, cl := range list {
		cl.st.top.flush(&s.top, now)
	}
	return s.top.top(n, now)
}

// localTop is one connection's denials not yet in the server's summary: a
// small table of distinct keys with counts. A connection adds a pipeline's
// denied keys under its own (uncontended) lock, and moves the table into
// the shared summary every localTopEvery or when it is full, so the shared
// lock is taken at most once per localTopEvery per connection with
// denials (or per localTopMax distinct keys), however many denials there
// are. Readers (TopDenied) move every connection's table first.
type localTop struct {
	mu    sync.Mutex
	arena []byte     // the keys, back to back
	ents  []localEnt // distinct keys with counts
	slots []int32    // open addressing by hash: index+1 into ents, 0 empty
	since time.Time  // when the table was last moved (zero: never)
	skip  int        // singletons skipped by sampling (moveLocked)
}

type localEnt struct {
	h        uint64
	off, len int32
	n        int64
}

const (
	localTopMax   = 128 // distinct keys before the table is moved
	localTopSlots = 256 // a power of two above localTopMax
	localTopEvery = 100 * time.Millisecond
	// A table that fills up before localTopEvery is a flood of distinct
	// keys: its keys denied only once are sampled one in topSample (with
	// weight topSample), which keeps a random-key flood from paying a
	// shared-summary update per denial. Keys denied twice or more in the
	// table, and every table moved by time or by a reader, count exactly.
	topSample = 8
)

var topSeed = maphash.MakeSeed()

// add counts key, reporting false when the table is full. l.mu is held.
func (l *localTop) add(key []byte) bool {
	if l.slots == nil {
		l.slots = make([]int32, localTopSlots)
	}
	h := maphash.Bytes(topSeed, key)
	for i := h & (localTopSlots - 1); ; i = (i + 1) & (localTopSlots - 1) {
		e := l.slots[i]
		if e == 0 {
			if len(l.ents) >= localTopMax {
				return false
			}
			l.ents = append(l.ents, localEnt{h: h, off: int32(len(l.arena)), len: int32(len(key)), n: 1})
			l.arena = append(l.arena, key...)
			l.slots[i] = int32(len(l.ents))
			return true
		}
		en := &l.ents[e-1]
		if en.h == h && bytes.Equal(l.arena[en.off:en.off+en.len], key) {
			en.n++
			return true
		}
	}
}

// addBatch counts a pipeline's denied keys keys[ends[i-1]:ends[i]] and
// moves the table into t when it is full or was last moved localTopEvery
// ago.
func (l *localTop) addBatch(t *topKeys, keys []byte, ends []int, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.since.IsZero() {
		l.since = now
	}
	from := 0
	for _, to := range ends {
		if !l.add(keys[from:to]) {
			l.moveSampled(t, now, topSample)
			l.add(keys[from:to])
		}
		from = to
	}
	if now.Sub(l.since) >= localTopEvery {
		l.moveLocked(t, now)
	}
}

// flush moves the table into t.
func (l *localTop) flush(t *topKeys, now time.Time) {
	l.mu.Lock()
	l.moveLocked(t, now)
	l.mu.Unlock()
}

func (l *localTop) moveLocked(t *topKeys, now time.Time) { l.moveSampled(t, now, 1) }

// moveSampled moves the table into t, keeping one in sample of the keys
// counted once (each then weighs sample). l.mu is held.
func (l *localTop) moveSampled(t *topKeys, now time.Time, sample int) {
	l.since = now
	if len(l.ents) == 0 {
		return
	}
	t.mu.Lock()
	w := t.weight(now)
	for _, e := range l.ents {
		n := float64(e.n)
		if e.n == 1 && sample > 1 {
			if l.skip++; l.skip%sample != 0 {
				continue
			}
			n = float64(sample)
		}
		t.add(l.arena[e.off:e.off+e.len], w*n)
	}
	t.mu.Unlock()
	clear(l.slots)
	l.ents = l.ents[:0]
	l.arena = l.arena[:0]
}

// cmdTop: RL.TOP [COUNT n]. Each element is [key, denials]: the denials
// rounded to an integer, weighted by age (half-life one minute).
func cmdTop(s *Server, c *client, args [][]byte) outcome {
	n := status.DefaultTopCount
	switch {
	case len(args) == 1:
	case len(args) == 3 && command.EqualFold(args[1], "count"):
		v, ok := command.ParseInt(args[2])
		if !ok || v < 1 {
			c.rep.error(command.ErrNotInteger)
			return cmdOK
		}
		n = int(min(v, topCapacity))
	default:
		c.rep.error(command.ErrSyntax)
		return cmdOK
	}
	top := s.TopDenied(n)
	c.rep.conn.WriteArray(len(top))
	for _, k := range top {
		c.rep.conn.WriteArray(2)
		c.rep.conn.WriteBulkString(k.Key)
		c.rep.conn.WriteInt64(int64(math.Round(k.Denied)))
	}
	return cmdOK
}
