package engine_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// algExport collects every record, sorted by key.
func algExport(t testing.TB, e *engine.Engine, now int64) ([]engine.Record, int64) {
	t.Helper()
	var recs []engine.Record
	clock, err := e.Export(context.Background(), now, func(r engine.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	slices.SortFunc(recs, func(a, b engine.Record) int { return strings.Compare(a.Key, b.Key) })
	return recs, clock
}

// algMixedRequest is a random request of a random kind for key i: the kind
// is fixed per key (i % 7) so no call is WRONGTYPE, the costs vary.
func algMixedRequest(rng *rand.Rand, i int) engine.Request {
	k := []byte(fmt.Sprintf("key-%04d", i))
	c := rng.Int64N(4)
	switch i % 7 {
	case 0:
		return algReq(engine.TokenBucket(k, 5, 2, c))
	case 1:
		return algReq(engine.Throttle(k, 4, 3, algSec, c))
	case 2:
		return algReq(engine.GCRA(k, 2, 1, 0.5, c+1))
	case 3:
		return algReq(engine.Fixed(k, 6, 700, c))
	case 4:
		return algReq(engine.Sliding(k, 6, 400, c))
	case 5:
		return algReq(engine.Log(k, 9, 900, c))
	default:
		return algReq(engine.Shape(k, 6, 4, c))
	}
}

// algMixedLoad applies steps random calls over keys keys, time moving
// forward from start; it returns the results and the last time.
func algMixedLoad(t testing.TB, e *engine.Engine, rng *rand.Rand, keys, steps int, start int64) ([]engine.Result, int64) {
	t.Helper()
	now := start
	var out []engine.Result
	reqs := make([]engine.Request, 16)
	res := make([]engine.Result, 16)
	for range steps / 16 {
		now += rng.Int64N(40 * algMs)
		for j := range reqs {
			reqs[j] = algMixedRequest(rng, rng.IntN(keys))
		}
		if err := e.Do(context.Background(), now, reqs, res); err != nil {
			t.Fatal(err)
		}
		out = append(out, res...)
	}
	return out, now
}

func TestRecordRoundTrip(t *testing.T) {
	ctx := context.Background()
	src := algEngine(t, 3)
	rng := rand.New(rand.NewPCG(1, 2))
	_, now := algMixedLoad(t, src, rng, 140, 8000, algT0)
	live, _ := src.Len(ctx, now) // brings every shard to now
	// Export at an earlier time than the shards have seen: the records are
	// taken at the shards' own (later) clock, which Export reports.
	recs, clock := algExport(t, src, algT0)
	if clock != now {
		t.Fatalf("clock t0%+d, want the latest time seen t0%+d", clock-algT0, now-algT0)
	}
	if len(recs) != live || live < 50 {
		t.Fatalf("%d records, %d live keys", len(recs), live)
	}
	kinds := map[engine.Kind]int{}
	for _, r := range recs {
		kinds[r.Kind]++
		got := algDo(t, src, clock, algKeyOp(engine.OpTTL, r.Key))
		if got.Kind != r.Kind {
			t.Errorf("%s: record kind %v, key kind %v", r.Key, r.Kind, got.Kind)
		}
	}
	for _, k := range []engine.Kind{engine.KindGCRA, engine.KindFixed, engine.KindSliding, engine.KindLog, engine.KindShape} {
		if kinds[k] == 0 {
			t.Errorf("no %v record in the export: %v", k, kinds)
		}
	}

	// Into an engine with another shard count.
	dst := algEngine(t, 5)
	if err := dst.Import(ctx, clock, recs); err != nil {
		t.Fatalf("Import: %v", err)
	}
	again, clock2 := algExport(t, dst, 0)
	if clock2 != clock {
		t.Errorf("restored clock t0%+d, want t0%+d", clock2-algT0, clock-algT0)
	}
	if !reflect.DeepEqual(again, recs) {
		t.Fatalf("records differ after the round trip:\n%v\n%v", again, recs)
	}
	for _, r := range recs {
		a := algDo(t, src, clock, algKeyOp(engine.OpTTL, r.Key))
		b := algDo(t, dst, clock, algKeyOp(engine.OpTTL, r.Key))
		if a != b {
			t.Errorf("%s: TTL %+v vs %+v", r.Key, a, b)
		}
	}
	// Both engines take the same decisions from here on, including calls
	// stamped before the snapshot's clock (clamped on both).
	seed := rng.Uint64()
	a, _ := algMixedLoad(t, src, rand.New(rand.NewPCG(seed, 0)), 140, 4000, clock-time.Second.Nanoseconds())
	b, _ := algMixedLoad(t, dst, rand.New(rand.NewPCG(seed, 0)), 140, 4000, clock-time.Second.Nanoseconds())
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("call %d after restore: %+v vs %+v", i, a[i], b[i])
		}
	}
}

