package engine

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// Named instants. Every engine test passes time explicitly: t0 plus steps.
const (
	t0  = int64(1_700_000_000_000_000_000)
	ms  = int64(time.Millisecond)
	sec = int64(time.Second)
)

func newEngine(t testing.TB, shards int) *Engine {
	t.Helper()
	e := New(shards)
	t.Cleanup(e.Close)
	return e
}

// bucket builds an RL.ALLOW request and fails the test on a constructor error.
func bucket(t testing.TB, key string, capacity int64, ratePerSec float64, cost int64) Request {
	t.Helper()
	r, err := TokenBucket([]byte(key), capacity, ratePerSec, cost)
	if err != nil {
		t.Fatalf("TokenBucket(%q, %d, %v, %d): %v", key, capacity, ratePerSec, cost, err)
	}
	return r
}

// peekReq builds an RL.PEEK request: RL.ALLOW's arguments, never writes.
func peekReq(t testing.TB, key string, capacity int64, ratePerSec float64, cost int64) Request {
	r := bucket(t, key, capacity, ratePerSec, cost)
	r.ReadOnly = true
	return r
}

func keyReq(op Op, key string) Request { return Request{Op: op, Key: []byte(key)} }

// do1 runs one request through Engine.Do at now.
func do1(t testing.TB, e *Engine, now int64, r Request) Result {
	t.Helper()
	res := make([]Result, 1)
	if err := e.Do(context.Background(), now, []Request{r}, res); err != nil {
		t.Fatalf("Do: %v", err)
	}
	return res[0]
}

func exists(t testing.TB, e *Engine, now int64, key string) bool {
	t.Helper()
	return do1(t, e, now, keyReq(OpExists, key)).Value == 1
}

func ttl(t testing.TB, e *Engine, now int64, key string) int64 {
	t.Helper()
	return do1(t, e, now, keyReq(OpTTL, key)).Value
}

func length(t testing.TB, e *Engine, now int64) int {
	t.Helper()
	n, err := e.Len(context.Background(), now)
	if err != nil {
		t.Fatalf("Len: %v", err)
	}
	return n
}

// indexed counts the keys physically held by the shards, expired or not.
func indexed(t testing.TB, e *Engine) int {
	t.Helper()
	counts := make([]int, e.Shards())
	if err := e.onEach(context.Background(), func(i int, s *shard) { counts[i] = s.tab.live }); err != nil {
		t.Fatalf("onEach: %v", err)
	}
	n := 0
	for _, c := range counts {
		n += c
	}
	return n
}

// scriptRow is one request at one instant and the exact result it must get.
type scriptRow struct {
	name string
	at   int64
	req  Request
	want Result
}

func runScript(t *testing.T, e *Engine, rows []scriptRow) {
	t.Helper()
	for i, row := range rows {
		got := do1(t, e, row.at, row.req)
		if got != row.want {
			t.Errorf("row %d %s (t0%+d ns, %s):\n got %+v\nwant %+v", i, row.name, row.at-t0, row.req.Key, got, row.want)
		}
	}
}

func TestKeyOperations(t *testing.T) {
	for _, shards := range []int{1, 4} {
		t.Run(fmt.Sprintf("shards=%d", shards), func(t *testing.T) {
			e := newEngine(t, shards)
			a := func(cost int64) Request { return bucket(t, "a", 3, 1, cost) }
			runScript(t, e, []scriptRow{
				{"exists missing", t0, keyReq(OpExists, "a"), Result{Value: 0}},
				{"ttl missing", t0, keyReq(OpTTL, "a"), Result{Value: -2, Kind: KindNone}},
				{"del missing", t0, keyReq(OpDel, "a"), Result{Value: 0}},
				{"allow creates", t0, a(2), Result{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 2 * sec}},
				{"exists live", t0, keyReq(OpExists, "a"), Result{Value: 1}},
				{"ttl live", t0, keyReq(OpTTL, "a"), Result{Value: 2 * sec, Kind: KindGCRA}},
				{"ttl counts down", t0 + 500*ms, keyReq(OpTTL, "a"), Result{Value: 1500 * ms, Kind: KindGCRA}},
				{"ttl 1 ns before full", t0 + 2*sec - 1, keyReq(OpTTL, "a"), Result{Value: 1, Kind: KindGCRA}},
				{"exists 1 ns before full", t0 + 2*sec - 1, keyReq(OpExists, "a"), Result{Value: 1}},
				{"ttl when full", t0 + 2*sec, keyReq(OpTTL, "a"), Result{Value: -2}},
				{"exists when full", t0 + 2*sec, keyReq(OpExists, "a"), Result{Value: 0}},
				{"del when full", t0 + 2*sec, keyReq(OpDel, "a"), Result{Value: 0}},
				{"allow after expiry is a full bucket", t0 + 2*sec, a(3), Result{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * sec}},
				{"del live", t0 + 2*sec, keyReq(OpDel, "a"), Result{Value: 1}},
				{"exists after del", t0 + 2*sec, keyReq(OpExists, "a"), Result{Value: 0}},
				{"ttl after del", t0 + 2*sec, keyReq(OpTTL, "a"), Result{Value: -2}},
				{"del twice", t0 + 2*sec, keyReq(OpDel, "a"), Result{Value: 0}},
				{"allow after del is a full bucket", t0 + 2*sec, a(1), Result{Allowed: true, Limit: 3, Remaining: 2, ResetAfter: sec}},
				{"other key untouched", t0 + 2*sec, keyReq(OpExists, "b"), Result{Value: 0}},
			})
		})
	}
}

