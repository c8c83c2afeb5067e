package client

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/client/internal/rltest"
)

var benchKeys = func() []string {
	k := make([]string, 1000)
	for i := range k {
		k[i] = "bench:" + strconv.Itoa(i)
	}
	return k
}()

// BenchmarkRawDo is RL.ALLOW with go-redis alone: the round trip the
// client adds to.
func BenchmarkRawDo(b *testing.B) {
	s := rltest.Start(b, serverBin)
	rdb := redis.NewClient(&redis.Options{Addr: s.Addr})
	defer rdb.Close()
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if _, err := rdb.Do(ctx, "RL.ALLOW", benchKeys[i%len(benchKeys)], int64(1<<40), "1000000", int64(1)).Result(); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAllow is the same call through Client.Allow.
func BenchmarkAllow(b *testing.B) {
	s := rltest.Start(b, serverBin)
	c := newClient(b, Options{Addrs: []string{s.Addr}})
	ctx := context.Background()
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if d, err := c.Allow(ctx, benchKeys[i%len(benchKeys)], 1<<40, 1e6); err != nil || d.Source != FromServer {
			b.Fatal(d, err)
		}
	}
}

// BenchmarkAllowBackstop is the local decision: breaker open, backstop.
func BenchmarkAllowBackstop(b *testing.B) {
	c := newClient(b, Options{Addrs: []string{deadAddr(b)}, Backstop: &BackstopOptions{},
		Breaker: BreakerOptions{Failures: 1, Cooldown: time.Hour}})
	ctx := context.Background()
	c.Allow(ctx, "x", 1, 1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		if d, err := c.Allow(ctx, benchKeys[i%len(benchKeys)], 1<<40, 1e6); err != nil || d.Source != FromBackstop {
			b.Fatal(d, err)
		}
	}
}