// TestRecordLayouts pins the documented Fields layout of every kind.
func TestRecordLayouts(t *testing.T) {
	e := algEngine(t, 1)
	now := algT0 + 1200*algMs
	calls := []engine.Request{
		algReq(engine.TokenBucket([]byte("gcra"), 5, 1, 2)),
		algReq(engine.Fixed([]byte("fixed"), 5, 1000, 2)),
		algReq(engine.Sliding([]byte("sliding"), 5, 1000, 2)),
		algReq(engine.Log([]byte("log"), 5, 1000, 2)),
		algReq(engine.Shape([]byte("shape"), 5, 1, 2)),
	}
	for _, at := range []int64{algT0 + 250*algMs, now} {
		for _, r := range calls {
			algDo(t, e, at, r)
		}
	}
	recs, clock := algExport(t, e, now)
	if clock != now {
		t.Fatalf("clock t0%+d", clock-algT0)
	}
	w := algSec
	want := []engine.Record{
		{Key: "fixed", Kind: engine.KindFixed, Fields: []int64{algT0 + 2*w, w, 2}},
		{Key: "gcra", Kind: engine.KindGCRA, Fields: []int64{algT0 + 4250*algMs}},
		{Key: "log", Kind: engine.KindLog, Fields: []int64{w, algT0 + 250*algMs, algT0 + 250*algMs, now, now}},
		{Key: "shape", Kind: engine.KindShape, Fields: []int64{algT0 + 4250*algMs}},
		{Key: "sliding", Kind: engine.KindSliding, Fields: []int64{algT0 + 2*w, w, 2, 2}},
	}
	if !reflect.DeepEqual(recs, want) {
		t.Errorf("records\n got %v\nwant %v", recs, want)
	}
}

func TestRecordImportValidates(t *testing.T) {
	ctx := context.Background()
	good := engine.Record{Key: "good", Kind: engine.KindGCRA, Fields: []int64{algT0 + algSec}}
	w := algSec
	for _, bad := range []engine.Record{
		{Key: "none", Kind: engine.KindNone, Fields: []int64{1}},
		{Key: "unknown", Kind: 99, Fields: []int64{1}},
		{Key: "gcra short", Kind: engine.KindGCRA},
		{Key: "gcra long", Kind: engine.KindGCRA, Fields: []int64{1, 2}},
		{Key: "gcra negative", Kind: engine.KindGCRA, Fields: []int64{-1}},
		{Key: "gcra beyond", Kind: engine.KindGCRA, Fields: []int64{engine.MaxNow + engine.MaxDuration + 1}},
		{Key: "shape beyond", Kind: engine.KindShape, Fields: []int64{engine.MaxNow + engine.MaxDuration + 1}},
		{Key: "fixed unaligned", Kind: engine.KindFixed, Fields: []int64{algT0 + 1, w, 1}},
		{Key: "fixed zero window", Kind: engine.KindFixed, Fields: []int64{algT0, 0, 1}},
		{Key: "fixed zero count", Kind: engine.KindFixed, Fields: []int64{algT0, w, 0}},
		{Key: "fixed huge count", Kind: engine.KindFixed, Fields: []int64{algT0, w, engine.MaxLimit + 1}},
		{Key: "sliding empty", Kind: engine.KindSliding, Fields: []int64{algT0, w, 0, 0}},
		{Key: "sliding negative", Kind: engine.KindSliding, Fields: []int64{algT0, w, 2, -1}},
		{Key: "sliding short", Kind: engine.KindSliding, Fields: []int64{algT0, w, 2}},
		{Key: "log empty", Kind: engine.KindLog, Fields: []int64{w}},
		{Key: "log descending", Kind: engine.KindLog, Fields: []int64{w, algT0 + 1, algT0}},
		{Key: "log zero window", Kind: engine.KindLog, Fields: []int64{0, algT0}},
		{Key: "log too long", Kind: engine.KindLog, Fields: make([]int64, engine.MaxLogLimit+2)},
	} {
		if bad.Key == "log too long" {
			bad.Fields[0] = w
		}
		e := algEngine(t, 2)
		err := e.Import(ctx, algT0, []engine.Record{good, bad})
		if !errors.Is(err, engine.ErrBadRecord) {
			t.Errorf("%s: err = %v, want ErrBadRecord", bad.Key, err)
		}
		if n, _ := e.Len(ctx, algT0); n != 0 {
			t.Errorf("%s: %d keys inserted from an invalid batch", bad.Key, n)
		}
	}
}