func TestKindString(t *testing.T) {
	if got := KindGCRA.String(); got != "rl-gcra" {
		t.Errorf("KindGCRA.String() = %q", got)
	}
	if got := KindNone.String(); got != "none" {
		t.Errorf("KindNone.String() = %q", got)
	}
}

func TestExpiredKeyIsInvisible(t *testing.T) {
	e := newEngine(t, 1)
	do1(t, e, t0, bucket(t, "k", 10, 1, 4)) // TAT = t0+4s
	if n := length(t, e, t0+4*sec-1); n != 1 {
		t.Fatalf("Len 1 ns before expiry = %d, want 1", n)
	}
	// At TAT == now the bucket is full: the key is gone to every observer
	// even though the shard still holds it until touched or swept.
	if n := length(t, e, t0+4*sec); n != 0 {
		t.Fatalf("Len at expiry = %d, want 0", n)
	}
	if n := indexed(t, e); n != 1 {
		t.Fatalf("expired key should still be held before a sweep or touch, held %d", n)
	}
	if got := do1(t, e, t0+4*sec, peekReq(t, "k", 10, 1, 0)); got != (Result{Allowed: true, Limit: 10, Remaining: 10}) {
		t.Fatalf("peek of expired key = %+v, want a full bucket", got)
	}
	if ttl(t, e, t0+4*sec, "k") != -2 || exists(t, e, t0+4*sec, "k") {
		t.Fatal("expired key is visible to TTL or EXISTS")
	}
	if n := indexed(t, e); n != 0 {
		t.Fatalf("touching an expired key should drop it, held %d", n)
	}
}

func TestLenCountsOnlyLiveKeys(t *testing.T) {
	e := newEngine(t, 4)
	// k1..k10 with TTL of i seconds.
	for i := int64(1); i <= 10; i++ {
		do1(t, e, t0, bucket(t, "k"+strconv.FormatInt(i, 10), 10, 1, i))
	}
	// A peek and a denied call never create a key.
	do1(t, e, t0, bucket(t, "peek", 10, 1, 0))
	do1(t, e, t0, peekReq(t, "ro", 10, 1, 3))
	do1(t, e, t0, bucket(t, "toobig", 10, 1, 11))
	for k := int64(0); k <= 11; k++ {
		want := int(max(10-k, 0))
		if got := length(t, e, t0+k*sec); got != want {
			t.Errorf("Len at t0+%ds = %d, want %d", k, got, want)
		}
	}
}

func TestSweep(t *testing.T) {
	e := newEngine(t, 4)
	ctx := context.Background()
	const short, long = 1000, 500
	var reqs []Request
	for i := range short {
		reqs = append(reqs, bucket(t, fmt.Sprintf("short:%d", i), 10, 1, 1)) // TTL 1s
	}
	for i := range long {
		reqs = append(reqs, bucket(t, fmt.Sprintf("long:%d", i), 10, 1, 10)) // TTL 10s
	}
	res := make([]Result, len(reqs))
	if err := e.Do(ctx, t0, reqs, res); err != nil {
		t.Fatal(err)
	}

	// Nothing has expired yet: a sweep examines but drops nothing.
	ex, dr, err := e.Sweep(ctx, t0+sec-1, 1<<30)
	if err != nil || ex != short+long || dr != 0 {
		t.Fatalf("Sweep before expiry = (%d, %d, %v), want (%d, 0, nil)", ex, dr, err, short+long)
	}

	// A small budget bounds the work per shard.
	const budget = 50
	ex, dr, err = e.Sweep(ctx, t0+5*sec, budget)
	if err != nil || ex != budget*e.Shards() || dr > ex {
		t.Fatalf("Sweep with budget %d = (%d, %d, %v), want %d examined", budget, ex, dr, err, budget*e.Shards())
	}
	// Repeated sweeps reach every expired key.
	total := dr
	for i := 0; total < short && i < 10000; i++ {
		_, dr, err = e.Sweep(ctx, t0+5*sec, budget)
		if err != nil {
			t.Fatal(err)
		}
		total += dr
	}
	if total != short {
		t.Fatalf("sweeps dropped %d keys in total, want %d", total, short)
	}
	if n := indexed(t, e); n != long {
		t.Fatalf("after sweeping, %d keys held, want the %d live ones", n, long)
	}
	for i := range long {
		k := fmt.Sprintf("long:%d", i)
		if got := ttl(t, e, t0+5*sec, k); got != 5*sec {
			t.Fatalf("TTL %s after sweep = %d, want %d", k, got, 5*sec)
		}
	}
	// A full sweep after every key expired leaves nothing, and freed slots
	// are reused instead of growing the table.
	if _, dr, err = e.Sweep(ctx, t0+10*sec, 1<<30); err != nil || dr != long {
		t.Fatalf("final sweep dropped %d (%v), want %d", dr, err, long)
	}
	if n := indexed(t, e); n != 0 {
		t.Fatalf("%d keys held after the final sweep", n)
	}
	slots := func() int {
		c := make([]int, e.Shards())
		_ = e.onEach(ctx, func(i int, s *shard) { c[i] = len(s.tab.slots) })
		n := 0
		for _, v := range c {
			n += v
		}
		return n
	}
	before := slots()
	if err := e.Do(ctx, t0+10*sec, reqs, res); err != nil {
		t.Fatal(err)
	}
	if after := slots(); after != before {
		t.Errorf("table grew from %d to %d slots although %d were free", before, after, before)
	}
}

