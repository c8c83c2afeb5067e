package server

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Standalone is the Backend of a server running alone: it reads the clock
// once per batch and applies the batch to the engine directly.
type Standalone struct {
	Engine *engine.Engine
	// Policies are the named policies (RL.POLICY, RL.CHECK; policy_cmd.go);
	// nil: the server keeps none.
	Policies *policy.Store
}

func nowNanos() int64 { return time.Now().UnixNano() }

// Do applies the batch at the current time.
func (b Standalone) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return b.Engine.Do(ctx, nowNanos(), reqs, res)
}

// Len counts live keys.
func (b Standalone) Len(ctx context.Context) (int, error) { return b.Engine.Len(ctx, nowNanos()) }

// Flush removes every key.
func (b Standalone) Flush(ctx context.Context) error { return b.Engine.Flush(ctx) }

// SweepCounting drops expired keys in the background until ctx ends: every
// interval it examines a bounded sample per shard, and keeps going at once
// while more than a quarter of the sample had expired (as Redis's active
// expiry does), so an expiry wave is reclaimed quickly without long stalls.
// It adds the keys it drops to expired (INFO's expired_keys:
// Stats.ExpiredKeys) unless it is nil.
func SweepCounting(ctx context.Context, e *engine.Engine, interval time.Duration, budget int, expired *atomic.Int64) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for range 100 {
			examined, dropped, err := e.Sweep(ctx, nowNanos(), budget)
			if expired != nil {
				expired.Add(int64(dropped))
			}
			if err != nil || dropped*4 <= examined {
				break
			}
		}
	}
}
