package main

import (
	"math"
	"math/bits"
)

// histogram counts non-negative durations in nanoseconds in log-linear
// buckets, like HdrHistogram: values below 2^subBits ns each have their own
// bucket; above that, every power of two [2^k, 2^(k+1)) is split into
// 2^subBits equal buckets, so a bucket is at most 1/2^subBits (0.8%) of its
// values wide. The whole uint64 range fits in a fixed array; a value is
// never clamped. The zero value is empty and ready to use.
type histogram struct {
	counts [histBuckets]uint64
	total  uint64
	max    uint64
}

const (
	subBits     = 7
	subCount    = 1 << subBits
	histBuckets = (65 - subBits) * subCount
)

// bucketOf maps a value to its bucket index. For v >= 2^subBits with
// 2^(n-1) <= v < 2^n, shift = n-1-subBits and top = v>>shift lies in
// [2^subBits, 2^(subBits+1)); the index shift*2^subBits + top continues
// exactly where the previous power of two ended.
func bucketOf(v uint64) int {
	if v < subCount {
		return int(v)
	}
	shift := bits.Len64(v) - 1 - subBits
	return shift<<subBits + int(v>>shift)
}

// bucketHigh is the largest value that maps to bucket i.
func bucketHigh(i int) uint64 {
	if i < subCount {
		return uint64(i)
	}
	shift := i>>subBits - 1
	top := uint64(i - shift<<subBits)
	return (top+1)<<shift - 1
}

// record adds one value; negative values count as 0.
func (h *histogram) record(ns int64) {
	v := uint64(max(ns, 0))
	h.counts[bucketOf(v)]++
	h.total++
	h.max = max(h.max, v)
}

// merge adds every count of o to h.
func (h *histogram) merge(o *histogram) {
	for i, c := range o.counts {
		h.counts[i] += c
	}
	h.total += o.total
	h.max = max(h.max, o.max)
}

// quantile returns the value at quantile q (0 < q <= 1): the smallest
// recorded value v such that at least ceil(q*total) values are <= v, rounded
// up to its bucket's highest value (never above the largest value recorded).
// So the result is never below the exact quantile and at most 0.8% above it.
// An empty histogram returns 0.
func (h *histogram) quantile(q float64) uint64 {
	if h.total == 0 {
		return 0
	}
	rank := uint64(math.Ceil(q * float64(h.total)))
	rank = min(max(rank, 1), h.total)
	var seen uint64
	for i, c := range h.counts {
		seen += c
		if seen >= rank {
			return min(bucketHigh(i), h.max)
		}
	}
	return h.max
}
