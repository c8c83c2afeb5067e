package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
)

var (
	sinkResult Result
	sinkTat    int64
)

// BenchmarkGCRA is the pure decision: one allowed call per op on a bucket
// that refills exactly as fast as it is drained.
func BenchmarkGCRA(b *testing.B) {
	r, err := TokenBucket([]byte("k"), 100, 1e9, 1) // T = 1 ns
	if err != nil {
		b.Fatal(err)
	}
	var out Result
	tat, now := int64(0), t0
	b.ReportAllocs()
	for b.Loop() {
		now++
		tat, _ = gcra(now, tat, &r, &out)
	}
	sinkResult, sinkTat = out, tat
}

// BenchmarkShardApplyExisting is one RL.ALLOW on an existing key through
// the shard (index lookup, decision, in-place TAT update), without the
// goroutine hand-off. It must not allocate.
func BenchmarkShardApplyExisting(b *testing.B) {
	s := newShard(1)
	// 1e9 tokens at 1/s: each call owes 1s more, so the key stays live
	// (a bucket refilled as fast as it drains is full, hence dropped and
	// re-created, at every call) and is allowed for 1e9 calls.
	r, err := TokenBucket([]byte("user:12345"), 1e9, 1, 1)
	if err != nil {
		b.Fatal(err)
	}
	var out Result
	now := t0
	s.advance(now)
	s.apply(&r, &out) // create the key
	b.ReportAllocs()
	for b.Loop() {
		now++
		s.advance(now)
		s.apply(&r, &out)
	}
	if !out.Allowed || s.tab.live != 1 {
		b.Fatalf("last call %+v, %d keys", out, s.tab.live)
	}
	sinkResult = out
}

// BenchmarkDo is Engine.Do with batches of random keys from a pool of
// 100,000 existing keys, over one shard per CPU. ns/decision divides the
// time per Do by the batch size.
func BenchmarkDo(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchDo(b, batch, false)
		})
	}
}

// BenchmarkDoParallel is BenchmarkDo with one caller per CPU, as when
// many connections send pipelines at once.
func BenchmarkDoParallel(b *testing.B) {
	for _, batch := range []int{1, 32} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			benchDo(b, batch, true)
		})
	}
}