func TestRecordImportReplacesAndSkipsExpired(t *testing.T) {
	ctx := context.Background()
	e := algEngine(t, 2)
	algDo(t, e, algT0, algReq(engine.Fixed([]byte("a"), 5, 1000, 1)))
	algDo(t, e, algT0, algReq(engine.Fixed([]byte("b"), 5, 1000, 1)))
	err := e.Import(ctx, algT0, []engine.Record{
		{Key: "a", Kind: engine.KindLog, Fields: []int64{algSec, algT0 - 200*algMs}},
		{Key: "b", Kind: engine.KindGCRA, Fields: []int64{algT0}}, // empty at t0
		{Key: "c", Kind: engine.KindShape, Fields: []int64{algT0 + 5*algMs}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := algDo(t, e, algT0, algKeyOp(engine.OpTTL, "a")); got.Kind != engine.KindLog || got.Value != 800*algMs {
		t.Errorf("a: %+v", got)
	}
	if got := algDo(t, e, algT0, algKeyOp(engine.OpExists, "b")); got.Value != 0 {
		t.Errorf("b: an empty record left the key in place")
	}
	if got := algDo(t, e, algT0, algKeyOp(engine.OpTTL, "c")); got.Kind != engine.KindShape || got.Value != 5*algMs {
		t.Errorf("c: %+v", got)
	}
	// The restored log decides as the original would.
	if got := algDo(t, e, algT0, algReq(engine.Log([]byte("a"), 1, 1000, 1))); got.Allowed || got.RetryAfter != 800*algMs {
		t.Errorf("restored log: %+v", got)
	}
}

// TestRecordExportWhileBusy exports a shard of many keys (several steps)
// while other goroutines keep calling it: every key that lives throughout
// appears exactly once, and the shard keeps serving between steps.
func TestRecordExportWhileBusy(t *testing.T) {
	ctx := context.Background()
	e := algEngine(t, 2)
	const keys = 20_000
	reqs := make([]engine.Request, keys)
	for i := range reqs {
		// Limit 3, window 1 h: lives through the test.
		reqs[i] = algReq(engine.Fixed([]byte(fmt.Sprintf("stable-%05d", i)), 3, 3_600_000, 1))
	}
	if err := e.Do(ctx, algT0, reqs, make([]engine.Result, keys)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 9))
			res := make([]engine.Result, 1)
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k := []byte(fmt.Sprintf("churn-%d-%d", g, rng.IntN(500)))
				r := algReq(engine.Log(k, 3, 100, 1))
				if i%3 == 0 {
					r = engine.Request{Op: engine.OpDel, Key: k}
				}
				if err := e.Do(ctx, algT0+int64(i)*algMs, []engine.Request{r}, res); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]int{}
	_, err := e.Export(ctx, algT0, func(r engine.Record) error {
		seen[r.Key]++
		return nil
	})
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatal(err)
	}
	for k, n := range seen {
		if n != 1 {
			t.Errorf("%s exported %d times", k, n)
		}
	}
	for i := range keys {
		if k := fmt.Sprintf("stable-%05d", i); seen[k] != 1 {
			t.Fatalf("%s missing from the export", k)
		}
	}
}

func TestRecordExportStops(t *testing.T) {
	ctx := context.Background()
	e := algEngine(t, 2)
	reqs := make([]engine.Request, 10_000)
	for i := range reqs {
		reqs[i] = algReq(engine.Shape([]byte(fmt.Sprintf("k%d", i)), 5, 1, 1))
	}
	if err := e.Do(ctx, algT0, reqs, make([]engine.Result, len(reqs))); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	boom := errors.New("boom")
	for range 50 {
		n := 0
		_, err := e.Export(ctx, algT0, func(engine.Record) error {
			if n++; n == 10 {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Export returned %v, want the callback's error", err)
		}
		cctx, cancel := context.WithCancel(ctx)
		cancel()
		if _, err := e.Export(cctx, algT0, func(engine.Record) error { return nil }); !errors.Is(err, context.Canceled) {
			t.Fatalf("Export with a cancelled context returned %v", err)
		}
	}
	// Aborted walks are released on the shards (no parked iterators).
	if err := e.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine() > before+2 && time.Now().Before(deadline) {
		runtime.Gosched()
	}
	if after := runtime.NumGoroutine(); after > before+2 {
		t.Errorf("goroutines %d before, %d after 100 aborted exports", before, after)
	}
	// Flushing during an export ends the walk of the old map.
	if err := e.Do(ctx, algT0, reqs, make([]engine.Result, len(reqs))); err != nil {
		t.Fatal(err)
	}
	n := 0
	_, err := e.Export(ctx, algT0, func(engine.Record) error {
		if n++; n == 1 {
			return e.Flush(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n >= len(reqs) {
		t.Errorf("%d records after a flush in the middle of the export", n)
	}
}
