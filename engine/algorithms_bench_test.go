package engine_test

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// algBenchKeys is the key count of the algorithm benchmarks: the figures
// are for a server holding a million keys.
const algBenchKeys = 1_000_000

// algBenchKind is one algorithm as a benchmark drives it: a request for a
// key with cost 1, given calls times to every key before measuring (0.9 ms
// of engine time apart).
type algBenchKind struct {
	name  string
	build func(key []byte) engine.Request
	calls int
}

// algBenchKinds are the throughput configurations. The benchmark revisits
// each key about every 1 ms of engine time; limits are high so most calls
// are allowed, and intervals (10 ms) and windows long enough that every key
// stays live: no call re-creates an expired key. The log's 10 ms window
// holds about 10 entries per key, so each call drops one and adds one; the
// warm-up calls let its ring reach that size first.
var algBenchKinds = []algBenchKind{
	{"allow", func(k []byte) engine.Request { return algReq(engine.TokenBucket(k, 1000, 100, 1)) }, 1},
	{"throttle", func(k []byte) engine.Request { return algReq(engine.Throttle(k, 999, 100, algSec, 1)) }, 1},
	{"gcra", func(k []byte) engine.Request { return algReq(engine.GCRA(k, 999, 100, 1, 1)) }, 1},
	{"fixed", func(k []byte) engine.Request { return algReq(engine.Fixed(k, 1000, 60_000, 1)) }, 1},
	{"sliding", func(k []byte) engine.Request { return algReq(engine.Sliding(k, 1000, 60_000, 1)) }, 1},
	{"log", func(k []byte) engine.Request { return algReq(engine.Log(k, 100, 10, 1)) }, 12},
	{"shape", func(k []byte) engine.Request { return algReq(engine.Shape(k, 1000, 100, 1)) }, 1},
}

// algMemKinds are the memory configurations: every key holds the state
// one call (log-10: ten calls) leaves.
var algMemKinds = []algBenchKind{
	algBenchKinds[0], algBenchKinds[1], algBenchKinds[2], algBenchKinds[3], algBenchKinds[4],
	{"log", func(k []byte) engine.Request { return algReq(engine.Log(k, 100, 60_000, 1)) }, 1},
	{"log-10", func(k []byte) engine.Request { return algReq(engine.Log(k, 10, 60_000, 1)) }, 10},
	algBenchKinds[6],
}

func algBenchKey(buf []byte, i int) []byte {
	return fmt.Appendf(buf[:0], "user:%07d", i)
}

// algBenchState is an engine filled with algBenchKeys keys of one kind,
// kept across the benchmark's runs so it is built once.
type algBenchState struct {
	e    *engine.Engine
	keys [][]byte
	now  int64
}

var (
	algBenchMu     sync.Mutex
	algBenchStates = map[string]*algBenchState{}
)

func algBenchEngine(b *testing.B, k algBenchKind) *algBenchState {
	algBenchMu.Lock()
	defer algBenchMu.Unlock()
	if st := algBenchStates[k.name]; st != nil {
		return st
	}
	st := &algBenchState{e: engine.New(runtime.GOMAXPROCS(0)), keys: make([][]byte, algBenchKeys), now: algT0}
	for i := range st.keys {
		st.keys[i] = algBenchKey(nil, i)
	}
	reqs := make([]engine.Request, 1000)
	res := make([]engine.Result, len(reqs))
	for range k.calls {
		st.now += 900 * algMs / 1000
		for i := 0; i < algBenchKeys; i += len(reqs) {
			for j := range reqs {
				reqs[j] = k.build(st.keys[i+j])
			}
			if err := st.e.Do(context.Background(), st.now, reqs, res); err != nil {
				b.Fatal(err)
			}
		}
	}
	algBenchStates[k.name] = st
	return st
}

// BenchmarkAlgorithms measures one call on an existing key per algorithm.
// keys=1M visits a million keys in a scattered order (mostly cache misses,
// as on a loaded server); keys=1k revisits a thousand, so the figure is
// the algorithm and the batching. batch=1 is one Do per call (the shard
// hand-off dominates), batch=256 a pipeline of 256 calls on distinct keys
// per Do. ns/op and allocs/op are per call.
func BenchmarkAlgorithms(b *testing.B) {
	for _, k := range algBenchKinds {
		for _, bc := range []struct{ keys, batch int }{{algBenchKeys, 1}, {algBenchKeys, 256}, {1024, 256}} {
			name := fmt.Sprintf("%s/keys=1M/batch=%d", k.name, bc.batch)
			if bc.keys != algBenchKeys {
				name = fmt.Sprintf("%s/keys=1k/batch=%d", k.name, bc.batch)
			}
			batch := bc.batch
			b.Run(name, func(b *testing.B) {
				st := algBenchEngine(b, k)
				reqs := make([]engine.Request, batch)
				res := make([]engine.Result, batch)
				for j := range reqs {
					reqs[j] = k.build(nil)
				}
				const stride = 7_919_993 // coprime with both key counts: visits every key
				idx := 0
				keys := bc.keys
				ctx := context.Background()
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i += batch {
					for j := range reqs {
						idx = (idx + stride) % keys
						reqs[j].Key = st.keys[idx]
					}
					// 1 ns per call: a key is revisited every ~1 ms.
					st.now += int64(batch)
					if err := st.e.Do(ctx, st.now, reqs, res); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
	}
}

// BenchmarkAlgBytesPerKey measures the heap held per key with a million
// keys of one kind (each given calls calls at one instant), map entry, key
// bytes and state included. Run it with -benchtime=1x.
func BenchmarkAlgBytesPerKey(b *testing.B) {
	for _, k := range algMemKinds {
		b.Run(k.name, func(b *testing.B) {
			for range b.N {
				b.ReportMetric(algHeapPerKey(b, k), "bytes/key")
			}
		})
	}
}

func algHeapPerKey(b *testing.B, k algBenchKind) float64 {
	reqs := make([]engine.Request, 1000)
	res := make([]engine.Result, len(reqs))
	bufs := make([][]byte, len(reqs))
	for j := range bufs {
		bufs[j] = make([]byte, 0, 16)
	}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&before)
	e := engine.New(runtime.GOMAXPROCS(0))
	for c := range k.calls {
		for i := 0; i < algBenchKeys; i += len(reqs) {
			for j := range reqs {
				bufs[j] = algBenchKey(bufs[j], i+j)
				reqs[j] = k.build(bufs[j])
			}
			if err := e.Do(context.Background(), algT0+int64(c), reqs, res); err != nil {
				b.Fatal(err)
			}
		}
	}
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if n, _ := e.Len(context.Background(), algT0); n != algBenchKeys {
		b.Fatalf("%d live keys, want %d", n, algBenchKeys)
	}
	e.Close()
	return float64(int64(after.HeapAlloc)-int64(before.HeapAlloc)) / algBenchKeys
}