func benchDo(b *testing.B, batch int, parallel bool) {
	const pool = 100_000
	e := New(runtime.GOMAXPROCS(0))
	defer e.Close()
	ctx := context.Background()
	// capacity 1e9 at 1 token/s: no key is ever denied or expires here.
	reqs := make([]Request, pool)
	for i := range reqs {
		r, err := TokenBucket([]byte("user:"+strconv.Itoa(i)), 1e9, 1, 1)
		if err != nil {
			b.Fatal(err)
		}
		reqs[i] = r
	}
	res := make([]Result, pool)
	for i := 0; i < pool; i += 1000 { // create every key first
		if err := e.Do(ctx, t0, reqs[i:i+1000], res[i:i+1000]); err != nil {
			b.Fatal(err)
		}
	}
	// A fixed random order of keys, so runs are comparable.
	order := make([]int32, 1<<16)
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range order {
		order[i] = int32(rng.IntN(pool))
	}
	run := func(seed int, next func() bool) {
		rb := make([]Request, batch)
		rr := make([]Result, batch)
		pos := seed * 7919
		now := t0
		// The keys are copied into one buffer per batch, as a server's
		// read buffer holds a pipeline's keys: the key bytes a lookup
		// compares against are in the cache, the table's are not.
		wire := make([]byte, 0, 64*batch)
		for next() {
			wire = wire[:0]
			for i := range rb {
				rb[i] = reqs[order[pos&(len(order)-1)]]
				at := len(wire)
				wire = append(wire, rb[i].Key...)
				rb[i].Key = wire[at:len(wire):len(wire)]
				pos++
			}
			now += 1000
			if err := e.Do(ctx, now, rb, rr); err != nil {
				panic(err)
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	if parallel {
		var seed atomic.Int64
		b.RunParallel(func(pb *testing.PB) {
			run(int(seed.Add(1)), pb.Next)
		})
	} else {
		run(0, b.Loop)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(batch), "ns/decision")
}

// BenchmarkFill1M creates 1,000,000 keys and reports the heap they hold.
func BenchmarkFill1M(b *testing.B) {
	const keys = 1_000_000
	const batch = 1000
	ctx := context.Background()
	b.ReportAllocs()
	var perKey float64
	for b.Loop() {
		b.StopTimer()
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		b.StartTimer()

		e := New(runtime.GOMAXPROCS(0))
		reqs := make([]Request, batch)
		res := make([]Result, batch)
		buf := make([]byte, 0, batch*16)
		for i := 0; i < keys; i += batch {
			buf = buf[:0]
			for j := range reqs {
				start := len(buf)
				buf = append(buf, "user:"...)
				buf = strconv.AppendInt(buf, int64(i+j), 10)
				r, err := TokenBucket(buf[start:len(buf):len(buf)], 10, 1, 1)
				if err != nil {
					b.Fatal(err)
				}
				reqs[j] = r
			}
			if err := e.Do(ctx, t0, reqs, res); err != nil {
				b.Fatal(err)
			}
		}

		b.StopTimer()
		n, err := e.Len(ctx, t0)
		if err != nil || n != keys {
			b.Fatalf("Len = %d, %v; want %d", n, err, keys)
		}
		// reqs, res and buf are dead here, so only the engine's state counts.
		runtime.GC()
		runtime.ReadMemStats(&after)
		perKey = float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / keys
		runtime.KeepAlive(e)
		e.Close()
		b.StartTimer()
	}
	b.ReportMetric(perKey, "bytes/key")
}

// BenchmarkCheck is a 3-tier all-or-nothing check (RL.CHECK's request:
// three Scaled token buckets, Tiers = 3) on a 4-shard engine, with the
// three keys on one shard (the cheap path: one job) and on three shards
// (the caller parks the three shards, in order, and decides on its own
// goroutine), side by side; then the same three requests as a plain
// batch, for scale. checks=1 sends one check per Do; checks=32 a pipeline
// of 32 checks for 32 users per Do (each user's keys on one shard, users
// spread over the shards; or each user's keys on three shards). Every
// call is allowed and charged. ns/check is the time per check.
func BenchmarkCheck(b *testing.B) {
	const shards = 4
	for _, c := range []struct {
		name   string
		checks int
		cross  bool
		group  bool
	}{
		{"checks=1/tiers=3/one-shard", 1, false, true},
		{"checks=1/tiers=3/three-shards", 1, true, true},
		{"checks=1/plain=3/one-shard", 1, false, false},
		{"checks=1/plain=3/three-shards", 1, true, false},
		{"checks=32/tiers=3/one-shard", 32, false, true},
		{"checks=32/tiers=3/three-shards", 32, true, true},
		{"checks=32/plain=3/one-shard", 32, false, false},
		{"checks=32/plain=3/three-shards", 32, true, false},
	} {
		b.Run(c.name, func(b *testing.B) {
			e := New(shards)
			defer e.Close()
			var reqs []Request
			for u := range c.checks {
				for i := range 3 {
					si := (u + 1) % shards // the user's shard
					if c.cross {
						si = (u + i) % shards
					}
					// capacity 1e9 at 1/s: never denied within the benchmark.
					r, err := TokenBucket([]byte(keyOn(shards, si, fmt.Sprintf("user%d:tier%d:", u, i))), 1e9, 1, 1)
					if err != nil {
						b.Fatal(err)
					}
					r.Scaled = true
					if c.group && i == 0 {
						r.Tiers = 3
					}
					reqs = append(reqs, r)
				}
			}
			res := make([]Result, len(reqs))
			ctx := context.Background()
			now := t0
			b.ReportAllocs()
			for b.Loop() {
				now++
				if err := e.Do(ctx, now, reqs, res); err != nil {
					b.Fatal(err)
				}
			}
			for i := range res {
				if !res[i].Allowed {
					b.Fatalf("request %d: %+v", i, res[i])
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(c.checks), "ns/check")
		})
	}
}
