package server

import (
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/rlserver/rlserver/status"
)

func TestBucketOf(t *testing.T) {
	for _, c := range []struct {
		ns   int64
		want int
	}{{0, 0}, {1000, 0}, {1001, 1}, {2000, 1}, {2001, 2}, {4000, 2}, {1 << 62, numBuckets}} {
		if got := bucketOf(c.ns); got != c.want {
			t.Errorf("bucketOf(%d) = %d, want %d", c.ns, got, c.want)
		}
		if c.want < numBuckets && float64(c.ns)/1e9 > status.LatencyBuckets[c.want] {
			t.Errorf("%d ns above its bucket's bound %v", c.ns, status.LatencyBuckets[c.want])
		}
	}
}

// addKeys counts keys in the summary, each once.
func addKeys(tk *topKeys, now time.Time, keys ...string) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	w := tk.weight(now)
	for _, k := range keys {
		tk.add([]byte(k), w)
	}
}

func TestTopSpaceSavingFindsHeavyHitters(t *testing.T) {
	var tk topKeys
	t0 := time.Unix(1000, 0)
	// 5000 distinct cold keys once each, interleaved with three hot ones.
	for i := range 5000 {
		batch := []string{fmt.Sprintf("cold%d", i)}
		if i%10 == 0 {
			batch = append(batch, "hot1")
		}
		if i%25 == 0 {
			batch = append(batch, "hot2")
		}
		if i%50 == 0 {
			batch = append(batch, "hot3")
		}
		addKeys(&tk, t0, batch...)
	}
	if len(tk.heap) != topCapacity || len(tk.entries) != topCapacity {
		t.Fatalf("summary holds %d counters, %d keys; want %d", len(tk.heap), len(tk.entries), topCapacity)
	}
	top := tk.top(3, t0)
	want := []struct {
		key string
		n   float64
	}{{"hot1", 500}, {"hot2", 200}, {"hot3", 100}}
	bound := float64(5000+500+200+100) / topCapacity
	for i, w := range want {
		if top[i].Key != w.key || top[i].Denied < w.n || top[i].Denied > w.n+bound || top[i].Denied-top[i].Error > w.n {
			t.Errorf("top[%d] = %+v, want %s with %v (+ at most %.1f)", i, top[i], w.key, w.n, bound)
		}
	}
}

func TestTopDecays(t *testing.T) {
	var tk topKeys
	t0 := time.Unix(1000, 0)
	for range 100 {
		addKeys(&tk, t0, "old")
	}
	later := t0.Add(2 * topHalfLife)
	for range 30 {
		addKeys(&tk, later, "new")
	}
	top := tk.top(10, later)
	if len(top) != 2 || top[0].Key != "new" || math.Abs(top[0].Denied-30) > 1e-9 || math.Abs(top[1].Denied-25) > 1e-9 {
		t.Errorf("after two half-lives: %+v, want new=30 then old=25", top)
	}
	// Far later everything has decayed below half a denial, and the
	// rescaling of the weights keeps the numbers finite.
	far := t0.Add(100 * topHalfLife)
	addKeys(&tk, far, "now")
	top = tk.top(10, far)
	if len(top) != 1 || top[0].Key != "now" || math.Abs(top[0].Denied-1) > 1e-9 {
		t.Errorf("after 100 half-lives: %+v, want only now=1", top)
	}
}

func TestErrorStatsCapsCodes(t *testing.T) {
	var e errorStats
	for i := range maxErrorCodes + 10 {
		e.add(fmt.Sprintf("CODE%d message", i))
	}
	e.add("ERR x")
	if len(e.codes) > maxErrorCodes+1 {
		t.Errorf("%d codes tracked, want at most %d plus OTHER", len(e.codes), maxErrorCodes)
	}
	if e.codes["OTHER"] == nil || e.codes["OTHER"].Load() != 11 {
		t.Errorf("OTHER = %v, want the 11 codes past the cap", e.codes["OTHER"])
	}
}

func TestLocalTopAggregates(t *testing.T) {
	var tk topKeys
	var l localTop
	t0 := time.Unix(1000, 0)
	// 300 distinct keys in batches of 10 within one interval: the local
	// table fills (128 keys) and moves twice; the rest waits for a reader.
	for b := range 30 {
		var buf []byte
		var ends []int
		for i := range 10 {
			buf = append(buf, fmt.Sprintf("k%d", (b*10+i)%300)...)
			ends = append(ends, len(buf))
		}
		buf = append(buf, "hot"...)
		ends = append(ends, len(buf))
		l.addBatch(&tk, buf, ends, t0)
	}
	// Each full move holds "hot" and 127 keys denied once, of which one
	// in 8 is kept (weighing 8).
	if n := len(tk.heap); n != 1+2*127/8 {
		t.Errorf("summary has %d keys after two full moves, want %d", n, 1+2*127/8)
	}
	if e := tk.entries["k7"]; e == nil || e.count != 8 {
		t.Errorf("k7, the 8th singleton, = %+v, want a count of 8", e)
	}
	// A reader's move is exact.
	l.flush(&tk, t0)
	top := tk.top(1, t0)
	if len(tk.heap) != 1+2*127/8+46 || top[0].Key != "hot" || top[0].Denied != 30 {
		t.Errorf("after flush: %d keys, top %+v; want %d keys and hot=30", len(tk.heap), top, 1+2*127/8+46)
	}
	// A later batch, past the interval, moves the table by itself.
	t1 := t0.Add(localTopEvery)
	l.addBatch(&tk, []byte("hot"), []int{3}, t1)
	if got, want := tk.top(1, t1)[0].Denied, 30*math.Exp2(-localTopEvery.Minutes())+1; math.Abs(got-want) > 1e-9 {
		t.Errorf("hot = %v after the interval, want %v", got, want)
	}
}

// BenchmarkPipelineAllowAllowed is BenchmarkPipelineAllow with a rate so
// high that every decision allows: the statistics' cost without denials.
func BenchmarkPipelineAllowAllowed(b *testing.B) {
	benchPipeline(b, 16, 32, 5, func(i int) string {
		return encode("RL.ALLOW", fmt.Sprintf("key:%012d", (i*7919)%100000), "100", "1e9", "1")
	})
}
