package clienttest

import (
	"strconv"
	"testing"
)

// GCRA's edge cases as Redis's own GCRA tests meet them (issue 16). The
// installed redis-server (7.x) has no GCRA command, so the expected texts
// are Redis's source's (src/gcra.c of the 8.8 milestone builds).

const (
	errGCRATokensOverflow = "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and TOKENS would cause an overflow"
	errGCRABurstOverflow  = "ERR GCRA limiting uses microsecond accuracy. Combination of period, tokens_per_period and max_burst would cause an overflow"
)

// TestGCRANonNumberMaxBurst: a max_burst that is not a number gets Redis's
// "must be positive" text (rlserver answered "not an integer").
func TestGCRANonNumberMaxBurst(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	for _, burst := range []string{"abc", "1.5", "", "9223372036854775808", "-1"} {
		wantErr(t, c, errPositive, "GCRA", "k", burst, 1, 1)
	}
	wantInt(t, c, 0, "EXISTS", "k")
}

// TestGCRAOverflowRefused: TOKENS and period combinations that overflow
// Redis's int64 microseconds are refused with Redis's text, not answered
// as a denial, and write nothing.
func TestGCRAOverflowRefused(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	const maxInt = "9223372036854775807"
	for _, tc := range []struct {
		want string
		args []any
	}{
		// interval 60 s * MaxInt64 tokens.
		{errGCRATokensOverflow, []any{"GCRA", "k", 0, 1, 60, "TOKENS", maxInt}},
		// interval 10 s (1e7 us) * 2^40 tokens > MaxInt64.
		{errGCRATokensOverflow, []any{"GCRA", "k", 5, 1, 10, "TOKENS", int64(1) << 40}},
		// interval 1 us * MaxInt64 tokens fits, but now + it does not.
		{errGCRATokensOverflow, []any{"GCRA", "k", 0, 1000000, 1, "TOKENS", maxInt}},
		// TOKENS is checked before max_burst.
		{errGCRATokensOverflow, []any{"GCRA", "k", maxInt, 1, 1, "TOKENS", maxInt}},
		{errGCRABurstOverflow, []any{"GCRA", "k", maxInt, 1, 1}},
		{errGCRABurstOverflow, []any{"GCRA", "k", int64(1) << 40, 1, 1000000}},
	} {
		wantErr(t, c, tc.want, tc.args...)
	}
	wantInt(t, c, 0, "EXISTS", "k")
	// Just inside Redis's range: more tokens than the bucket holds is a
	// denial that can never pass, as in Redis.
	wantRow(t, c, ex(1, 6, 6, -1, 0), "GCRA", "k", 5, 1, 10, "TOKENS", strconv.FormatInt(int64(1)<<39, 10))
	wantInt(t, c, 0, "EXISTS", "k")
}

// TestGCRAKeySeenWithinItsMillisecond: right after a GCRA call that leaves
// state, EXISTS is 1 and PTTL > 0 in the same millisecond, even with a
// 1 µs interval (the key lasts until its TAT rounded up to a millisecond,
// as Redis's PXAT; rlserver dropped it 1 µs later). A round trip may cross
// a millisecond boundary (often, on a loaded machine), so one of up to
// 200 tries must see it.
func TestGCRAKeySeenWithinItsMillisecond(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	seen := 0
	for i := 0; i < 200 && seen == 0; i++ {
		key := "gcra-ms-" + strconv.Itoa(i)
		if r, err := c.Do(t.Context(), "GCRA", key, 0, 1000, "0.001").Int64Slice(); err != nil || r[0] != 0 {
			t.Fatalf("GCRA %s: %v %v", key, r, err)
		}
		exists, err1 := c.Exists(t.Context(), key).Result()
		pttl, err2 := c.Do(t.Context(), "PTTL", key).Int64()
		if err1 != nil || err2 != nil {
			t.Fatal(err1, err2)
		}
		if exists == 1 && pttl > 0 {
			seen++
		}
	}
	if seen == 0 {
		t.Fatal("no GCRA key was seen by EXISTS and PTTL after its call in 200 tries")
	}
}
