package main

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestBucketsTile checks that consecutive buckets cover consecutive values
// with no gap or overlap, and that every bucket is at most 1/128 of its
// values wide.
func TestBucketsTile(t *testing.T) {
	var prevHigh uint64
	for i := 1; i < histBuckets; i++ {
		lo, hi := prevHigh+1, bucketHigh(i)
		if bucketOf(lo) != i || bucketOf(hi) != i {
			t.Fatalf("bucket %d = [%d, %d], but bucketOf gives %d and %d", i, lo, hi, bucketOf(lo), bucketOf(hi))
		}
		if width := hi - lo + 1; lo >= subCount && float64(width) > float64(lo)/subCount {
			t.Fatalf("bucket %d = [%d, %d] is wider than 1/%d of its values", i, lo, hi, subCount)
		}
		prevHigh = hi
		if hi == math.MaxUint64 {
			return
		}
	}
	t.Fatalf("buckets end at %d, before the uint64 range does", prevHigh)
}

func TestQuantile(t *testing.T) {
	var h histogram
	if got := h.quantile(0.99); got != 0 {
		t.Fatalf("empty histogram: quantile = %d, want 0", got)
	}

	// Small values are exact: 1..100, each once.
	for v := int64(1); v <= 100; v++ {
		h.record(v)
	}
	for _, tc := range []struct {
		q    float64
		want uint64
	}{{0.01, 1}, {0.5, 50}, {0.99, 99}, {0.999, 100}, {1, 100}, {0, 1}} {
		if got := h.quantile(tc.q); got != tc.want {
			t.Errorf("1..100: quantile(%v) = %d, want %d", tc.q, got, tc.want)
		}
	}

	// Larger values: never below the exact quantile, at most 1/128 above,
	// and never above the largest value recorded.
	rng := rand.New(rand.NewPCG(1, 2))
	var big histogram
	var exact []int64
	for range 100_000 {
		v := int64(rng.ExpFloat64() * 1e6) // around 1 ms, long tail
		big.record(v)
		exact = append(exact, v)
	}
	slices.Sort(exact)
	for _, q := range []float64{0.5, 0.9, 0.99, 0.999, 1} {
		want := exact[int(math.Ceil(q*float64(len(exact))))-1]
		got := int64(big.quantile(q))
		if got < want || float64(got-want) > float64(want)/subCount {
			t.Errorf("quantile(%v) = %d, exact %d: off by more than 1/%d", q, got, want, subCount)
		}
	}
	if got := int64(big.quantile(1)); got != exact[len(exact)-1] {
		t.Errorf("quantile(1) = %d, want the maximum %d", got, exact[len(exact)-1])
	}

	// Merging is the same as recording everything into one.
	var a, b histogram
	for i, v := range exact {
		if i%2 == 0 {
			a.record(v)
		} else {
			b.record(v)
		}
	}
	a.merge(&b)
	if a != big {
		t.Errorf("merge of two halves differs from one histogram of all values")
	}

	// Negative values (a clock step) count as 0.
	var neg histogram
	neg.record(-5)
	if got := neg.quantile(1); got != 0 || neg.total != 1 {
		t.Errorf("record(-5): quantile(1) = %d, total %d; want 0, 1", got, neg.total)
	}
}
