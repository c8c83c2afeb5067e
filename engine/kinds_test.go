package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"sort"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// Named instants for the algorithm tests. algT0 is a multiple of every
// window used here, so aligned windows start at algT0.
const (
	algT0  = int64(1_700_000_000_000_000_000)
	algMs  = int64(time.Millisecond)
	algSec = int64(time.Second)
)

func algEngine(t testing.TB, shards int) *engine.Engine {
	t.Helper()
	e := engine.New(shards)
	t.Cleanup(e.Close)
	return e
}

// algReq unwraps a constructor's result; tests only build valid requests
// with it, so an error is a bug in the test and panics.
func algReq(r engine.Request, err error) engine.Request {
	if err != nil {
		panic("constructor refused valid arguments: " + err.Error())
	}
	return r
}

// algDo applies one request at now.
func algDo(t testing.TB, e *engine.Engine, now int64, r engine.Request) engine.Result {
	t.Helper()
	res := make([]engine.Result, 1)
	if err := e.Do(context.Background(), now, []engine.Request{r}, res); err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res[0]
}

func algKeyOp(op engine.Op, key string) engine.Request {
	return engine.Request{Op: op, Key: []byte(key)}
}

// algRow is one request at an instant and the whole result it must get.
type algRow struct {
	name string
	at   int64
	req  engine.Request
	want engine.Result
}

func algScript(t *testing.T, e *engine.Engine, rows []algRow) {
	t.Helper()
	for i, row := range rows {
		got := algDo(t, e, row.at, row.req)
		if got != row.want {
			t.Errorf("row %d %q (t0%+d ns):\n got %+v\nwant %+v", i, row.name, row.at-algT0, got, row.want)
		}
	}
}

