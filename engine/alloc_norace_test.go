//go:build !race

package engine

import (
	"context"
	"fmt"
	"testing"
)

// TestDoNoAllocsOnExistingKeys: a batch through Engine.Do on existing keys
// allocates nothing. Built without -race only: the race detector makes
// sync.Pool drop items on purpose, so Do allocates there. `make test` runs
// it in a separate pass without -race.
func TestDoNoAllocsOnExistingKeys(t *testing.T) {
	e := newEngine(t, 4)
	reqs := make([]Request, 32)
	for i := range reqs {
		reqs[i] = bucket(t, fmt.Sprintf("user:%d", i), 1e9, 1, 1)
	}
	if n := doAllocs(t, e, reqs); n != 0 {
		t.Errorf("Do of 32 existing keys: %v allocs, want 0", n)
	}
}

// doAllocs applies reqs once through e (creating their keys), then
// reports the allocations of applying them again, a moment later each
// time.
func doAllocs(t *testing.T, e *Engine, reqs []Request) float64 {
	t.Helper()
	res := make([]Result, len(reqs))
	ctx := context.Background()
	now := t0
	if err := e.Do(ctx, now, reqs, res); err != nil {
		t.Fatal(err)
	}
	return testing.AllocsPerRun(1000, func() {
		now++
		if err := e.Do(ctx, now, reqs, res); err != nil {
			t.Fatal(err)
		}
	})
}

// TestDoGroupsNoAllocs: tiered checks on existing keys allocate nothing
// either, on one shard (in the shard's job) or across shards (the caller
// parks the shards with the pooled batch's channels).
func TestDoGroupsNoAllocs(t *testing.T) {
	const shards = 4
	e := newEngine(t, shards)
	for _, c := range []struct {
		name string
		on   [3]int
	}{{"one shard", [3]int{2, 2, 2}}, {"three shards", [3]int{0, 1, 3}}} {
		reqs := make([]Request, 0, 7)
		for g := range 2 {
			for i, si := range c.on {
				r := bucket(t, keyOn(shards, si, fmt.Sprintf("%s/%d/%d:", c.name, g, i)), 1e9, 1, 1)
				r.Scaled = true
				if i == 0 {
					r.Tiers = 3
				}
				reqs = append(reqs, r)
			}
		}
		reqs = append(reqs, bucket(t, "plain", 1e9, 1, 1))
		if n := doAllocs(t, e, reqs); n != 0 {
			t.Errorf("%s: two 3-tier groups and a plain request: %v allocs, want 0", c.name, n)
		}
	}
}
