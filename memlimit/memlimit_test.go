package memlimit

import (
	"context"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// fakeBackend stores keys of a fixed charge each; Evict removes r.N of
// them.
type fakeBackend struct {
	stored   int
	perKey   int64
	leader   bool
	noCreate []bool // every SetNoCreate call
	evicts   []engine.EvictRange
}

func (f *fakeBackend) Usage(context.Context) (engine.Usage, error) {
	return engine.Usage{Stored: f.stored, Charged: int64(f.stored) * f.perKey}, nil
}

func (f *fakeBackend) MemoryLeader() bool { return f.leader }

func (f *fakeBackend) SetNoCreate(_ context.Context, on bool) error {
	f.noCreate = append(f.noCreate, on)
	return nil
}

func (f *fakeBackend) Evict(_ context.Context, r engine.EvictRange) (int, error) {
	f.evicts = append(f.evicts, r)
	n := min(r.N, f.stored)
	f.stored -= n
	return n, nil
}

// newTest returns a controller of f whose heap holds heap bytes, with no
// real collections and a clock that moves only when the test moves it.
func newTest(f *fakeBackend, heap int64) (*Controller, *time.Time) {
	c := New(f)
	now := time.Unix(1000, 0)
	c.heapLive = func() int64 { return heap }
	c.gc = func() {}
	c.now = func() time.Time { return now }
	return c, &now
}

func TestNoEvictionRefusesNewKeysAboveTheLimit(t *testing.T) {
	f := &fakeBackend{stored: 100, perKey: 100, leader: true}
	c, _ := newTest(f, 1000)
	if err := c.Set(20000, NoEviction); err != nil {
		t.Fatal(err)
	}
	c.Enforce(t.Context()) // 11000 used: under
	if len(f.noCreate) != 0 || c.RefusingNewKeys() {
		t.Fatalf("under the limit: SetNoCreate calls %v", f.noCreate)
	}
	f.stored = 300 // 31000 used: over
	c.Enforce(t.Context())
	if len(f.noCreate) != 1 || !f.noCreate[0] || !c.RefusingNewKeys() {
		t.Fatalf("over the limit: SetNoCreate calls %v", f.noCreate)
	}
	if len(f.evicts) != 0 {
		t.Fatalf("noeviction evicted: %v", f.evicts)
	}
	f.stored = 150 // 16000 used: back under
	c.Enforce(t.Context())
	if len(f.noCreate) != 2 || f.noCreate[1] || c.RefusingNewKeys() {
		t.Fatalf("back under: SetNoCreate calls %v", f.noCreate)
	}
	c.Enforce(t.Context())
	if len(f.noCreate) != 2 {
		t.Fatalf("still under: SetNoCreate calls %v", f.noCreate)
	}
}

func TestVolatileTTLEvictsBelowTheLimit(t *testing.T) {
	f := &fakeBackend{stored: 1000, perKey: 100, leader: true}
	c, _ := newTest(f, 0)
	if err := c.Set(50000, VolatileTTL); err != nil {
		t.Fatal(err)
	}
	c.Enforce(t.Context()) // 100000 used: 500 keys too many
	if len(f.evicts) == 0 || f.stored > 500 {
		t.Fatalf("evicted in %d rounds, %d keys left; want at most 500", len(f.evicts), f.stored)
	}
	for i, r := range f.evicts {
		if r.N < 1 || r.N > maxEvictRound || r.From > r.To {
			t.Errorf("round %d: range %+v", i, r)
		}
		if i > 0 && r.From != f.evicts[i-1].To+1 {
			t.Errorf("round %d starts at %d, the last ended at %d", i, r.From, f.evicts[i-1].To)
		}
	}
	if c.RefusingNewKeys() {
		t.Fatalf("below the limit after eviction, yet refusing new keys (SetNoCreate calls %v)", f.noCreate)
	}
}

// TestVolatileTTLRefusesWhenTheHeapIsAboveTheLimit: evicting keys cannot
// shrink the heap, so new keys are refused instead.
func TestVolatileTTLRefusesWhenTheHeapIsAboveTheLimit(t *testing.T) {
	f := &fakeBackend{stored: 10, perKey: 100, leader: true}
	c, _ := newTest(f, 5000)
	c.Set(4000, VolatileTTL)
	c.Enforce(t.Context())
	if len(f.evicts) != 0 || !c.RefusingNewKeys() || len(f.noCreate) != 1 || !f.noCreate[0] {
		t.Fatalf("evicts %v, SetNoCreate calls %v", f.evicts, f.noCreate)
	}
}

func TestFollowerLeavesTheDecisionToTheLeader(t *testing.T) {
	f := &fakeBackend{stored: 1000, perKey: 100, leader: true}
	c, _ := newTest(f, 0)
	c.Set(1000, NoEviction)
	c.Enforce(t.Context())
	if !c.RefusingNewKeys() {
		t.Fatal("leader over the limit: not refusing")
	}
	f.leader = false
	c.Enforce(t.Context())
	if c.RefusingNewKeys() || len(f.noCreate) != 1 || len(f.evicts) != 0 {
		t.Fatalf("follower: refusing %v, SetNoCreate calls %v, evicts %v", c.RefusingNewKeys(), f.noCreate, f.evicts)
	}
}

// TestCollectsAtMostOncePerRefresh: over the limit, the controller forces
// a collection to refresh the heap figure, at most once per gcRefresh.
func TestCollectsAtMostOncePerRefresh(t *testing.T) {
	f := &fakeBackend{stored: 1000, perKey: 100, leader: true}
	c, now := newTest(f, 0)
	gcs := 0
	c.gc = func() { gcs++ }
	c.Set(1000, NoEviction)
	for range 3 {
		c.Enforce(t.Context())
	}
	if gcs != 1 {
		t.Fatalf("%d collections in one instant, want 1", gcs)
	}
	*now = now.Add(gcRefresh)
	c.Enforce(t.Context())
	if gcs != 2 {
		t.Fatalf("%d collections after gcRefresh, want 2", gcs)
	}
}

func TestSetAndLimit(t *testing.T) {
	c := New(&fakeBackend{})
	if l, p := c.Limit(); l != 0 || p != NoEviction {
		t.Fatalf("zero controller: %d %s", l, p)
	}
	if err := c.Set(-1, NoEviction); err == nil {
		t.Error("negative limit accepted")
	}
	if err := c.Set(10, "allkeys-random"); err == nil {
		t.Error("allkeys-random accepted")
	}
	if err := c.Set(10, AllKeysLRU); err != nil {
		t.Fatal(err)
	}
	if _, p := c.Limit(); p != AllKeysLRU {
		t.Fatalf("policy %s, want allkeys-lru", p)
	}
	if err := c.Set(10, VolatileTTL); err != nil {
		t.Fatal(err)
	}
	if l, p := c.Limit(); l != 10 || p != VolatileTTL {
		t.Fatalf("Limit() = %d %s", l, p)
	}
}

func TestParseMemory(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int64
		bad  bool
	}{
		{in: "0", want: 0}, {in: "100", want: 100}, {in: "1k", want: 1000}, {in: "1KB", want: 1024},
		{in: "2mb", want: 2 << 20}, {in: "3g", want: 3e9}, {in: " 1gb ", want: 1 << 30}, {in: "5b", want: 5},
		{in: "-1", bad: true}, {in: "x", bad: true}, {in: "9999999999gb", bad: true},
	} {
		n, err := ParseMemory(tc.in)
		if (err != nil) != tc.bad || n != tc.want {
			t.Errorf("ParseMemory(%q) = %d, %v", tc.in, n, err)
		}
	}
}

