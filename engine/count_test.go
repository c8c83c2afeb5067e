package engine

import (
	"context"
	"testing"
)

// CountKinds, a test helper, counts the keys whose state is not empty at
// nowNanos, by kind (index Kind; KindNone stays 0). Scaled token buckets
// and queues (Request.Scaled) count as KindGCRA and KindShape. It walks
// every shard's table on the shard's goroutine, like Len: O(keys).
func (e *Engine) CountKinds(ctx context.Context, nowNanos int64) ([NumKinds]int, error) {
	per := make([][NumKinds]int, len(e.shards))
	err := e.onEach(ctx, func(i int, s *shard) { per[i] = s.countKinds(nowNanos) })
	var total [NumKinds]int
	for _, p := range per {
		for k, n := range p {
			total[k] += n
		}
	}
	return total, err
}

func TestCountKinds(t *testing.T) {
	e := New(3)
	defer e.Close()
	const t0 = int64(1_000_000_000_000)
	var reqs []Request
	for i := range 5 {
		r, err := TokenBucket([]byte{'g', byte(i)}, 10, 1, 1)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	for i := range 2 {
		r, err := Fixed([]byte{'f', byte(i)}, 10, 1000, 1)
		if err != nil {
			t.Fatal(err)
		}
		reqs = append(reqs, r)
	}
	res := make([]Result, len(reqs))
	if err := e.Do(context.Background(), t0, reqs, res); err != nil {
		t.Fatal(err)
	}
	got, err := e.CountKinds(context.Background(), t0)
	if err != nil {
		t.Fatal(err)
	}
	if got[KindGCRA] != 5 || got[KindFixed] != 2 || got[KindNone] != 0 {
		t.Errorf("CountKinds = %v, want 5 gcra and 2 fixed", got)
	}
	// Once every bucket is full again and every window over, nothing is live.
	later := t0 + 100_000_000_000
	if got, _ := e.CountKinds(context.Background(), later); got != [NumKinds]int{} {
		t.Errorf("CountKinds later = %v, want all zero", got)
	}
}
