package kv_test

import (
	"context"
	"math"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// TestEvictDataKeys: allkeys-lru evicts the data keys used least recently
// first (a read counts as a use), whatever their TTL, and limiter keys
// after them; volatile-ttl evicts data keys with a TTL by expiry and never
// a data key without one.
func TestEvictDataKeys(t *testing.T) {
	const sec = int64(1e9)
	t0 := int64(1_700_000_000) * sec
	ctx := context.Background()
	all := engine.EvictRange{From: 0, To: math.MaxUint64}

	setup := func() *strEnv {
		s := newStrEnv(t, 3)
		for i, c := range []string{"SET a 1", "SET b 2 EX 100", "SET c 3", "SET d 4 EX 50"} {
			if got := s.do(t0+int64(i)*sec, strings.Fields(c)...); got != "+OK\r\n" {
				t.Fatalf("%s: %q", c, got)
			}
		}
		req, err := engine.TokenBucket([]byte("lim"), 10, 0.01, 1) // empty again at t0+100s
		if err != nil {
			t.Fatal(err)
		}
		res := make([]engine.Result, 1)
		if err := s.e.Do(ctx, t0, []engine.Request{req}, res); err != nil || !res[0].Allowed {
			t.Fatalf("RL.ALLOW: %+v %v", res[0], err)
		}
		s.do(t0+10*sec, "GET", "a") // a is now the most recently used
		return s
	}
	exists := func(s *strEnv, now int64) string {
		var out []string
		for _, k := range []string{"a", "b", "c", "d", "lim"} {
			if s.do(now, "EXISTS", k) == ":1\r\n" {
				out = append(out, k)
			}
		}
		return strings.Join(out, " ")
	}
	evict := func(s *strEnv, now int64, r engine.EvictRange, n int) {
		t.Helper()
		r.N = n
		if _, err := s.e.Evict(ctx, now, r); err != nil {
			t.Fatal(err)
		}
	}
	now := t0 + 11*sec

	s := setup()
	lru := all
	lru.LRU = true
	evict(s, now, lru, 2) // b (used at t0+1s), c (t0+2s)
	if got := exists(s, now); got != "a d lim" {
		t.Errorf("allkeys-lru, 2 evicted: left %q, want \"a d lim\"", got)
	}
	evict(s, now, lru, 2) // d, then a: every data key goes before the limiter key
	if got := exists(s, now); got != "lim" {
		t.Errorf("allkeys-lru, 4 evicted: left %q, want \"lim\"", got)
	}

	s = setup()
	evict(s, now, all, 10) // volatile-ttl: d (t0+53s), the limiter key (t0+100s), b (t0+101s)
	if got := exists(s, now); got != "a c" {
		t.Errorf("volatile-ttl: left %q, want the keys without a TTL, \"a c\"", got)
	}
}
