package engine_test

import (
	"context"
	"fmt"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// The engine deciding RL.ALLOW user:42 10 1: a token bucket of 10 tokens
// refilled at 1 token per second, each call taking 1. The caller reads the
// clock and passes the time in (the server reads it once per batch; a
// replicated group writes it into the log entry), so the same calls at
// the same times give the same results on every replica.
func Example() {
	e := engine.New(4) // 4 shards, each a goroutine owning its keys
	defer e.Close()

	req, err := engine.TokenBucket([]byte("user:42"), 10, 1, 1)
	if err != nil {
		panic(err) // a capacity, rate or cost out of bounds
	}
	t0 := int64(1_000_000) * int64(time.Second) // nanoseconds; any clock
	allow := func(now int64) engine.Result {
		res := make([]engine.Result, 1)
		if err := e.Do(context.Background(), now, []engine.Request{req}, res); err != nil {
			panic(err) // only a closed engine or a cancelled ctx
		}
		return res[0]
	}

	r := allow(t0)
	fmt.Println("first call:", r.Allowed, "remaining", r.Remaining, "reset after", time.Duration(r.ResetAfter))
	for range 9 {
		allow(t0)
	}
	r = allow(t0)
	fmt.Println("11th call at t0:", r.Allowed, "retry after", time.Duration(r.RetryAfter))
	r = allow(t0 + int64(time.Second))
	fmt.Println("one second later:", r.Allowed, "remaining", r.Remaining)
	// Output:
	// first call: true remaining 9 reset after 1s
	// 11th call at t0: false retry after 1s
	// one second later: true remaining 0
}