// TestAllKeysLRUEvictsByLastUse: allkeys-lru evicts in the same rounds as
// volatile-ttl, each range marked LRU, so the engine picks by last use.
func TestAllKeysLRUEvictsByLastUse(t *testing.T) {
	f := &fakeBackend{stored: 1000, perKey: 100, leader: true}
	c, _ := newTest(f, 0)
	if err := c.Set(50000, AllKeysLRU); err != nil {
		t.Fatal(err)
	}
	c.Enforce(t.Context())
	if len(f.evicts) == 0 || f.stored > 500 {
		t.Fatalf("evicted in %d rounds, %d keys left; want at most 500", len(f.evicts), f.stored)
	}
	for i, r := range f.evicts {
		if !r.LRU {
			t.Errorf("round %d: range %+v is not LRU", i, r)
		}
	}
}

// Before the first collection the live heap reads 0: a limit set then
// (right after start) is enforced at once, after one collection, instead
// of at the first collection the program happens to make.
func TestCollectsBeforeTheFirstReading(t *testing.T) {
	f := &fakeBackend{leader: true}
	c, _ := newTest(f, 0)
	heap := int64(0)
	c.heapLive = func() int64 { return heap }
	gcs := 0
	c.gc = func() { gcs++; heap = 5000 }
	c.Set(1, NoEviction)
	c.Enforce(t.Context())
	if gcs != 1 || !c.RefusingNewKeys() {
		t.Fatalf("%d collections, refusing %v: want 1 and new keys refused", gcs, c.RefusingNewKeys())
	}
}
