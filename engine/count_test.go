package engine

import (
	"context"
	"testing"
)

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
