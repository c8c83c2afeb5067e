package standalone

import (
	"context"
	"math"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

func fill(t *testing.T, b *Backend, keys int, ratePerSec float64) {
	t.Helper()
	reqs := make([]engine.Request, keys)
	for i := range reqs {
		r, err := engine.TokenBucket([]byte{'k', byte(i >> 8), byte(i)}, 10, ratePerSec, 1)
		if err != nil {
			t.Fatal(err)
		}
		reqs[i] = r
	}
	if err := b.Do(t.Context(), reqs, make([]engine.Result, keys)); err != nil {
		t.Fatal(err)
	}
}

// TestEvictedKeysCountsEvictions: the memory controller's eviction rounds
// are counted here, for INFO's evicted_keys.
func TestEvictedKeysCountsEvictions(t *testing.T) {
	eng := engine.New(2)
	defer eng.Close()
	b := New(eng, nil)
	fill(t, b, 100, 0.001)
	if !b.MemoryLeader() {
		t.Fatal("a standalone backend decides for itself")
	}
	n, err := b.Evict(t.Context(), engine.EvictRange{From: 0, To: math.MaxUint64, N: 30})
	if err != nil || n == 0 {
		t.Fatalf("Evict = %d, %v", n, err)
	}
	if got := b.EvictedKeys(); got != int64(n) {
		t.Fatalf("EvictedKeys = %d, want %d", got, n)
	}
	if left, _ := b.Len(t.Context()); left != 100-n {
		t.Fatalf("%d keys left, want %d", left, 100-n)
	}
}

// TestSweepCountsExpiredKeys: keys whose bucket is full again are dropped
// by the sweep and counted in ExpiredKeys.
func TestSweepCountsExpiredKeys(t *testing.T) {
	eng := engine.New(2)
	defer eng.Close()
	b := New(eng, nil)
	fill(t, b, 50, 1e9) // full again within nanoseconds
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan struct{})
	go func() { defer close(done); b.Sweep(ctx, time.Millisecond, 1000) }()
	defer func() { cancel(); <-done }()
	for deadline := time.Now().Add(10 * time.Second); b.ExpiredKeys() < 50; {
		if time.Now().After(deadline) {
			t.Fatalf("ExpiredKeys = %d after 10s, want 50", b.ExpiredKeys())
		}
		time.Sleep(time.Millisecond)
	}
}
