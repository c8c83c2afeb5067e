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
	res := make([]Result, len(reqs))
	ctx := context.Background()
	now := t0
	if err := e.Do(ctx, now, reqs, res); err != nil {
		t.Fatal(err)
	}
	if n := testing.AllocsPerRun(1000, func() {
		now++
		if err := e.Do(ctx, now, reqs, res); err != nil {
			t.Fatal(err)
		}
	}); n != 0 {
		t.Errorf("Do of 32 existing keys: %v allocs, want 0", n)
	}
}