func TestFlush(t *testing.T) {
	e := newEngine(t, 3)
	for i := range 100 {
		do1(t, e, t0, bucket(t, fmt.Sprintf("k%d", i), 5, 1, 5))
	}
	if n := length(t, e, t0); n != 100 {
		t.Fatalf("Len = %d, want 100", n)
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := length(t, e, t0); n != 0 {
		t.Fatalf("Len after Flush = %d", n)
	}
	if exists(t, e, t0, "k7") {
		t.Fatal("key exists after Flush")
	}
	if got := do1(t, e, t0, bucket(t, "k7", 5, 1, 5)); !got.Allowed || got.Remaining != 0 || got.ResetAfter != 5*sec {
		t.Fatalf("allow after Flush = %+v, want a full bucket drained", got)
	}
}

func TestDoEmptyAndShardOf(t *testing.T) {
	e := newEngine(t, 4)
	if err := e.Do(context.Background(), t0, nil, nil); err != nil {
		t.Fatalf("Do(nil) = %v", err)
	}
	// FNV-1a 64 of "a" is 0xaf63dc4c8601ec8c: the hash must never change,
	// or replicas and snapshots disagree about ownership.
	for _, n := range []int{1, 2, 7, 16, 1 << 20} {
		if got, want := ShardOf([]byte("a"), n), int(uint64(0xaf63dc4c8601ec8c)%uint64(n)); got != want {
			t.Errorf("ShardOf(a, %d) = %d, want %d", n, got, want)
		}
	}
	if got := ShardOf(nil, 3); got != int(uint64(14695981039346656037)%3) {
		t.Errorf("ShardOf(nil, 3) = %d", got)
	}
}

// TestDoSameKeyInBatchInSliceOrder checks that one batch touching a key
// several times, interleaved with other keys on other shards, behaves as
// the same requests sent one by one.
func TestDoSameKeyInBatchInSliceOrder(t *testing.T) {
	e := newEngine(t, 8)
	k := func(cost int64) Request { return bucket(t, "k", 3, 1, cost) }
	other := func(i int) Request { return bucket(t, fmt.Sprintf("other:%d", i), 1, 1, 1) }
	reqs := []Request{
		k(2), other(0),
		peekReq(t, "k", 3, 1, 1), other(1),
		k(2), other(2),
		k(1),
		keyReq(OpTTL, "k"),
		other(0),
		keyReq(OpDel, "k"),
		keyReq(OpExists, "k"),
		k(3),
		k(1),
	}
	want := []Result{
		{Allowed: true, Limit: 3, Remaining: 1, ResetAfter: 2 * sec}, {Allowed: true, Limit: 1, ResetAfter: sec},
		{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * sec}, {Allowed: true, Limit: 1, ResetAfter: sec},
		{Allowed: false, Limit: 3, Remaining: 1, RetryAfter: sec, ResetAfter: 2 * sec}, {Allowed: true, Limit: 1, ResetAfter: sec},
		{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * sec},
		{Value: 3 * sec, Kind: KindGCRA},
		{Allowed: false, Limit: 1, RetryAfter: sec, ResetAfter: sec},
		{Value: 1},
		{Value: 0},
		{Allowed: true, Limit: 3, Remaining: 0, ResetAfter: 3 * sec},
		{Allowed: false, Limit: 3, Remaining: 0, RetryAfter: sec, ResetAfter: 3 * sec},
	}
	res := make([]Result, len(reqs)+3) // longer than reqs is allowed
	if err := e.Do(context.Background(), t0, reqs, res); err != nil {
		t.Fatal(err)
	}
	for i := range want {
		if res[i] != want[i] {
			t.Errorf("result %d:\n got %+v\nwant %+v", i, res[i], want[i])
		}
	}
	for i := len(reqs); i < len(res); i++ {
		if res[i] != (Result{}) {
			t.Errorf("result %d beyond the requests was written: %+v", i, res[i])
		}
	}
}

// TestConcurrentDoOneKey has many goroutines race for one bucket at a
// fixed instant with a refill rate near zero: exactly capacity calls win.
func TestConcurrentDoOneKey(t *testing.T) {
	const (
		capacity   = 1000
		goroutines = 64
		calls      = 40 // per goroutine; 2560 in all
	)
	for _, tc := range []struct {
		shards, batch int
	}{{1, 1}, {4, 1}, {4, 5}} {
		t.Run(fmt.Sprintf("shards=%d/batch=%d", tc.shards, tc.batch), func(t *testing.T) {
			e := newEngine(t, tc.shards)
			var wg sync.WaitGroup
			allowed := make([]int, goroutines)
			errs := make(chan error, goroutines)
			for g := range goroutines {
				wg.Go(func() {
					reqs := make([]Request, tc.batch)
					res := make([]Result, tc.batch)
					for i := range reqs {
						reqs[i] = bucket(t, "hot", capacity, 1e-6, 1)
					}
					for range calls / tc.batch {
						if err := e.Do(context.Background(), t0, reqs, res); err != nil {
							errs <- err
							return
						}
						for _, r := range res {
							if r.Allowed {
								allowed[g]++
							}
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			total := 0
			for _, n := range allowed {
				total += n
			}
			if total != capacity {
				t.Fatalf("%d calls allowed in total, want exactly %d", total, capacity)
			}
			if got := do1(t, e, t0, bucket(t, "hot", capacity, 1e-6, 1)); got.Allowed || got.Remaining != 0 || got.RetryAfter != 1e15 {
				t.Fatalf("after the race: %+v, want denied with retry 1e15 ns", got)
			}
		})
	}
}

// blockShard parks shard i's goroutine until the returned function is
// called, so tests can control when queued work runs.
func blockShard(t *testing.T, e *Engine, i int) (release func()) {
	t.Helper()
	gate := make(chan struct{})
	running := make(chan struct{})
	done := make(chan struct{}, 1)
	e.shards[i].ch <- job{fn: func(*shard) { close(running); <-gate }, done: done}
	<-running
	var once sync.Once
	release = func() {
		once.Do(func() {
			close(gate)
			<-done
		})
	}
	t.Cleanup(release)
	return release
}

// waitQueued polls (without sleeping) until shard i has n jobs queued.
func waitQueued(t *testing.T, e *Engine, i, n int) {
	t.Helper()
	for spins := 0; len(e.shards[i].ch) < n; spins++ {
		if spins > 1e8 {
			t.Fatalf("shard %d never reached %d queued jobs", i, n)
		}
		runtime.Gosched()
	}
}

// drain waits until every shard has processed everything queued before it.
func drain(t *testing.T, e *Engine) {
	t.Helper()
	if err := e.onEach(context.Background(), func(int, *shard) {}); err != nil {
		t.Fatal(err)
	}
}

// TestDoCancelledWhileWaiting cancels the context after Do has enqueued
// its batch: the batch is applied whole, Do waits for it and returns nil,
// so the shards never touch the caller's buffers after Do returns.
func TestDoCancelledWhileWaiting(t *testing.T) {
	e := newEngine(t, 1)
	release := blockShard(t, e, 0)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	res := make([]Result, 1)
	go func() {
		reqs := []Request{bucket(t, "k", 1, 1, 1)}
		errc <- e.Do(ctx, t0, reqs, res)
	}()
	waitQueued(t, e, 0, 1)
	cancel()
	select {
	case err := <-errc:
		t.Fatalf("Do returned %v while its batch was still queued", err)
	default:
	}
	release()
	if err := <-errc; err != nil {
		t.Fatalf("Do = %v, want nil: an enqueued batch is applied whole", err)
	}
	if !res[0].Allowed {
		t.Fatalf("result = %+v, want allowed", res[0])
	}
	if got := do1(t, e, t0, bucket(t, "j", 2, 1, 1)); got != (Result{Allowed: true, Limit: 2, Remaining: 1, ResetAfter: sec}) {
		t.Fatalf("Do after a cancelled call = %+v", got)
	}
	if n := length(t, e, t0); n != 2 {
		t.Fatalf("Len = %d, want 2", n)
	}
}

// TestDoCancelledWhileQueueFull cancels a Do that cannot enqueue: it returns
// ctx.Err(), applies nothing, and the engine keeps working.
func TestDoCancelledWhileQueueFull(t *testing.T) {
	e := newEngine(t, 1)
	release := blockShard(t, e, 0)
	done := make(chan struct{}, cap(e.shards[0].ch))
	for range cap(e.shards[0].ch) {
		e.shards[0].ch <- job{fn: func(*shard) {}, done: done}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := e.Do(ctx, t0, []Request{bucket(t, "k", 1, 1, 1)}, make([]Result, 1))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Do = %v, want context.Canceled", err)
	}
	if _, err := e.Len(ctx, t0); !errors.Is(err, context.Canceled) {
		t.Fatalf("Len = %v, want context.Canceled", err)
	}
	release()
	drain(t, e)
	if exists(t, e, t0, "k") {
		t.Fatal("a Do that returned before enqueueing created its key")
	}
	if got := do1(t, e, t0, bucket(t, "k", 1, 1, 1)); !got.Allowed {
		t.Fatalf("Do after cancellation = %+v, want allowed", got)
	}
}

// TestBugDoWithCancelledContextMayApplyAndReturnNil pins a fixed bug in
// engine.go (Do, the enqueue select): with an already-cancelled context
// and an idle shard, both select cases are ready and Go picks one at
// random, so Do sometimes enqueues the batch, applies it, and even returns
// nil. A cancelled call must return ctx.Err() and take no tokens; checking
// ctx.Err() before enqueueing fixes it.
func TestBugDoWithCancelledContextMayApplyAndReturnNil(t *testing.T) {
	e := newEngine(t, 1)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	var returnedNil, applied int
	const tries = 200
	for i := range tries {
		key := fmt.Sprintf("k%d", i)
		err := e.Do(ctx, t0, []Request{bucket(t, key, 1, 1, 1)}, make([]Result, 1))
		if err == nil {
			returnedNil++
		} else if !errors.Is(err, context.Canceled) {
			t.Fatalf("Do = %v", err)
		}
		drain(t, e)
		if exists(t, e, t0, key) {
			applied++
		}
	}
	if returnedNil != 0 || applied != 0 {
		t.Errorf("of %d Do calls with a cancelled context, %d returned nil and %d took a token; want 0 and 0", tries, returnedNil, applied)
	}
}

// TestBugDoUsesCallerBuffersAfterCancelledReturn pins a fixed bug in engine.go
// (Do, the `case <-ctx.Done(): return ctx.Err()` in the wait loop): when
// the context ends while a shard still has the batch queued, Do returns
// but the shard later reads reqs (and the Key bytes, which the Request
// contract lets alias the caller's buffer "until Do returns") and writes
// res. A caller that reuses its buffers after Do returns (the server reuses
// the connection's read buffer) gets its results overwritten and a decision
// applied to whatever bytes the buffer holds by then: here a key the
// caller never sent is created. Do must not return while a shard may still
// touch reqs or res (wait for sent jobs, or copy what the shards need).
func TestBugDoUsesCallerBuffersAfterCancelledReturn(t *testing.T) {
	e := newEngine(t, 1)
	release := blockShard(t, e, 0)
	keyBuf := []byte("victim")
	reqs := []Request{bucket(t, "", 1, 1, 1)}
	reqs[0].Key = keyBuf
	res := make([]Result, 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- e.Do(ctx, t0, reqs, res) }()
	waitQueued(t, e, 0, 1)
	cancel()
	release()
	if err := <-errc; err != nil {
		t.Fatalf("Do = %v, want nil once its batch was enqueued", err)
	}
	// Do has returned: the caller owns its buffers again and reuses them.
	copy(keyBuf, "intrud")
	res[0] = Result{Value: 42}
	drain(t, e)
	if res[0] != (Result{Value: 42}) {
		t.Errorf("res was written after Do returned: %+v", res[0])
	}
	if exists(t, e, t0, "intrud") {
		t.Errorf("a key the caller never sent (%q) was created from its reused buffer", "intrud")
	}
}

// TestBugLenSweepRaceWithShardsAfterCancel pins a fixed data race in engine.go
// (Len and Sweep, with onEach's `case <-ctx.Done(): return ctx.Err()`):
// when the context ends, onEach returns while jobs it already queued are
// still to run, and Len/Sweep then read counts (ex, dr) that those shard
// goroutines write with no synchronisation. Only the race detector sees it
// (the totals are discarded with the error), so this test fails under
// -race only. cluster/node.go's sweeper calls Sweep with a context that is
// cancelled on Close. onEach must not return while a queued fn may run.
func TestBugLenSweepRaceWithShardsAfterCancel(t *testing.T) {
	e := newEngine(t, 8)
	for i := range 100 {
		do1(t, e, t0, bucket(t, fmt.Sprintf("k%d", i), 5, 1, 1))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	for range 50 {
		_, _ = e.Len(ctx, t0)
		_, _, _ = e.Sweep(ctx, t0, 10)
	}
	drain(t, e)
}

// refModel is a sequential reference for the engine, written differently
// from it: each key keeps a debt (ns of refill still owed before the bucket
// is full) and the instant it was recorded, instead of a TAT. Each shard
// has its own clock that never goes backwards, as in the engine.
type refModel struct {
	shards int
	clock  []int64
	keys   map[string]refState
}

type refState struct{ debt, at int64 }

func newRefModel(shards int) *refModel {
	return &refModel{shards: shards, clock: make([]int64, shards), keys: map[string]refState{}}
}

func (m *refModel) tick(si int, now int64) int64 {
	now = min(now, MaxNow)
	m.clock[si] = max(m.clock[si], now)
	return m.clock[si]
}

func (m *refModel) tickAll(now int64) {
	for si := range m.clock {
		m.tick(si, now)
	}
}

// debt is the refill still owed on key at now; 0 means full (or missing).
// A key is kept until its bucket is full, rounded up to a whole
// millisecond (as Redis's GCRA sets PXAT); live reports it is held.
func (m *refModel) debt(key string, now int64) (d int64, live bool) {
	s, ok := m.keys[key]
	if !ok {
		return 0, false
	}
	if now >= ceilMilli(s.at+s.debt) {
		delete(m.keys, key)
		return 0, false
	}
	return max(s.debt-(now-s.at), 0), true
}

// refInterval is T = round(1e9/rate) ns, at least 1, per DESIGN.md.
func refInterval(ratePerSec float64) int64 {
	// Exact rational arithmetic: the nearest integer when the quotient is
	// within 1e-12 (relative) of it, else ceil(1e9/rate).
	q := new(big.Rat).Quo(big.NewRat(1e9, 1), new(big.Rat).SetFloat64(ratePerSec))
	floor := new(big.Int).Quo(q.Num(), q.Denom())
	lo := new(big.Rat).SetInt(floor)
	hi := new(big.Rat).Add(lo, big.NewRat(1, 1))
	tol := new(big.Rat).Mul(q, big.NewRat(1, 1e12))
	n := floor.Int64()
	dlo := new(big.Rat).Sub(q, lo)
	dhi := new(big.Rat).Sub(hi, q)
	switch {
	case dlo.Sign() == 0:
	case dlo.Cmp(dhi) <= 0 && dlo.Cmp(tol) <= 0:
		// nearest integer is floor, within tolerance
	default:
		n++ // ceil (which is also the nearest when within tolerance above)
	}
	return max(n, 1)
}

// refOp is one operation of a trace: a token bucket call or a key op.
type refOp struct {
	op       Op
	key      string
	capacity int64
	rate     float64
	cost     int64
	readOnly bool
}

func (m *refModel) apply(now int64, o refOp) Result {
	si := 0
	if m.shards > 1 {
		si = ShardOf([]byte(o.key), m.shards)
	}
	now = m.tick(si, now)
	d, live := m.debt(o.key, now)
	switch o.op {
	case OpDel:
		if live {
			delete(m.keys, o.key)
			return Result{Value: 1}
		}
		return Result{}
	case OpExists:
		if live {
			return Result{Value: 1}
		}
		return Result{}
	case OpTTL:
		if live {
			return Result{Value: max(d, 1), Kind: KindGCRA}
		}
		return Result{Value: -2}
	}
	T := refInterval(o.rate)
	full := o.capacity * T // tokens are counted in ns of refill
	avail := full - d      // negative after shrinking a live bucket
	whole := func(a int64) int64 {
		if a <= 0 {
			return 0
		}
		return a / T
	}
	r := Result{Limit: o.capacity}
	switch {
	case o.cost > o.capacity:
		r.RetryAfter, r.ResetAfter, r.Remaining = -1, d, whole(avail)
	case o.cost*T > avail:
		r.RetryAfter, r.ResetAfter, r.Remaining = o.cost*T-avail, d, whole(avail)
	default:
		r.Allowed = true
		r.ResetAfter, r.Remaining = d+o.cost*T, whole(avail-o.cost*T)
		if !o.readOnly && o.cost > 0 {
			m.keys[o.key] = refState{debt: d + o.cost*T, at: now}
		}
	}
	return r
}

func (m *refModel) len(now int64) int {
	m.tickAll(now)
	n := 0
	for k := range m.keys {
		si := 0
		if m.shards > 1 {
			si = ShardOf([]byte(k), m.shards)
		}
		if _, live := m.debt(k, m.clock[si]); live {
			n++
		}
	}
	return n
}

func (o refOp) request(t testing.TB) Request {
	if o.op != OpGCRA {
		return keyReq(o.op, o.key)
	}
	r := bucket(t, o.key, o.capacity, o.rate, o.cost)
	if r.Interval != refInterval(o.rate) {
		t.Fatalf("TokenBucket rate %v: interval %d, want %d", o.rate, r.Interval, refInterval(o.rate))
	}
	if o.readOnly {
		r.ReadOnly = true
	}
	return r
}

// TestEngineMatchesReferenceModel feeds long random traces through Engine.Do
// in random batch sizes and compares every Result with the reference model:
// many keys, random costs, time steps that include going backwards, and
// capacity and rate changes on live keys.
func TestEngineMatchesReferenceModel(t *testing.T) {
	capacities := []int64{1, 2, 3, 5, 10, 64, 1000}
	rates := []float64{0.001, 0.5, 1, 3, 7.5, 333.3, 1000, 1e6, 7e8, 1e9}
	steps := 200000
	if testing.Short() {
		steps = 5000
	}
	for _, shards := range []int{1, 2, 5, 16} {
		for seed := uint64(1); seed <= 2; seed++ {
			t.Run(fmt.Sprintf("shards=%d/seed=%d", shards, seed), func(t *testing.T) {
				rng := rand.New(rand.NewPCG(seed, uint64(shards)))
				e := newEngine(t, shards)
				m := newRefModel(shards)
				type cfg struct {
					capacity int64
					rate     float64
				}
				keys := make([]string, 60)
				cfgs := make([]cfg, len(keys))
				for i := range keys {
					keys[i] = fmt.Sprintf("user:%d", i)
					cfgs[i] = cfg{capacities[rng.IntN(len(capacities))], rates[rng.IntN(len(rates))]}
				}
				now := t0
				seen := map[string]int{}
				var ops []refOp
				var reqs []Request
				res := make([]Result, 64)
				for done := 0; done < steps; {
					// Advance (or rewind) the clock once per batch.
					switch p := rng.IntN(100); {
					case p < 25: // same instant
					case p < 45:
						now += 1 + rng.Int64N(1000)
					case p < 70:
						now += rng.Int64N(sec)
					case p < 82:
						now += rng.Int64N(10 * sec)
					case p < 95:
						now -= rng.Int64N(2 * sec) // backwards
					default:
						now += rng.Int64N(3600 * sec)
					}
					switch p := rng.IntN(200); {
					case p == 0:
						if err := e.Flush(context.Background()); err != nil {
							t.Fatal(err)
						}
						m.keys = map[string]refState{}
					case p < 5:
						got, err := e.Len(context.Background(), now)
						if want := m.len(now); err != nil || got != want {
							t.Fatalf("step %d: Len = %d, %v; want %d", done, got, err, want)
						}
					case p < 10:
						if _, _, err := e.Sweep(context.Background(), now, 1+rng.IntN(20)); err != nil {
							t.Fatal(err)
						}
						m.tickAll(now)
					}
					n := 1 + rng.IntN(len(res))
					ops, reqs = ops[:0], reqs[:0]
					for range n {
						ki := rng.IntN(len(keys))
						if rng.IntN(50) == 0 { // reconfigure a (possibly live) key
							cfgs[ki] = cfg{capacities[rng.IntN(len(capacities))], rates[rng.IntN(len(rates))]}
						}
						o := refOp{op: OpGCRA, key: keys[ki], capacity: cfgs[ki].capacity, rate: cfgs[ki].rate}
						switch p := rng.IntN(100); {
						case p < 5:
							o.op = OpDel
						case p < 10:
							o.op = OpExists
						case p < 17:
							o.op = OpTTL
						case p < 25:
							o.readOnly = true
							o.cost = rng.Int64N(o.capacity + 2)
						case p < 35:
							o.cost = 0
						case p < 70:
							o.cost = 1
						case p < 97:
							o.cost = rng.Int64N(o.capacity + 2)
						default:
							o.cost = 1 << (30 + rng.IntN(33)) // far above capacity
						}
						ops = append(ops, o)
						reqs = append(reqs, o.request(t))
					}
					if err := e.Do(context.Background(), now, reqs, res); err != nil {
						t.Fatal(err)
					}
					for i, o := range ops {
						want := m.apply(now, o)
						if res[i] != want {
							t.Fatalf("step %d (t0%+d ns, batch of %d, #%d) %+v:\n got %+v\nwant %+v", done+i, now-t0, n, i, o, res[i], want)
						}
						seen[outcome(o, want)]++
					}
					done += n
				}
				// The trace must reach every kind of outcome, or it proves little.
				for _, k := range []string{"allowed", "denied", "never", "overdrawn", "peek", "ttl live", "ttl missing", "del hit", "del miss"} {
					if seen[k] == 0 {
						t.Errorf("the trace never produced a %q outcome: %v", k, seen)
					}
				}
				t.Logf("outcomes: %v", seen)
				// Final state: every key's TTL and the live count agree.
				for _, k := range keys {
					if got, want := do1(t, e, now, keyReq(OpTTL, k)), m.apply(now, refOp{op: OpTTL, key: k}); got != want {
						t.Errorf("final TTL %s = %+v, want %+v", k, got, want)
					}
				}
				if got, want := length(t, e, now), m.len(now); got != want {
					t.Errorf("final Len = %d, want %d", got, want)
				}
			})
		}
	}
}

// outcome classifies a model result, to check a trace's coverage.
func outcome(o refOp, r Result) string {
	switch {
	case o.op == OpTTL && r.Value >= 0:
		return "ttl live"
	case o.op == OpTTL:
		return "ttl missing"
	case o.op == OpDel && r.Value == 1:
		return "del hit"
	case o.op == OpDel:
		return "del miss"
	case o.op == OpExists:
		return "exists"
	case o.readOnly || o.cost == 0:
		return "peek"
	case r.RetryAfter == -1:
		return "never"
	case !r.Allowed && r.ResetAfter > o.capacity*refInterval(o.rate):
		return "overdrawn" // owes more than tau after a reconfiguration
	case !r.Allowed:
		return "denied"
	default:
		return "allowed"
	}
}

// TestNoAllocsOnExistingKey: deciding on a live key allocates nothing,
// in the shard and through Engine.Do (the batch scratch space is pooled).
func TestNoAllocsOnExistingKey(t *testing.T) {
	s := newShard(1)
	r := bucket(t, "user:1", 1e9, 1, 1) // stays live: each call owes 1s more
	var out Result
	now := t0
	s.advance(now)
	s.apply(&r, &out)
	if n := testing.AllocsPerRun(1000, func() {
		now++
		s.advance(now)
		s.apply(&r, &out)
	}); n != 0 {
		t.Errorf("shard apply on an existing key: %v allocs, want 0", n)
	}
}

// TestChanges: the change counter that tells a snapshot saver whether
// anything is new counts writes only.
func TestChanges(t *testing.T) {
	e := newEngine(t, 4)
	const t0 = int64(1e18)
	want := uint64(0)
	check := func(step string) {
		t.Helper()
		if got := e.Changes(); got != want {
			t.Errorf("%s: Changes = %d, want %d", step, got, want)
		}
	}
	check("new engine")
	do1(t, e, t0, bucket(t, "a", 2, 1, 1))
	want++
	check("allowed")
	do1(t, e, t0, bucket(t, "a", 2, 1, 1))
	want++
	do1(t, e, t0, bucket(t, "a", 2, 1, 1)) // denied: nothing stored
	check("denied")
	do1(t, e, t0, peekReq(t, "a", 2, 1, 1))
	do1(t, e, t0, bucket(t, "a", 2, 1, 0))
	exists(t, e, t0, "a")
	ttl(t, e, t0, "a")
	check("reads")
	do1(t, e, t0, keyReq(OpDel, "a"))
	want++
	do1(t, e, t0, keyReq(OpDel, "a")) // missing: nothing removed
	check("deleted")
	do1(t, e, t0, bucket(t, "b", 1, 1, 1))
	want++
	// b is full again after 1 s: dropping it is invisible.
	if exists(t, e, t0+2e9, "b") {
		t.Fatal("b still exists")
	}
	check("expired")
	do1(t, e, t0+2e9, bucket(t, "c", 1, 1, 1))
	want++
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	want++ // one non-empty shard
	check("flushed")
	if err := e.Import(context.Background(), t0+2e9, []Record{{Key: "d", Kind: KindGCRA, Fields: []int64{t0 + 5e9}}}); err != nil {
		t.Fatal(err)
	}
	want++
	check("imported")
}

func TestShardOfHashTags(t *testing.T) {
	const n = 64
	same := func(a, b string) bool { return ShardOf([]byte(a), n) == ShardOf([]byte(b), n) }
	for _, k := range []string{"{user42}:login", "{user42}:api", "x{user42}y", "{user42}{other}"} {
		if !same(k, "user42") {
			t.Errorf("%q is not on the shard of user42", k)
		}
	}
	if !same("{a}{b}", "a") {
		t.Error("{a}{b} is not placed by a")
	}
	// No tag (empty braces, no closing brace): the whole key is hashed.
	for _, k := range []string{"{}x", "x{", "}x{"} {
		h := uint64(14695981039346656037)
		for _, c := range []byte(k) {
			h ^= uint64(c)
			h *= 1099511628211
		}
		if got, want := ShardOf([]byte(k), n), int(h%n); got != want {
			t.Errorf("ShardOf(%q) = %d, want %d (the whole key hashed)", k, got, want)
		}
	}
	// Tags spread over the shards like keys do.
	seen := map[int]bool{}
	for i := range 1000 {
		seen[ShardOf(fmt.Appendf(nil, "{u%d}:login", i), n)] = true
	}
	if len(seen) < n/2 {
		t.Errorf("1000 tags use only %d of %d shards", len(seen), n)
	}
}

// TestSweepWave checks when SweepWave sweeps again: while more than a
// quarter of the keys examined had expired, at most SweepRounds times,
// with now read once per sweep.
func TestSweepWave(t *testing.T) {
	e := newEngine(t, 4)
	ctx := context.Background()
	const keys = 1000 // about 250 per shard: more than SweepRounds each
	reqs := make([]Request, keys)
	for i := range reqs {
		reqs[i] = bucket(t, fmt.Sprintf("k:%d", i), 10, 1, 1) // TTL 1s
	}
	if err := e.Do(ctx, t0, reqs, make([]Result, keys)); err != nil {
		t.Fatal(err)
	}
	calls := 0
	at := func(ns int64) func() int64 {
		return func() int64 { calls++; return ns }
	}

	// Nothing expired: one sweep.
	if dr := e.SweepWave(ctx, at(t0+sec-1), 1); dr != 0 || calls != 1 {
		t.Fatalf("before expiry: dropped %d in %d sweeps, want 0 in 1", dr, calls)
	}
	// Every key expired, budget 1 per shard: each sweep drops one key per
	// shard, and the wave stops after SweepRounds sweeps.
	calls = 0
	if dr := e.SweepWave(ctx, at(t0+5*sec), 1); dr != SweepRounds*e.Shards() || calls != SweepRounds {
		t.Fatalf("expiry wave: dropped %d in %d sweeps, want %d in %d", dr, calls, SweepRounds*e.Shards(), SweepRounds)
	}
	// A large budget drops the rest, then a sweep that drops nothing ends
	// the wave.
	calls = 0
	if dr := e.SweepWave(ctx, at(t0+5*sec), 1<<20); dr != keys-SweepRounds*e.Shards() || calls != 2 {
		t.Fatalf("rest: dropped %d in %d sweeps, want %d in 2", dr, calls, keys-SweepRounds*e.Shards())
	}
}