// algFirst is the smallest x in [lo, hi] with ok(x), for ok monotone
// (false then true) and ok(hi) true.
func algFirst(t testing.TB, lo, hi int64, ok func(int64) bool) int64 {
	t.Helper()
	if !ok(hi) {
		t.Fatalf("algFirst: predicate false at the upper bound t0%+d", hi-algT0)
	}
	for lo < hi {
		mid := lo + (hi-lo)/2
		if ok(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// algEvents is a reference model's record of admitted calls: times in
// ascending order with their costs, and prefix sums for range counts.
type algEvents struct {
	ts   []int64
	cost []int64
	cum  []int64 // cum[i] = total cost of the first i events
}

func (l *algEvents) add(t, c int64) {
	if len(l.cum) == 0 {
		l.cum = []int64{0}
	}
	l.ts = append(l.ts, t)
	l.cost = append(l.cost, c)
	l.cum = append(l.cum, l.cum[len(l.cum)-1]+c)
}

// sum is the total cost admitted at times in [from, to).
func (l *algEvents) sum(from, to int64) int64 {
	if len(l.ts) == 0 || from >= to {
		return 0
	}
	i := sort.Search(len(l.ts), func(i int) bool { return l.ts[i] >= from })
	j := sort.Search(len(l.ts), func(i int) bool { return l.ts[i] >= to })
	return l.cum[j] - l.cum[i]
}

// algCeilMulDiv is ceil(a*b/d) in big integers: the reference for the
// engine's 128-bit arithmetic.
func algCeilMulDiv(a, b, d int64) int64 {
	p := new(big.Int).Mul(big.NewInt(a), big.NewInt(b))
	p.Add(p, big.NewInt(d-1))
	return p.Quo(p, big.NewInt(d)).Int64()
}

// algKinds builds one request of each state kind for key, each taking one
// unit, with the kind it creates.
func algKinds(t testing.TB, key string) []struct {
	kind engine.Kind
	req  engine.Request
} {
	k := []byte(key)
	return []struct {
		kind engine.Kind
		req  engine.Request
	}{
		{engine.KindGCRA, algReq(engine.TokenBucket(k, 5, 1, 1))},
		{engine.KindGCRA, algReq(engine.Throttle(k, 4, 1, algSec, 1))},
		{engine.KindGCRA, algReq(engine.GCRA(k, 4, 1, 1, 1))},
		{engine.KindFixed, algReq(engine.Fixed(k, 5, 1000, 1))},
		{engine.KindSliding, algReq(engine.Sliding(k, 5, 1000, 1))},
		{engine.KindLog, algReq(engine.Log(k, 5, 1000, 1))},
		{engine.KindShape, algReq(engine.Shape(k, 5, 1, 1))},
	}
}

func TestKindsWrongType(t *testing.T) {
	e := algEngine(t, 4)
	kinds := algKinds(t, "x")
	for _, holder := range kinds {
		for _, other := range kinds {
			key := fmt.Sprintf("%v-%v", holder.req.Op, holder.kind)
			h := holder.req
			h.Key = []byte(key)
			if got := algDo(t, e, algT0, h); !got.Allowed || got.Err != nil {
				t.Fatalf("%v: creating %s: %+v", holder.kind, key, got)
			}
			o := other.req
			o.Key = []byte(key)
			got := algDo(t, e, algT0, o)
			if other.kind == holder.kind {
				if got.Err != nil {
					t.Errorf("%v key used by op %d of the same kind: %v", holder.kind, o.Op, got.Err)
				}
			} else if !errors.Is(got.Err, engine.ErrWrongType) || got.Allowed {
				t.Errorf("%v key used by op %d (%v): got %+v, want ErrWrongType", holder.kind, o.Op, other.kind, got)
			}
			// A peek of the wrong kind is refused too, and the key is untouched.
			o.Cost, o.ReadOnly = 0, true
			if got := algDo(t, e, algT0, o); other.kind != holder.kind && !errors.Is(got.Err, engine.ErrWrongType) {
				t.Errorf("%v key peeked by %v: %+v", holder.kind, other.kind, got)
			}
			if got := algDo(t, e, algT0, algKeyOp(engine.OpTTL, key)); got.Kind != holder.kind {
				t.Errorf("%v key reports kind %v", holder.kind, got.Kind)
			}
			algDo(t, e, algT0, algKeyOp(engine.OpDel, key))
		}
	}
}

func TestKindsNamesAndKeyOps(t *testing.T) {
	names := map[engine.Kind]string{
		engine.KindNone: "none", engine.KindGCRA: "rl-gcra", engine.KindFixed: "rl-fixed",
		engine.KindSliding: "rl-sliding", engine.KindLog: "rl-log", engine.KindShape: "rl-shape",
	}
	for k, want := range names {
		if got := k.String(); got != want {
			t.Errorf("Kind(%d).String() = %q, want %q", k, got, want)
		}
	}
	// Append-only values: they appear in snapshots and log entries.
	if engine.KindFixed != 2 || engine.KindSliding != 3 || engine.KindLog != 4 || engine.KindShape != 5 {
		t.Error("kind values were renumbered")
	}
	if engine.OpFixed != 5 || engine.OpSliding != 6 || engine.OpLog != 7 || engine.OpShape != 8 {
		t.Error("op values were renumbered")
	}

	// Every kind: TTL is the ResetAfter of the last call, the key vanishes
	// exactly then (invisible expiry), DEL removes it, DBSIZE counts it.
	e := algEngine(t, 3)
	now := algT0 + 250*algMs
	for i, kr := range algKinds(t, "k") {
		key := fmt.Sprintf("k%d", i)
		r := kr.req
		r.Key = []byte(key)
		res := algDo(t, e, now, r)
		if !res.Allowed || res.ResetAfter <= 0 {
			t.Fatalf("%v: %+v", kr.kind, res)
		}
		if got := algDo(t, e, now, algKeyOp(engine.OpTTL, key)); got.Value != res.ResetAfter || got.Kind != kr.kind {
			t.Errorf("%v: TTL %+v, want %d", kr.kind, got, res.ResetAfter)
		}
		if n, _ := e.Len(context.Background(), now); n != 1 {
			t.Errorf("%v: Len = %d, want 1", kr.kind, n)
		}
		end := now + res.ResetAfter
		if got := algDo(t, e, end-1, algKeyOp(engine.OpExists, key)); got.Value != 1 {
			t.Errorf("%v: gone 1 ns before its reset", kr.kind)
		}
		if got := algDo(t, e, end, algKeyOp(engine.OpExists, key)); got.Value != 0 {
			t.Errorf("%v: still there at its reset", kr.kind)
		}
		// The shard clock is now at end: later checks use later times.
		now = end + 250*algMs
		algDo(t, e, now, r)
		if got := algDo(t, e, now, algKeyOp(engine.OpDel, key)); got.Value != 1 {
			t.Errorf("%v: DEL = %d", kr.kind, got.Value)
		}
		if got := algDo(t, e, now, algKeyOp(engine.OpExists, key)); got.Value != 0 {
			t.Errorf("%v: exists after DEL", kr.kind)
		}
		// A peek never creates a key.
		p := r
		p.Cost, p.ReadOnly = 0, true
		if got := algDo(t, e, now, p); !got.Allowed {
			t.Errorf("%v: peek on a missing key: %+v", kr.kind, got)
		}
		if got := algDo(t, e, now, algKeyOp(engine.OpExists, key)); got.Value != 0 {
			t.Errorf("%v: a peek created the key", kr.kind)
		}
	}
	// FLUSHALL empties every kind.
	for i, kr := range algKinds(t, "f") {
		r := kr.req
		r.Key = []byte(fmt.Sprintf("f%d", i))
		algDo(t, e, now, r)
	}
	if n, _ := e.Len(context.Background(), now); n != 7 {
		t.Fatalf("Len = %d, want 7", n)
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := e.Len(context.Background(), now); n != 0 {
		t.Fatalf("Len after Flush = %d", n)
	}
}

// TestKindsSweepDropsEveryKind checks that the background sweep knows when
// each kind's state is empty.
func TestKindsSweepDropsEveryKind(t *testing.T) {
	e := algEngine(t, 1)
	for i, kr := range algKinds(t, "s") {
		r := kr.req
		r.Key = []byte(fmt.Sprintf("s%d", i))
		algDo(t, e, algT0, r)
	}
	// Nothing is empty yet; all are empty after the longest reset (the
	// sliding counter: this window and the next, 2 s).
	if _, dropped, _ := e.Sweep(context.Background(), algT0, 100); dropped != 0 {
		t.Fatalf("sweep at t0 dropped %d", dropped)
	}
	if _, dropped, _ := e.Sweep(context.Background(), algT0+2*algSec, 100); dropped != 7 {
		t.Fatalf("sweep after every reset dropped %d, want 7", dropped)
	}
}

// algModel is a sequential reference model of one key's state: it takes
// the decision for a call at now (already clamped) and records what it
// admits.
type algModel interface {
	request(cost int64) engine.Request
	do(t testing.TB, now, cost int64) engine.Result
}

// algTrace drives a random trace through the engine and the model and
// requires identical results. limit shapes the costs (mostly 1, some 0,
// some up to limit, some above it); scale is the typical time between calls
// that refills one unit, window the boundary to land on now and then.
// The clock sometimes runs backwards: the model sees the clamped time.
func algTrace(t *testing.T, seed uint64, steps int, m algModel, limit, scale, window int64) {
	t.Helper()
	e := algEngine(t, 3)
	rng := rand.New(rand.NewPCG(seed, 42))
	now := algT0 + rng.Int64N(window)
	clock := int64(0)
	reqs := make([]engine.Request, 3)
	costs := make([]int64, 3)
	res := make([]engine.Result, 3)
	for i := range steps {
		switch p := rng.IntN(100); {
		case p < 25: // same instant
		case p < 65:
			now += 1 + rng.Int64N(max(scale, 1))
		case p < 85:
			now += 1 + rng.Int64N(window)
		case p < 90:
			now += window + rng.Int64N(2*window)
		case p < 95: // on a window boundary, or 1 ns before it
			now += window - now%window - rng.Int64N(2)
		default: // backwards
			now -= 1 + rng.Int64N(window)
		}
		n := 1 + rng.IntN(3)
		for j := range n {
			switch p := rng.IntN(100); {
			case p < 55:
				costs[j] = 1
			case p < 65:
				costs[j] = 0
			case p < 92:
				costs[j] = 1 + rng.Int64N(limit)
			default:
				costs[j] = limit + 1 + rng.Int64N(limit+1)
			}
			reqs[j] = m.request(costs[j])
		}
		if err := e.Do(context.Background(), now, reqs[:n], res[:n]); err != nil {
			t.Fatal(err)
		}
		clock = max(clock, now)
		for j := range n {
			want := m.do(t, clock, costs[j])
			if res[j] != want {
				t.Fatalf("step %d.%d at t0%+d (clock t0%+d), cost %d:\n got %+v\nwant %+v",
					i, j, now-algT0, clock-algT0, costs[j], res[j], want)
			}
		}
	}
}
