package clienttest

import (
	"context"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Every limiting algorithm end to end (issue 3): CL.THROTTLE (redis-cell),
// GCRA (Redis 8.8), RL.FIXED, RL.SLIDING, RL.LOG and RL.SHAPE through
// go-redis in RESP3 and RESP2 and through redis-cli; the token bucket state
// shared by RL.ALLOW, CL.THROTTLE and GCRA; WRONGTYPE across kinds; TYPE,
// PTTL, TTL, EXISTS, DEL and expiry for every kind; COMMAND's key positions.
//
// Fields that count down are checked against ranges. Where a range needs
// the instant the server decided, the commands run between two TIME
// readings (a bracket), which bound the server's now for them. The window
// algorithms align windows to the epoch, so a test that must stay in one
// window reads TIME to find its end and, when the end is too close, waits
// for the next window by polling TIME.

const (
	hourMs    = int64(3_600_000)
	msNs      = int64(time.Millisecond)
	secNs     = int64(time.Second)
	slackS    = slackMs / 1000
	wrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

	// boundaryMargin is the least time left in an aligned hour window for a
	// test that assumes it stays inside that window.
	boundaryMargin = 5 * time.Second

	// The largest window (2^60 ns in whole ms) and limit (2^60) the window
	// algorithms accept, and RL.LOG's largest limit.
	maxWindowMs = int64(1152921504606)
	maxLimit    = int64(1) << 60
	maxLogLimit = int64(100_000)

	errNotInt      = "ERR value is not an integer or out of range"
	errNotFloatTxt = "ERR value is not a valid float"
	errSyntaxTxt   = "ERR syntax error"
	errTooLong     = "ERR capacity/rate too large: a full refill would take longer than 2^60 ns (about 36 years)"
	errZeroRates   = "ERR zero rates are not supported"
	errPositive    = "ERR value is out of range, must be positive"
	errOneToMax    = "ERR value is out of range, value must between 1 and 9223372036854775807"
	errPeriod      = "ERR period must be > 0 and < 1e12"
	errCost        = "ERR cost must be an integer >= 0"
	errLimit       = "ERR limit must be an integer >= 1"
	errLimitMax    = "ERR limit is above the maximum of 2^60"
	errLogLimitMax = "ERR limit is above RL.LOG's maximum of 100000 entries per key"
	errWindow      = "ERR window must be an integer >= 1 (milliseconds)"
	errWindowMax   = "ERR window is above the maximum of 2^60 ns (about 36 years)"
	errCapacity    = "ERR capacity must be an integer >= 1"
	errRate        = "ERR rate must be a finite number > 0"
)

// row is an expected integer array reply: one span per element.
type row []span

// ex is a row of exact values.
func ex(vs ...int64) row {
	r := make(row, len(vs))
	for i, v := range vs {
		r[i] = exactly(v)
	}
	return r
}

// thr is an expected CL.THROTTLE / GCRA reply.
func thr(limited, limit, remaining int64, retry, reset span) row {
	return row{exactly(limited), exactly(limit), exactly(remaining), retry, reset}
}

// win is an expected RL.FIXED / RL.SLIDING / RL.LOG reply.
func win(allowed, remaining int64, retry, reset span) row {
	return row{exactly(allowed), exactly(remaining), retry, reset}
}

// agedS is aged in seconds: a countdown that was s seconds when its state
// was written.
func agedS(s int64) span { return span{s - slackS, s} }

func (r row) match(got []int64) bool {
	if len(got) != len(r) {
		return false
	}
	for i := range r {
		if !r[i].has(got[i]) {
			return false
		}
	}
	return true
}

func (r row) String() string {
	parts := make([]string, len(r))
	for i, s := range r {
		parts[i] = s.String()
	}
	return "[" + strings.Join(parts, " ") + "]"
}

// checkRow compares the reply got to the command args with want.
func checkRow(t testing.TB, args []any, got []int64, want row) {
	t.Helper()
	if !want.match(got) {
		t.Errorf("%v = %v, want %v", args, got, want)
	}
}

// wantRow runs a command, checks its integer array reply and returns it.
func wantRow(t testing.TB, c *redis.Client, want row, args ...any) []int64 {
	t.Helper()
	got := int64s(t, do(t, c, args...))
	checkRow(t, args, got, want)
	return got
}

// bracket bounds the server's clock (ns since the epoch) while commands
// ran: they were sent after TIME read lo and answered before TIME read hi.
// TIME truncates to the microsecond, so hi includes the rest of it.
type bracket struct{ lo, hi int64 }

// serverTime is the server's clock as TIME reports it, in ns.
func serverTime(t testing.TB, c *redis.Client) int64 {
	t.Helper()
	tm, err := c.Time(context.Background()).Result()
	if err != nil {
		t.Fatalf("TIME: %v", err)
	}
	return tm.UnixNano()
}

// timedRows runs cmds as one pipeline between two TIME readings and
// returns their integer array replies and the bracket.
func timedRows(t testing.TB, c *redis.Client, cmds ...[]any) ([][]int64, bracket) {
	t.Helper()
	ctx := context.Background()
	lo := serverTime(t, c)
	pipe := c.Pipeline()
	res := make([]*redis.Cmd, len(cmds))
	for i, args := range cmds {
		res[i] = pipe.Do(ctx, args...)
	}
	pipe.Exec(ctx) // errors are per command, below
	b := bracket{lo, serverTime(t, c) + 999}
	out := make([][]int64, len(cmds))
	for i, r := range res {
		v, err := r.Result()
		if err != nil {
			t.Fatalf("%v: %v", cmds[i], err)
		}
		out[i] = int64s(t, v)
	}
	return out, b
}

// timedRow runs one command between two TIME readings and checks its
// integer array reply against want(bracket).
func timedRow(t testing.TB, c *redis.Client, want func(b bracket) row, args ...any) []int64 {
	t.Helper()
	got, b := timedRows(t, c, args)
	checkRow(t, args, got[0], want(b))
	return got[0]
}

// timedInt runs one command with an integer reply between two TIME
// readings.
func timedInt(t testing.TB, c *redis.Client, args ...any) (int64, bracket) {
	t.Helper()
	lo := serverTime(t, c)
	n := doInt(t, c, args...)
	return n, bracket{lo, serverTime(t, c) + 999}
}

// until is the span of ceil((at-now)/unit) over every now in b: the
// countdown to the instant at, in units. The test stops if at is not
// after the bracket: the commands were meant to run before it.
func (b bracket) until(t testing.TB, at, unit int64) span {
	t.Helper()
	if at <= b.hi {
		t.Fatalf("the server clock may have reached %s (a window end) before the command was answered (bracket %s..%s): the test assumed it would not",
			stamp(at), stamp(b.lo), stamp(b.hi))
	}
	return span{divUp(at-b.hi, unit), divUp(at-b.lo, unit)}
}

func stamp(ns int64) string { return time.Unix(0, ns).UTC().Format("15:04:05.000000") }

// divUp is ceil(a/b) for a >= 0, b > 0.
func divUp(a, b int64) int64 { return (a + b - 1) / b }

// msSpan is the span of ceil(x/1ms) for x in [lo, hi] ns.
func msSpan(lo, hi int64) span { return span{divUp(lo, msNs), divUp(hi, msNs)} }

// windowEnd returns the end (ns since the epoch) of the window of windowMs,
// aligned to the epoch, that holds the server's clock. When less than
// margin of it is left it first waits for the next window, so the caller
// has at least margin inside one window.
func windowEnd(t testing.TB, c *redis.Client, windowMs int64, margin time.Duration) int64 {
	t.Helper()
	w := windowMs * msNs
	now := serverTime(t, c)
	end := now - now%w + w
	if end-now < int64(margin) {
		waitServerTime(t, c, end)
		end += w
	}
	return end
}

// waitServerTime polls TIME until the server's clock reaches at.
func waitServerTime(t testing.TB, c *redis.Client, at int64) {
	t.Helper()
	deadline := time.Now().Add(time.Duration(at-serverTime(t, c)) + ioTimeout)
	tick := time.NewTicker(2 * time.Millisecond)
	defer tick.Stop()
	for serverTime(t, c) < at {
		if time.Now().After(deadline) {
			t.Fatalf("the server clock did not reach %s", stamp(at))
		}
		<-tick.C
	}
}

// stillBefore stops the test when the server's clock has reached end: the
// assertions so far assumed one window.
func stillBefore(t testing.TB, c *redis.Client, end int64) {
	t.Helper()
	if now := serverTime(t, c); now >= end {
		t.Fatalf("the server clock reached the window end %s (now %s): the test assumed one window", stamp(end), stamp(now))
	}
}

// slidingRetryAt is, for a sliding window counter whose previous window is
// empty, the instant a call of cost is allowed again after it was denied
// in the window ending at end holding cur units (engine/sliding.go): at the
// next window's start when cur fits, else when cur, weighted by the part of
// the next window still to come, does.
func slidingRetryAt(end, w, limit, cost, cur int64) int64 {
	room := limit - cost
	if cur <= room {
		return end
	}
	// left = floor(room*w/cur), in big integers: room*w may overflow.
	left := new(big.Int).Mul(big.NewInt(room), big.NewInt(w))
	left.Quo(left, big.NewInt(cur))
	if l := left.Int64(); l > 0 {
		return end + w - l
	}
	return end + w
}

// --- CL.THROTTLE ---

func TestThrottleReplyShape(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	for _, proto := range []int{2, 3} {
		rc.send(fmt.Sprintf("HELLO %d\r\n", proto))
		rc.read()
		p := strconv.Itoa(proto)
		// Five integers: limited, limit, remaining, retry_after_s, reset_after_s.
		rc.do("CL.THROTTLE shape"+p+" 4 1 1000\r\n", "*5\r\n:0\r\n:5\r\n:4\r\n:-1\r\n:1000\r\n")
		rc.do("CL.THROTTLE never"+p+" 4 1 1000 6\r\n", "*5\r\n:1\r\n:5\r\n:5\r\n:-1\r\n:0\r\n")
		rc.do("GCRA gshape"+p+" 5 10 60\r\n", "*5\r\n:0\r\n:6\r\n:5\r\n:-1\r\n:6\r\n")
		rc.do("RL.FIXED fshape"+p+" 5 1000 6\r\n", "*4\r\n:0\r\n:5\r\n:-1\r\n:0\r\n")
		rc.do("RL.SLIDING sshape"+p+" 5 1000 0\r\n", "*4\r\n:1\r\n:5\r\n:0\r\n:0\r\n")
		rc.do("RL.LOG lshape"+p+" 5 1000\r\n", "*4\r\n:1\r\n:4\r\n:0\r\n:1000\r\n")
		rc.do("RL.SHAPE qshape"+p+" 5 0.001\r\n", "*4\r\n:1\r\n:0\r\n:1\r\n:1000000\r\n")
		rc.do("RL.SHAPE qnever"+p+" 5 0.001 6\r\n", "*4\r\n:0\r\n:-1\r\n:0\r\n:0\r\n")
	}
}

// TestThrottleRedisCellVectors runs redis-cell's own test table (rows at
// t=0; the later rows need a controlled clock and live in the engine's
// tests), once scaled to a period of 3600 s, where no row depends on time
// passing except for reset and retry, and once with upstream's parameters.
func TestThrottleRedisCellVectors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)

		// CL.THROTTLE foo 4 1 3600 [q]: T = 3600 s, limit 5.
		foo := p + "foo"
		for _, tc := range []struct {
			q    int64
			want row
		}{
			{6, ex(1, 5, 5, -1, 0)}, // never: more than the limit
			{1, ex(0, 5, 4, -1, 3600)},
			{1, thr(0, 5, 3, exactly(-1), agedS(2*3600))},
			{1, thr(0, 5, 2, exactly(-1), agedS(3*3600))},
			{1, thr(0, 5, 1, exactly(-1), agedS(4*3600))},
			{1, thr(0, 5, 0, exactly(-1), agedS(5*3600))},
			{1, thr(1, 5, 0, agedS(3600), agedS(5*3600))},
		} {
			wantRow(t, c, tc.want, "CL.THROTTLE", foo, 4, 1, 3600, tc.q)
		}
		// Rows 11-14 start from a bucket one T from full, which one call
		// on a fresh key makes.
		bar := p + "bar"
		wantRow(t, c, ex(0, 5, 4, -1, 3600), "CL.THROTTLE", bar, 4, 1, 3600, 1)
		wantRow(t, c, thr(0, 5, 4, exactly(-1), agedS(3600)), "CL.THROTTLE", bar, 4, 1, 3600, 0)
		wantRow(t, c, thr(0, 5, 2, exactly(-1), agedS(3*3600)), "CL.THROTTLE", bar, 4, 1, 3600, 2)
		wantRow(t, c, thr(1, 5, 2, agedS(3*3600), agedS(3*3600)), "CL.THROTTLE", bar, 4, 1, 3600, 5)
		// CL.THROTTLE user123 0 1 7200 1.
		user := p + "user123"
		wantRow(t, c, ex(0, 1, 0, -1, 7200), "CL.THROTTLE", user, 0, 1, 7200, 1)
		wantRow(t, c, thr(1, 1, 0, agedS(7200), agedS(7200)), "CL.THROTTLE", user, 0, 1, 7200, 1)
	}

	// Upstream's parameters: period 1 s (user123: 2 s). Each row holds
	// exactly while every call comes less than a second after its key's
	// first call. The rows run as one pipeline between two TIME readings;
	// a run that TIME shows took a second or more is repeated on fresh keys.
	c := newGoRedis(t, s, nil)
	type vec struct {
		key  string
		args []any // after the key
		want row
	}
	vectors := []vec{
		{"foo", []any{4, 1, 1, 6}, ex(1, 5, 5, -1, 0)},
		{"foo", []any{4, 1, 1, 1}, ex(0, 5, 4, -1, 1)},
		{"foo", []any{4, 1, 1, 1}, ex(0, 5, 3, -1, 2)},
		{"foo", []any{4, 1, 1, 1}, ex(0, 5, 2, -1, 3)},
		{"foo", []any{4, 1, 1, 1}, ex(0, 5, 1, -1, 4)},
		{"foo", []any{4, 1, 1, 1}, ex(0, 5, 0, -1, 5)},
		{"foo", []any{4, 1, 1, 1}, ex(1, 5, 0, 1, 5)},
		{"bar", []any{4, 1, 1, 1}, ex(0, 5, 4, -1, 1)},
		{"bar", []any{4, 1, 1, 0}, ex(0, 5, 4, -1, 1)},
		{"bar", []any{4, 1, 1, 2}, ex(0, 5, 2, -1, 3)},
		{"bar", []any{4, 1, 1, 5}, ex(1, 5, 2, 3, 3)},
		{"user123", []any{0, 1, 2, 1}, ex(0, 1, 0, -1, 2)},
		{"user123", []any{0, 1, 2, 1}, ex(1, 1, 0, 2, 2)},
	}
	for attempt := 1; ; attempt++ {
		cmds := make([][]any, len(vectors))
		for i, v := range vectors {
			cmds[i] = append([]any{"CL.THROTTLE", fmt.Sprintf("%s:%d", v.key, attempt)}, v.args...)
		}
		got, b := timedRows(t, c, cmds...)
		if b.hi-b.lo >= secNs {
			if attempt == 5 {
				t.Fatalf("5 runs of %d pipelined CL.THROTTLE calls each took a second or more", len(cmds))
			}
			continue
		}
		for i := range got {
			checkRow(t, cmds[i], got[i], vectors[i].want)
		}
		break
	}
}

func TestThrottleQuantityZero(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		k := fmt.Sprintf("q0:%d", proto)
		// A true read: nothing written, no key created.
		for range 3 {
			wantRow(t, c, ex(0, 5, 5, -1, 0), "CL.THROTTLE", k, 4, 1, 1000, 0)
		}
		wantInt(t, c, 0, "EXISTS", k)
		wantReply(t, c, "none", "TYPE", k)
		wantInt(t, c, -2, "PTTL", k)
		// quantity above the limit: limited for ever, nothing written.
		wantRow(t, c, ex(1, 5, 5, -1, 0), "CL.THROTTLE", k, 4, 1, 1000, 6)
		wantRow(t, c, ex(1, 5, 5, -1, 0), "CL.THROTTLE", k, 4, 1, 1000, "9223372036854775807")
		wantInt(t, c, 0, "EXISTS", k)

		// On a live key quantity 0 reports without taking.
		wantRow(t, c, ex(0, 5, 4, -1, 1000), "CL.THROTTLE", k, 4, 1, 1000)
		for range 3 {
			wantRow(t, c, thr(0, 5, 4, exactly(-1), agedS(1000)), "CL.THROTTLE", k, 4, 1, 1000, 0)
		}
		wantRow(t, c, thr(0, 5, 0, exactly(-1), agedS(5000)), "CL.THROTTLE", k, 4, 1, 1000, 4)
		// Even on an empty bucket quantity 0 is not limited: it takes nothing.
		wantRow(t, c, thr(0, 5, 0, exactly(-1), agedS(5000)), "CL.THROTTLE", k, 4, 1, 1000, 0)
		wantRow(t, c, thr(1, 5, 0, agedS(1000), agedS(5000)), "CL.THROTTLE", k, 4, 1, 1000, 1)
		wantRow(t, c, thr(1, 5, 0, exactly(-1), agedS(5000)), "CL.THROTTLE", k, 4, 1, 1000, 6)
		wantReply(t, c, "rl-gcra", "TYPE", k)
	}
	c := newGoRedis(t, s, nil)
	wantInt(t, c, 2, "DBSIZE")
}

func TestThrottleErrors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		for _, tc := range []struct {
			want string
			args []any
		}{
			{"ERR wrong number of arguments for 'cl.throttle' command", []any{"CL.THROTTLE"}},
			{"ERR wrong number of arguments for 'cl.throttle' command", []any{"CL.THROTTLE", "k"}},
			{"ERR wrong number of arguments for 'cl.throttle' command", []any{"CL.THROTTLE", "k", 4, 1}},
			{"ERR wrong number of arguments for 'cl.throttle' command", []any{"cl.throttle", "k", 4, 1}},
			{errSyntaxTxt, []any{"CL.THROTTLE", "k", 4, 1, 1, 1, 1}},
			{errZeroRates, []any{"CL.THROTTLE", "k", 4, 0, 1}},
			{errZeroRates, []any{"CL.THROTTLE", "k", 4, 1, 0}},
			{errZeroRates, []any{"CL.THROTTLE", "k", 4, 0, 0}},
			{errZeroRates, []any{"CL.THROTTLE", "k", 4, 0, 0, 0}},
			{errNotInt, []any{"CL.THROTTLE", "k", "x", 1, 1}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, "x", 1}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, "x"}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, 1, "x"}},
			{errNotInt, []any{"CL.THROTTLE", "k", "4.0", 1, 1}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, "1.5"}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, 1, "1.0"}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, "1e3", 1}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, 1, ""}},
			{errNotInt, []any{"CL.THROTTLE", "k", "9223372036854775808", 1, 1}},
			{errNotInt, []any{"CL.THROTTLE", "k", 4, 1, "-9223372036854775809"}},
			{errPositive, []any{"CL.THROTTLE", "k", -1, 1, 1}},
			{errRate, []any{"CL.THROTTLE", "k", 4, -1, 1}},
			{errRate, []any{"CL.THROTTLE", "k", 4, 1, -1}},
			{errCost, []any{"CL.THROTTLE", "k", 4, 1, 1, -1}},
			// Too long a period or burst: a clear error, never a wrapped number.
			{errTooLong, []any{"CL.THROTTLE", "k", 4, 1, "9223372036854775807"}},
			{errTooLong, []any{"CL.THROTTLE", "k", 0, 1, "9223372036"}},
			{errTooLong, []any{"CL.THROTTLE", "k", "9223372036854775807", 1, 1}},
			{errTooLong, []any{"CL.THROTTLE", "k", 1_000_000_000, 1, 3600}},
		} {
			wantErr(t, c, tc.want, tc.args...)
		}
		wantInt(t, c, 0, "EXISTS", "k")
	}
	// The largest accepted values are answered normally.
	c := newGoRedis(t, s, nil)
	// 2^60 ns in whole seconds is 1152921504 s.
	wantRow(t, c, ex(0, 1, 0, -1, 1152921504), "CL.THROTTLE", "longest", 0, 1, 1152921504)
	wantRow(t, c, ex(1, 1, 1, -1, 0), "CL.THROTTLE", "costly", 0, 1, 1, "9223372036854775807")
	wantInt(t, c, 1, "DBSIZE")
}

// TestThrottleHugeNegativePeriodIsNotTooLong pins a bug: a period below
// -9223372036 s was answered "capacity/rate too large: a full refill would
// take longer than 2^60 ns", while any other negative period gets the
// error every negative rate gets (or "zero rates" when the count is 0).
func TestThrottleHugeNegativePeriodIsNotTooLong(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	for _, period := range []string{"-1", "-9223372036", "-9223372037", "-9223372036854775807", "-9223372036854775808"} {
		wantErr(t, c, errRate, "CL.THROTTLE", "k", 4, 1, period)
		wantErr(t, c, errZeroRates, "CL.THROTTLE", "k", 4, 0, period)
		wantErr(t, c, errPositive, "CL.THROTTLE", "k", -1, 1, period)
	}
	wantInt(t, c, 0, "EXISTS", "k")
}

// --- GCRA (Redis 8.8) ---

func TestGCRADocumentedExample(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		// 10 per 60 s is T = 6 s; max_burst 5 is 6 at once.
		k := p + "api:user:123"
		wantRow(t, c, ex(0, 6, 5, -1, 6), "GCRA", k, 5, 10, 60)
		for n := int64(2); n <= 6; n++ {
			wantRow(t, c, thr(0, 6, 6-n, exactly(-1), agedS(6*n)), "GCRA", k, 5, 10, 60)
		}
		wantRow(t, c, thr(1, 6, 0, agedS(6), agedS(36)), "GCRA", k, 5, 10, 60)
		wantReply(t, c, "rl-gcra", "TYPE", k)
		if ms := doInt(t, c, "PTTL", k); !aged(36_000).has(ms) {
			t.Errorf("PTTL %s = %d, want %v", k, ms, aged(36_000))
		}

		// TOKENS, in any case.
		k = p + "tokens"
		wantRow(t, c, ex(0, 6, 3, -1, 180), "GCRA", k, 5, 1, 60, "TOKENS", 3)
		wantRow(t, c, thr(0, 6, 0, exactly(-1), agedS(360)), "GCRA", k, 5, 1, 60, "tokens", 3)
		wantRow(t, c, thr(1, 6, 0, agedS(60), agedS(360)), "GCRA", k, 5, 1, 60, "ToKeNs", 1)
		// More tokens than max_burst+1 can never pass: retry -1, nothing written.
		k = p + "never"
		wantRow(t, c, ex(1, 6, 6, -1, 0), "GCRA", k, 5, 1, 60, "TOKENS", 7)
		wantInt(t, c, 0, "EXISTS", k)
		// A fractional period: 5 per 0.5 s is T = 0.1 s, rounded up to 1 s.
		wantRow(t, c, ex(0, 11, 10, -1, 1), "GCRA", p+"frac", 10, 5, 0.5)
		wantRow(t, c, ex(0, 11, 10, -1, 1), "GCRA", p+"frac2", 10, 5, "5e-1")
		// max_burst 0 allows one at a time.
		k = p + "single"
		wantRow(t, c, ex(0, 1, 0, -1, 1000), "GCRA", k, 0, 1, 1000)
		wantRow(t, c, thr(1, 1, 0, agedS(1000), agedS(1000)), "GCRA", k, 0, 1, 1000)
	}
}

func TestGCRAErrors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	const arity = "ERR wrong number of arguments for 'gcra' command"
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		for _, tc := range []struct {
			want string
			args []any
		}{
			{arity, []any{"GCRA"}},
			{arity, []any{"GCRA", "k"}},
			{arity, []any{"GCRA", "k", 10}},
			{arity, []any{"GCRA", "k", 10, 5}},
			{arity, []any{"gcra", "k", 10, 5}},
			{arity, []any{"GCRA", "k", 10, 5, 10, "TOKENS", 1, "x"}},
			{arity, []any{"GCRA", "k", 10, 5, 10, "TOKENS", 1, "TOKENS", 1}},
			{arity, []any{"GCRA", "k", -1, 0, 0, "x", 0, "y"}}, // arity first
			// max_burst
			{errPositive, []any{"GCRA", "k", -1, 5, 10}},
			{errPositive, []any{"GCRA", "k", "-9223372036854775808", 5, 10}},
			{errPositive, []any{"GCRA", "k", -1, 0, 0}}, // max_burst first
			// Redis's getPositiveLongFromObjectOrReply: one text for all.
			{errPositive, []any{"GCRA", "k", "notanumber", 5, 10}},
			{errPositive, []any{"GCRA", "k", "1.5", 5, 10}},
			{errPositive, []any{"GCRA", "k", "9223372036854775808", 5, 10}},
			// tokens_per_period
			{errOneToMax, []any{"GCRA", "k", 10, 0, 10}},
			{errOneToMax, []any{"GCRA", "k", 10, -1, 10}},
			{errOneToMax, []any{"GCRA", "k", 10, 0, 0}}, // tokens_per_period before period
			{errNotInt, []any{"GCRA", "k", 10, "notanumber", 10}},
			{errNotInt, []any{"GCRA", "k", 10, "2.5", 10}},
			// period
			{errPeriod, []any{"GCRA", "k", 10, 5, 0}},
			{errPeriod, []any{"GCRA", "k", 10, 5, "0.0"}},
			{errPeriod, []any{"GCRA", "k", 10, 5, -1}},
			{errPeriod, []any{"GCRA", "k", 10, 5, "-0.5"}},
			{errPeriod, []any{"GCRA", "k", 10, 5, "1e12"}},
			{errPeriod, []any{"GCRA", "k", 10, 5, "inf"}},
			{errPeriod, []any{"GCRA", "k", 10, 5, "-inf"}},
			{errNotFloatTxt, []any{"GCRA", "k", 10, 5, "notanumber"}},
			{errNotFloatTxt, []any{"GCRA", "k", 10, 5, "nan"}},
			{errNotFloatTxt, []any{"GCRA", "k", 10, 5, ""}},
			// TOKENS
			{"ERR Missing TOKENS value", []any{"GCRA", "k", 10, 5, 10, "TOKENS"}},
			{"ERR Missing TOKENS value", []any{"GCRA", "k", 10, 5, 10, "tokens"}},
			{errOneToMax, []any{"GCRA", "k", 10, 5, 10, "TOKENS", 0}},
			{errOneToMax, []any{"GCRA", "k", 10, 5, 10, "TOKENS", -1}},
			{errNotInt, []any{"GCRA", "k", 10, 5, 10, "TOKENS", "notanumber"}},
			{errNotInt, []any{"GCRA", "k", 10, 5, 10, "TOKENS", "1.0"}},
			{errSyntaxTxt, []any{"GCRA", "k", 10, 5, 10, "foo"}},
			{errSyntaxTxt, []any{"GCRA", "k", 10, 5, 10, "COST", 1}},
			{errSyntaxTxt, []any{"GCRA", "k", 10, 5, 10, "TOKEN", 1}},
			{errSyntaxTxt, []any{"GCRA", "k", 10, 5, 10, "TOKENSS", 1}},
			// Overflows of Redis's microseconds: Redis's texts (issue 16).
			{errGCRABurstOverflow, []any{"GCRA", "k", 200000000, 1, 86400}},
			{errGCRABurstOverflow, []any{"GCRA", "k", "9223372036854775807", 1, 1}},
			// Within Redis's range, too long for rlserver's 2^60 ns.
			{errTooLong, []any{"GCRA", "k", 0, 1, "999999999999"}},
		} {
			wantErr(t, c, tc.want, tc.args...)
		}
		wantInt(t, c, 0, "EXISTS", "k")
	}
	c := newGoRedis(t, s, nil)
	wantInt(t, c, 0, "DBSIZE")
}

// TestGCRAPeriodCheckedBeforeTokens pins a bug: Redis 8.8 answers a bad
// period as soon as it parses it, before it looks at TOKENS, and rlserver
// checked the period's range only after the TOKENS clause, answering these
// with the TOKENS clause's error.
func TestGCRAPeriodCheckedBeforeTokens(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	for _, args := range [][]any{
		{"GCRA", "k", 10, 5, 0, "TOKENS", 0},
		{"GCRA", "k", 10, 5, -1, "TOKENS"},
		{"GCRA", "k", 10, 5, "1e12", "foo"},
		{"GCRA", "k", 10, 5, "inf", "TOKENS", "x"},
	} {
		wantErr(t, c, errPeriod, args...)
	}
	wantInt(t, c, 0, "EXISTS", "k")
}

// TestGCRAThrottleAllowShareState: RL.ALLOW, CL.THROTTLE and GCRA keep one
// token bucket. With the same emission interval (RL.ALLOW rate 0.001/s,
// CL.THROTTLE and GCRA 1 per 1000 s: T = 1000 s) and capacity 5 (max_burst
// 4) they see the same bucket, whichever command drained it.
func TestGCRAThrottleAllowShareState(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		limited := thr(1, 5, 0, agedS(1000), agedS(5000))

		// Drained through RL.ALLOW.
		k := p + "byallow"
		for n := int64(1); n <= 5; n++ {
			wantDecision(t, c, allowedAt(5, n), "RL.ALLOW", k, 5, slowRate)
		}
		wantRow(t, c, limited, "CL.THROTTLE", k, 4, 1, 1000)
		wantRow(t, c, limited, "GCRA", k, 4, 1, 1000)
		wantRow(t, c, thr(0, 5, 0, exactly(-1), agedS(5000)), "CL.THROTTLE", k, 4, 1, 1000, 0)
		wantDecision(t, c, deniedFull(5), "RL.PEEK", k, 5, slowRate)

		// Drained through CL.THROTTLE.
		k = p + "bythrottle"
		wantRow(t, c, ex(0, 5, 0, -1, 5000), "CL.THROTTLE", k, 4, 1, 1000, 5)
		wantDecision(t, c, deniedFull(5), "RL.ALLOW", k, 5, slowRate)
		wantRow(t, c, limited, "GCRA", k, 4, 1, 1000)
		wantRow(t, c, limited, "CL.THROTTLE", k, 4, 1, 1000)

		// Drained through GCRA.
		k = p + "bygcra"
		wantRow(t, c, ex(0, 5, 0, -1, 5000), "GCRA", k, 4, 1, 1000, "TOKENS", 5)
		wantDecision(t, c, deniedFull(5), "RL.ALLOW", k, 5, slowRate)
		wantRow(t, c, limited, "CL.THROTTLE", k, 4, 1, 1000)
		wantRow(t, c, limited, "GCRA", k, 4, 1, 1000)

		// Taken in turns: each sees what the others took.
		k = p + "turns"
		wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", k, 5, slowRate)
		wantRow(t, c, thr(0, 5, 3, exactly(-1), agedS(2000)), "CL.THROTTLE", k, 4, 1, 1000)
		wantRow(t, c, thr(0, 5, 2, exactly(-1), agedS(3000)), "GCRA", k, 4, 1, 1000)
		wantDecision(t, c, decision{1, 0, exactly(0), aged(5 * periodMs)}, "RL.ALLOW", k, 5, slowRate, 2)
		wantRow(t, c, limited, "CL.THROTTLE", k, 4, 1, 1000)
		wantRow(t, c, limited, "GCRA", k, 4, 1, 1000)
		wantDecision(t, c, deniedFull(5), "RL.ALLOW", k, 5, slowRate)
		if ms := doInt(t, c, "PTTL", k); !aged(5 * periodMs).has(ms) {
			t.Errorf("PTTL %s = %d, want %v", k, ms, aged(5*periodMs))
		}
		for _, k := range []string{"byallow", "bythrottle", "bygcra", "turns"} {
			wantReply(t, c, "rl-gcra", "TYPE", p+k)
		}
	}
}

// --- RL.FIXED, RL.SLIDING, RL.LOG ---

// TestFixedWindowBurst: exactly limit units per aligned hour, then denied
// until the window ends. The test stays in one hour window (see
// windowEnd), so every countdown is exact within its TIME bracket.
func TestFixedWindowBurst(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c0 := newGoRedis(t, s, nil)
	end := windowEnd(t, c0, hourMs, boundaryMargin)
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		toEnd := func(b bracket) span { return b.until(t, end, msNs) }

		k := p + "burst"
		for n := int64(1); n <= 5; n++ {
			timedRow(t, c, func(b bracket) row { return win(1, 5-n, exactly(0), toEnd(b)) }, "RL.FIXED", k, 5, hourMs)
		}
		for range 3 {
			timedRow(t, c, func(b bracket) row { return win(0, 0, toEnd(b), toEnd(b)) }, "RL.FIXED", k, 5, hourMs)
		}
		// cost 0 peeks, cost > limit never passes.
		timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), toEnd(b)) }, "RL.FIXED", k, 5, hourMs, 0)
		timedRow(t, c, func(b bracket) row { return win(0, 0, exactly(-1), toEnd(b)) }, "RL.FIXED", k, 5, hourMs, 6)

		// A pipelined burst of 60 at limit 50: exactly the first 50 pass.
		k = p + "pipelined"
		cmds := make([][]any, 60)
		for i := range cmds {
			cmds[i] = []any{"RL.FIXED", k, 50, hourMs}
		}
		got, b := timedRows(t, c, cmds...)
		for i := range got {
			want := win(1, int64(49-i), exactly(0), toEnd(b))
			if i >= 50 {
				want = win(0, 0, toEnd(b), toEnd(b))
			}
			checkRow(t, cmds[i], got[i], want)
		}

		// Costs: what is left is less than asked.
		k = p + "cost"
		timedRow(t, c, func(b bracket) row { return win(1, 3, exactly(0), toEnd(b)) }, "RL.FIXED", k, 5, hourMs, 2)
		timedRow(t, c, func(b bracket) row { return win(0, 3, toEnd(b), toEnd(b)) }, "RL.FIXED", k, 5, hourMs, 4)
		timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), toEnd(b)) }, "RL.FIXED", k, 5, hourMs, 3)

		// On a missing key cost 0 and cost > limit create nothing.
		k = p + "none"
		wantRow(t, c, ex(1, 5, 0, 0), "RL.FIXED", k, 5, hourMs, 0)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.FIXED", k, 5, hourMs, 6)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.FIXED", k, 5, hourMs, "9223372036854775807")
		wantInt(t, c, 0, "EXISTS", k)

		// Another window length sees an empty state, and replaces the
		// stored one when allowed. A two-hour boundary is an hour boundary,
		// so the two-hour window holding now ends at end or end+1h.
		k = p + "burst"
		end2 := end
		if (end/msNs)%(2*hourMs) != 0 {
			end2 += hourMs * msNs
		}
		timedRow(t, c, func(b bracket) row { return win(1, 4, exactly(0), b.until(t, end2, msNs)) }, "RL.FIXED", k, 5, 2*hourMs)
		wantRow(t, c, ex(1, 5, 0, 0), "RL.FIXED", k, 5, hourMs, 0)
		timedRow(t, c, func(b bracket) row { return win(1, 3, exactly(0), b.until(t, end2, msNs)) }, "RL.FIXED", k, 5, 2*hourMs)
		wantReply(t, c, "rl-fixed", "TYPE", k)
	}
	stillBefore(t, c0, end)
}

// TestFixedWindowTurns: at the instant an aligned window ends the count is
// 0 again and the key is gone. Windows of 2 s; the test waits for the
// boundary by polling TIME.
func TestFixedWindowTurns(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	const w = int64(2000)
	end := windowEnd(t, c, w, time.Second)
	cmds := [][]any{{"RL.FIXED", "turn", 3, w}, {"RL.FIXED", "turn", 3, w}, {"RL.FIXED", "turn", 3, w}, {"RL.FIXED", "turn", 3, w}}
	for _, e := range []int64{end, end + w*msNs} {
		got, b := timedRows(t, c, cmds...)
		u := b.until(t, e, msNs)
		for i, want := range []row{win(1, 2, exactly(0), u), win(1, 1, exactly(0), u), win(1, 0, exactly(0), u), win(0, 0, u, u)} {
			checkRow(t, cmds[i], got[i], want)
		}
		if n, b := timedInt(t, c, "PTTL", "turn"); !b.until(t, e, msNs).has(n) {
			t.Errorf("PTTL turn = %d, want %v", n, b.until(t, e, msNs))
		}
		waitServerTime(t, c, e)
		wantInt(t, c, 0, "EXISTS", "turn")
		wantInt(t, c, -2, "PTTL", "turn")
	}
}

func TestSlidingWindowBurst(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c0 := newGoRedis(t, s, nil)
	end := windowEnd(t, c0, hourMs, boundaryMargin)
	w := hourMs * msNs
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		// With an empty previous window the count is the current one; the
		// state lasts until the end of the next window, where the current
		// count still weighs.
		reset := func(b bracket) span { return b.until(t, end+w, msNs) }

		k := p + "burst"
		for n := int64(1); n <= 5; n++ {
			timedRow(t, c, func(b bracket) row { return win(1, 5-n, exactly(0), reset(b)) }, "RL.SLIDING", k, 5, hourMs)
		}
		// Denied until the next window has gone far enough that 5 units,
		// weighted by what is left of it, leave room for 1: 1/5 into it.
		retryAt := slidingRetryAt(end, w, 5, 1, 5)
		if retryAt != end+w/5 {
			t.Fatalf("slidingRetryAt = %d, want end + w/5", retryAt-end)
		}
		for range 3 {
			timedRow(t, c, func(b bracket) row { return win(0, 0, b.until(t, retryAt, msNs), reset(b)) }, "RL.SLIDING", k, 5, hourMs)
		}
		timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), reset(b)) }, "RL.SLIDING", k, 5, hourMs, 0)
		timedRow(t, c, func(b bracket) row { return win(0, 0, exactly(-1), reset(b)) }, "RL.SLIDING", k, 5, hourMs, 6)

		k = p + "pipelined"
		cmds := make([][]any, 60)
		for i := range cmds {
			cmds[i] = []any{"RL.SLIDING", k, 50, hourMs}
		}
		got, b := timedRows(t, c, cmds...)
		retry50 := b.until(t, slidingRetryAt(end, w, 50, 1, 50), msNs)
		for i := range got {
			want := win(1, int64(49-i), exactly(0), reset(b))
			if i >= 50 {
				want = win(0, 0, retry50, reset(b))
			}
			checkRow(t, cmds[i], got[i], want)
		}

		k = p + "cost"
		timedRow(t, c, func(b bracket) row { return win(1, 3, exactly(0), reset(b)) }, "RL.SLIDING", k, 5, hourMs, 2)
		// 2 counted, 4 asked: allowed once 2, weighted, leaves 1: half way
		// into the next window.
		timedRow(t, c, func(b bracket) row { return win(0, 3, b.until(t, end+w/2, msNs), reset(b)) }, "RL.SLIDING", k, 5, hourMs, 4)
		timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), reset(b)) }, "RL.SLIDING", k, 5, hourMs, 3)

		k = p + "none"
		wantRow(t, c, ex(1, 5, 0, 0), "RL.SLIDING", k, 5, hourMs, 0)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.SLIDING", k, 5, hourMs, 6)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.SLIDING", k, 5, hourMs, "9223372036854775807")
		wantInt(t, c, 0, "EXISTS", k)

		// Another window length sees an empty state.
		k = p + "burst"
		wantRow(t, c, ex(1, 5, 0, 0), "RL.SLIDING", k, 5, hourMs*3/2, 0)
		wantReply(t, c, "rl-sliding", "TYPE", k)
	}
	stillBefore(t, c0, end)
}

// TestSlidingWeighsPreviousWindow: after a window turns, the previous
// window's count weighs by the part of it still inside the sliding window.
// Windows of 2 s; the test waits for the middle of the next window by
// polling TIME, and checks the weight over the TIME bracket of the call.
func TestSlidingWeighsPreviousWindow(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	const (
		wMs   = int64(2000)
		limit = int64(10)
	)
	w := wMs * msNs
	end := windowEnd(t, c, wMs, time.Second)
	got, b := timedRows(t, c, []any{"RL.SLIDING", "weigh", limit, wMs, limit}, []any{"RL.SLIDING", "weigh", limit, wMs})
	checkRow(t, []any{"RL.SLIDING", "weigh", limit, wMs, limit}, got[0], win(1, 0, exactly(0), b.until(t, end+w, msNs)))
	checkRow(t, []any{"RL.SLIDING", "weigh", limit, wMs}, got[1],
		win(0, 0, b.until(t, slidingRetryAt(end, w, limit, 1, limit), msNs), b.until(t, end+w, msNs)))

	// count at e ns into the next window: ceil(limit*(w-e)/w).
	count := func(e int64) int64 { return divUp(limit*(w-e), w) }
	// remaining over a bracket: the count falls as time passes.
	left := func(b bracket, took int64) span {
		return span{limit - count(b.lo-end) - took, limit - count(b.hi-end) - took}
	}
	waitServerTime(t, c, end+w/2)
	peek := timedRow(t, c, func(b bracket) row { return row{exactly(1), left(b, 0), exactly(0), b.until(t, end+w, msNs)} }, "RL.SLIDING", "weigh", limit, wMs, 0)
	rem := peek[1]
	if rem >= limit {
		t.Errorf("half way into the next window %d of %d are left: the previous window's count did not weigh", rem, limit)
	}
	// What the peek reported can be taken: the weight only falls.
	got, b = timedRows(t, c, []any{"RL.SLIDING", "weigh", limit, wMs, rem})
	checkRow(t, []any{"RL.SLIDING", "weigh", limit, wMs, rem}, got[0], row{exactly(1), left(b, rem), exactly(0), b.until(t, end+2*w, msNs)})
}

func TestLogBurst(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		// An allowed call's reset is exactly the window: its entry is the
		// newest. Denied calls wait for the oldest entry that must leave.
		k := p + "burst"
		for n := int64(1); n <= 5; n++ {
			wantRow(t, c, ex(1, 5-n, 0, hourMs), "RL.LOG", k, 5, hourMs)
		}
		for range 3 {
			wantRow(t, c, win(0, 0, aged(hourMs), aged(hourMs)), "RL.LOG", k, 5, hourMs)
		}
		wantRow(t, c, win(1, 0, exactly(0), aged(hourMs)), "RL.LOG", k, 5, hourMs, 0)
		wantRow(t, c, win(0, 0, exactly(-1), aged(hourMs)), "RL.LOG", k, 5, hourMs, 6)

		k = p + "pipelined"
		cmds := make([][]any, 60)
		for i := range cmds {
			cmds[i] = []any{"RL.LOG", k, 50, hourMs}
		}
		got, b := timedRows(t, c, cmds...)
		for i := range got {
			want := ex(1, int64(49-i), 0, hourMs)
			if i >= 50 {
				// The oldest entry and the newest are both in the bracket.
				inWin := msSpan(hourMs*msNs-(b.hi-b.lo), hourMs*msNs)
				want = win(0, 0, inWin, inWin)
			}
			checkRow(t, cmds[i], got[i], want)
		}

		k = p + "cost"
		wantRow(t, c, ex(1, 3, 0, hourMs), "RL.LOG", k, 5, hourMs, 2)
		wantRow(t, c, win(0, 3, aged(hourMs), aged(hourMs)), "RL.LOG", k, 5, hourMs, 4)
		wantRow(t, c, ex(1, 0, 0, hourMs), "RL.LOG", k, 5, hourMs, 3)

		k = p + "none"
		wantRow(t, c, ex(1, 5, 0, 0), "RL.LOG", k, 5, hourMs, 0)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.LOG", k, 5, hourMs, 6)
		wantRow(t, c, ex(0, 5, -1, 0), "RL.LOG", k, 5, hourMs, "9223372036854775807")
		wantInt(t, c, 0, "EXISTS", k)

		// Another window length re-reads the same entries (engine/DESIGN.md,
		// a changed limit on live keys): the five of the last hour are also
		// in the last two hours, so a two-hour window is full.
		k = p + "burst"
		wantRow(t, c, win(0, 0, aged(2*hourMs), aged(2*hourMs)), "RL.LOG", k, 5, 2*hourMs)
		wantRow(t, c, win(1, 0, exactly(0), aged(hourMs)), "RL.LOG", k, 5, hourMs, 0)
		wantReply(t, c, "rl-log", "TYPE", k)
	}
}

// TestLogLimitMaximum: RL.LOG keeps one entry per unit, so its limit is
// bounded (100000); the bound itself works.
func TestLogLimitMaximum(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	wantErr(t, c, errLogLimitMax, "RL.LOG", "big", maxLogLimit+1, hourMs)
	wantErr(t, c, errLogLimitMax, "RL.LOG", "big", maxLimit, hourMs)
	wantErr(t, c, errLogLimitMax, "RL.LOG", "big", "9223372036854775807", hourMs, 0)
	wantInt(t, c, 0, "EXISTS", "big")
	wantRow(t, c, ex(1, 0, 0, hourMs), "RL.LOG", "big", maxLogLimit, hourMs, maxLogLimit)
	wantRow(t, c, win(0, 0, aged(hourMs), aged(hourMs)), "RL.LOG", "big", maxLogLimit, hourMs)
	wantRow(t, c, win(0, 0, exactly(-1), aged(hourMs)), "RL.LOG", "big", maxLogLimit, hourMs, maxLogLimit+1)
	wantRow(t, c, ex(1, maxLogLimit-1, 0, hourMs), "RL.LOG", "big2", maxLogLimit, hourMs)
	wantInt(t, c, 2, "DBSIZE")
}

// TestLogWindowSlides: the log is exact in every window of window_ms, not
// aligned: an entry leaves window_ms after it was written, and a denied
// call's retry is when the entry it waits for leaves. Windows of 2 s; the
// test waits by polling TIME and checks over TIME brackets.
func TestLogWindowSlides(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	const wMs = int64(2000)
	w := wMs * msNs
	one := []any{"RL.LOG", "slide", 3, wMs}
	two := []any{"RL.LOG", "slide", 3, wMs, 2}

	// t1: one entry.
	got, b1 := timedRows(t, c, one)
	checkRow(t, one, got[0], ex(1, 2, 0, wMs))
	// t2, half a window later: two more, then full; the retry waits for t1's entry.
	waitServerTime(t, c, b1.hi+w/2)
	got, b2 := timedRows(t, c, two, one)
	if b2.hi >= b1.lo+w {
		t.Fatalf("the calls at t2 ended %v after t1: the test assumed less than a window", time.Duration(b2.hi-b1.lo))
	}
	checkRow(t, two, got[0], ex(1, 0, 0, wMs))
	checkRow(t, one, got[1], win(0, 0, msSpan(b1.lo+w-b2.hi, b1.hi+w-b2.lo), msSpan(w-(b2.hi-b2.lo), w)))

	// t3, once t1's entry has left: one passes; t2's entries still count.
	waitServerTime(t, c, b1.hi+w)
	got, b3 := timedRows(t, c, one, one)
	if b3.hi >= b2.lo+w {
		t.Fatalf("the calls at t3 ended %v after t2: the test assumed less than a window", time.Duration(b3.hi-b2.lo))
	}
	checkRow(t, one, got[0], ex(1, 0, 0, wMs))
	checkRow(t, one, got[1], win(0, 0, msSpan(b2.lo+w-b3.hi, b2.hi+w-b3.lo), msSpan(w-(b3.hi-b3.lo), w)))

	// Once the newest entry has left, the key is gone.
	if n, b := timedInt(t, c, "PTTL", "slide"); !msSpan(b3.lo+w-b.hi, b3.hi+w-b.lo).has(n) {
		t.Errorf("PTTL slide = %d, want %v", n, msSpan(b3.lo+w-b.hi, b3.hi+w-b.lo))
	}
	waitServerTime(t, c, b3.hi+w)
	wantInt(t, c, 0, "EXISTS", "slide")
}

// TestFixedSlidingLogErrors: arguments of the three window commands, and
// the largest values they accept.
func TestFixedSlidingLogErrors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		for _, cmd := range []string{"RL.FIXED", "RL.SLIDING", "RL.LOG"} {
			arity := "ERR wrong number of arguments for '" + strings.ToLower(cmd) + "' command"
			tooMany := errLimitMax
			if cmd == "RL.LOG" {
				tooMany = errLogLimitMax
			}
			for _, tc := range []struct {
				want string
				args []any // after the command
			}{
				{arity, nil},
				{arity, []any{"k"}},
				{arity, []any{"k", 5}},
				{errSyntaxTxt, []any{"k", 5, 1000, 1, 1}},
				{errNotInt, []any{"k", "x", 1000}},
				{errNotInt, []any{"k", 5, "x"}},
				{errNotInt, []any{"k", 5, 1000, "x"}},
				{errNotInt, []any{"k", "5.0", 1000}},
				{errNotInt, []any{"k", 5, "1e3"}},
				{errNotInt, []any{"k", 5, 1000, ""}},
				{errNotInt, []any{"k", "9223372036854775808", 1000}},
				{errNotInt, []any{"k", 5, "-9223372036854775809"}},
				{errLimit, []any{"k", 0, 1000}},
				{errLimit, []any{"k", -1, 1000}},
				{errLimit, []any{"k", 0, 0, -1}}, // limit first
				{errWindow, []any{"k", 5, 0}},
				{errWindow, []any{"k", 5, -1000}},
				{errWindow, []any{"k", 5, 0, -1}}, // window before cost
				{errWindowMax, []any{"k", 5, maxWindowMs + 1}},
				{errWindowMax, []any{"k", 5, "9223372036854775807"}},
				{tooMany, []any{"k", maxLimit + 1, 1000}},
				{tooMany, []any{"k", "9223372036854775807", 1000}},
				{errCost, []any{"k", 5, 1000, -1}},
				{errCost, []any{"k", 5, 1000, "-9223372036854775808"}},
			} {
				wantErr(t, c, tc.want, append([]any{cmd}, tc.args...)...)
			}
			wantInt(t, c, 0, "EXISTS", "k")
		}
	}
}

// TestFixedSlidingLogHugeValues: the largest limits, costs and windows
// are exact (no wrapped number). The largest window, 2^60 ns, holds
// today in [2^60 ns, 2^61 ns) since the epoch: its end is in 2043.
func TestFixedSlidingLogHugeValues(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	end := windowEnd(t, c, hourMs, boundaryMargin)
	w := hourMs * msNs

	// Limit 2^60, cost 2^60: allowed once, then even 1 is denied.
	timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), b.until(t, end, msNs)) }, "RL.FIXED", "hf", maxLimit, hourMs, maxLimit)
	timedRow(t, c, func(b bracket) row { return win(0, 0, b.until(t, end, msNs), b.until(t, end, msNs)) }, "RL.FIXED", "hf", maxLimit, hourMs)
	timedRow(t, c, func(b bracket) row { return win(0, 0, exactly(-1), b.until(t, end, msNs)) }, "RL.FIXED", "hf", maxLimit, hourMs, "9223372036854775807")
	wantRow(t, c, ex(1, maxLimit, 0, 0), "RL.FIXED", "hf2", maxLimit, hourMs, 0)
	timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), b.until(t, end+w, msNs)) }, "RL.SLIDING", "hs", maxLimit, hourMs, maxLimit)
	// 2^60 units weighted by (w - e)/w fit 2^60-1 once e is 1 ns.
	if at := slidingRetryAt(end, w, maxLimit, 1, maxLimit); at != end+1 {
		t.Fatalf("slidingRetryAt for 2^60 = end%+d, want end+1", at-end)
	}
	timedRow(t, c, func(b bracket) row { return win(0, 0, b.until(t, end+1, msNs), b.until(t, end+w, msNs)) }, "RL.SLIDING", "hs", maxLimit, hourMs)
	timedRow(t, c, func(b bracket) row { return win(0, 0, exactly(-1), b.until(t, end+w, msNs)) }, "RL.SLIDING", "hs", maxLimit, hourMs, "9223372036854775807")

	// The largest window, limit 1.
	wm := maxWindowMs * msNs
	endMax := func(b bracket) int64 { return b.lo - b.lo%wm + wm }
	timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), b.until(t, endMax(b), msNs)) }, "RL.FIXED", "wf", 1, maxWindowMs)
	timedRow(t, c, func(b bracket) row { return win(0, 0, b.until(t, endMax(b), msNs), b.until(t, endMax(b), msNs)) }, "RL.FIXED", "wf", 1, maxWindowMs)
	timedRow(t, c, func(b bracket) row { return win(1, 0, exactly(0), b.until(t, endMax(b)+wm, msNs)) }, "RL.SLIDING", "ws", 1, maxWindowMs)
	// 1 unit weighs 1 until the window after the next.
	timedRow(t, c, func(b bracket) row {
		return win(0, 0, b.until(t, endMax(b)+wm, msNs), b.until(t, endMax(b)+wm, msNs))
	}, "RL.SLIDING", "ws", 1, maxWindowMs)
	wantRow(t, c, ex(1, 0, 0, maxWindowMs), "RL.LOG", "wl", 1, maxWindowMs)
	wantRow(t, c, win(0, 0, aged(maxWindowMs), aged(maxWindowMs)), "RL.LOG", "wl", 1, maxWindowMs)
	for k, at := range map[string]func(b bracket) int64{
		"wf": endMax,
		"ws": func(b bracket) int64 { return endMax(b) + wm },
		"hf": func(bracket) int64 { return end },
		"hs": func(bracket) int64 { return end + w },
	} {
		if n, b := timedInt(t, c, "PTTL", k); !b.until(t, at(b), msNs).has(n) {
			t.Errorf("PTTL %s = %d, want %v", k, n, b.until(t, at(b), msNs))
		}
	}
	if n := doInt(t, c, "PTTL", "wl"); !aged(maxWindowMs).has(n) {
		t.Errorf("PTTL wl = %d, want %v", n, aged(maxWindowMs))
	}
	wantInt(t, c, 5, "DBSIZE")
	stillBefore(t, c, end)
}

// --- RL.SHAPE ---

// TestShapeQueue: admitted calls wait delay_ms; each admitted unit adds
// 1/rate to the next delay; the queue never holds more than capacity;
// beyond it calls are rejected with delay -1.
func TestShapeQueue(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		shaped := func(admitted int64, delay span, queued int64, reset span) row {
			return row{exactly(admitted), delay, exactly(queued), reset}
		}

		// Capacity 5 at 0.001/s: one unit served per 1000 s.
		k := p + "queue"
		wantRow(t, c, ex(1, 0, 1, periodMs), "RL.SHAPE", k, 5, slowRate)
		prev := int64(0)
		for n := int64(2); n <= 5; n++ {
			got := wantRow(t, c, shaped(1, aged((n-1)*periodMs), n, aged(n*periodMs)), "RL.SHAPE", k, 5, slowRate)
			if d := got[1] - prev; d < periodMs-slackMs || d > periodMs+1 {
				t.Errorf("delay grew by %d ms from call %d to %d, want 1/rate = %d ms", d, n-1, n, periodMs)
			}
			prev = got[1]
		}
		for range 3 {
			wantRow(t, c, shaped(0, exactly(-1), 5, aged(5*periodMs)), "RL.SHAPE", k, 5, slowRate)
		}
		// cost 0 reports the delay a call would get; cost > capacity never passes.
		wantRow(t, c, shaped(1, aged(5*periodMs), 5, aged(5*periodMs)), "RL.SHAPE", k, 5, slowRate, 0)
		wantRow(t, c, shaped(0, exactly(-1), 5, aged(5*periodMs)), "RL.SHAPE", k, 5, slowRate, 6)
		wantReply(t, c, "rl-shape", "TYPE", k)
		if ms := doInt(t, c, "PTTL", k); !aged(5 * periodMs).has(ms) {
			t.Errorf("PTTL %s = %d, want %v", k, ms, aged(5*periodMs))
		}

		// Cost 2 at 0.004/s (250 s a unit), capacity 8: delays step by 500 s.
		k = p + "cost"
		const unit = int64(250_000)
		wantRow(t, c, ex(1, 0, 2, 2*unit), "RL.SHAPE", k, 8, 0.004, 2)
		for n := int64(2); n <= 4; n++ {
			wantRow(t, c, shaped(1, aged(2*(n-1)*unit), 2*n, aged(2*n*unit)), "RL.SHAPE", k, 8, 0.004, 2)
		}
		wantRow(t, c, shaped(0, exactly(-1), 8, aged(8*unit)), "RL.SHAPE", k, 8, 0.004, 2)
		wantRow(t, c, shaped(0, exactly(-1), 8, aged(8*unit)), "RL.SHAPE", k, 8, 0.004, 1)

		// A pipelined burst of 30 at capacity 7: exactly 7 admitted, the
		// queue never above 7.
		k = p + "pipelined"
		cmds := make([][]any, 30)
		for i := range cmds {
			cmds[i] = []any{"RL.SHAPE", k, 7, slowRate}
		}
		got, _ := timedRows(t, c, cmds...)
		for i := range got {
			want := row{exactly(1), aged(int64(i) * periodMs), exactly(int64(i) + 1), aged(int64(i+1) * periodMs)}
			if i >= 7 {
				want = row{exactly(0), exactly(-1), exactly(7), aged(7 * periodMs)}
			}
			checkRow(t, cmds[i], got[i], want)
		}

		// On a missing key cost 0 and cost > capacity create nothing.
		k = p + "none"
		wantRow(t, c, ex(1, 0, 0, 0), "RL.SHAPE", k, 5, slowRate, 0)
		wantRow(t, c, ex(0, -1, 0, 0), "RL.SHAPE", k, 5, slowRate, 6)
		wantRow(t, c, ex(0, -1, 0, 0), "RL.SHAPE", k, 5, slowRate, "9223372036854775807")
		wantInt(t, c, 0, "EXISTS", k)
	}
}

func TestShapeErrors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		for _, tc := range []struct {
			want string
			args []any
		}{
			{"ERR wrong number of arguments for 'rl.shape' command", []any{"RL.SHAPE"}},
			{"ERR wrong number of arguments for 'rl.shape' command", []any{"RL.SHAPE", "k", 5}},
			{errSyntaxTxt, []any{"RL.SHAPE", "k", 5, 1, 1, 1}},
			{errNotInt, []any{"RL.SHAPE", "k", "x", 1}},
			{errNotInt, []any{"RL.SHAPE", "k", "5.0", 1}},
			{errNotInt, []any{"RL.SHAPE", "k", 5, 1, "x"}},
			{errNotFloatTxt, []any{"RL.SHAPE", "k", 5, "x"}},
			{errNotFloatTxt, []any{"RL.SHAPE", "k", 5, "nan"}},
			{errCapacity, []any{"RL.SHAPE", "k", 0, 1}},
			{errCapacity, []any{"RL.SHAPE", "k", -1, 1}},
			{errRate, []any{"RL.SHAPE", "k", 5, 0}},
			{errRate, []any{"RL.SHAPE", "k", 5, -1}},
			{errRate, []any{"RL.SHAPE", "k", 5, "inf"}},
			{errCost, []any{"RL.SHAPE", "k", 5, 1, -1}},
			{errTooLong, []any{"RL.SHAPE", "k", 2, "1e-9"}},
			{errTooLong, []any{"RL.SHAPE", "k", maxLimit + 1, "1e9"}},
			{errTooLong, []any{"RL.SHAPE", "k", "9223372036854775807", 1}},
		} {
			wantErr(t, c, tc.want, tc.args...)
		}
		wantInt(t, c, 0, "EXISTS", "k")
	}
}

// --- Kinds: WRONGTYPE, TYPE, PTTL, EXISTS, DEL, expiry ---

// kindCmd is a command template; the key goes in place of "{}".
type kindCmd []any

func (k kindCmd) on(key string) []any {
	out := slices.Clone([]any(k))
	for i, a := range out {
		if a == "{}" {
			out[i] = key
		}
	}
	return out
}

// kindUses lists, per TYPE name, commands of that kind: plain, a cost 0
// peek, and a cost above the limit.
var kindUses = map[string][]kindCmd{
	"rl-gcra": {
		{"RL.ALLOW", "{}", 5, slowRate}, {"RL.ALLOW", "{}", 5, slowRate, 0}, {"RL.PEEK", "{}", 5, slowRate},
		{"RL.ALLOW", "{}", 5, slowRate, 6},
		{"CL.THROTTLE", "{}", 4, 1, 1000}, {"CL.THROTTLE", "{}", 4, 1, 1000, 0}, {"CL.THROTTLE", "{}", 4, 1, 1000, 6},
		{"GCRA", "{}", 4, 1, 1000}, {"GCRA", "{}", 4, 1, 1000, "TOKENS", 6},
	},
	"rl-fixed":   {{"RL.FIXED", "{}", 5, hourMs}, {"RL.FIXED", "{}", 5, hourMs, 0}, {"RL.FIXED", "{}", 5, hourMs, 6}},
	"rl-sliding": {{"RL.SLIDING", "{}", 5, hourMs}, {"RL.SLIDING", "{}", 5, hourMs, 0}, {"RL.SLIDING", "{}", 5, hourMs, 6}},
	"rl-log":     {{"RL.LOG", "{}", 5, hourMs}, {"RL.LOG", "{}", 5, hourMs, 0}, {"RL.LOG", "{}", 5, hourMs, 6}},
	"rl-shape":   {{"RL.SHAPE", "{}", 5, slowRate}, {"RL.SHAPE", "{}", 5, slowRate, 0}, {"RL.SHAPE", "{}", 5, slowRate, 6}},
}

func TestWrongTypeAcrossKinds(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c0 := newGoRedis(t, s, nil)
	end := windowEnd(t, c0, hourMs, boundaryMargin)
	// Each key takes one unit through a command of its kind; peek shows
	// the state, which no WRONGTYPE may change.
	keys := []struct {
		key, typ string
		make     kindCmd
		peek     kindCmd
		after    row
	}{
		{"allow", "rl-gcra", kindUses["rl-gcra"][0], kindUses["rl-gcra"][1], win(1, 4, exactly(0), aged(periodMs))},
		{"throttle", "rl-gcra", kindUses["rl-gcra"][4], kindUses["rl-gcra"][1], win(1, 4, exactly(0), aged(periodMs))},
		{"gcra", "rl-gcra", kindUses["rl-gcra"][7], kindUses["rl-gcra"][1], win(1, 4, exactly(0), aged(periodMs))},
		{"fixed", "rl-fixed", kindUses["rl-fixed"][0], kindUses["rl-fixed"][1], win(1, 4, exactly(0), span{1, hourMs})},
		{"sliding", "rl-sliding", kindUses["rl-sliding"][0], kindUses["rl-sliding"][1], win(1, 4, exactly(0), span{hourMs, 2 * hourMs})},
		{"log", "rl-log", kindUses["rl-log"][0], kindUses["rl-log"][1], win(1, 4, exactly(0), aged(hourMs))},
		{"shape", "rl-shape", kindUses["rl-shape"][0], kindUses["rl-shape"][1], row{exactly(1), aged(periodMs), exactly(1), aged(periodMs)}},
	}
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		p := fmt.Sprintf("resp%d:", proto)
		for _, k := range keys {
			do(t, c, k.make.on(p+k.key)...)
		}
		for _, k := range keys {
			key := p + k.key
			for typ, uses := range kindUses {
				if typ == k.typ {
					continue
				}
				for _, u := range uses {
					wantErr(t, c, wrongType, u.on(key)...)
				}
			}
			wantReply(t, c, k.typ, "TYPE", key)
			wantRow(t, c, k.after, k.peek.on(key)...)
		}

		// In a pipeline a WRONGTYPE answers its own command only.
		ctx := context.Background()
		pipe := c.Pipeline()
		cmds := []*redis.Cmd{
			pipe.Do(ctx, "RL.ALLOW", p+"allow", 5, slowRate, 0),
			pipe.Do(ctx, "RL.FIXED", p+"allow", 5, hourMs),
			pipe.Do(ctx, "RL.SHAPE", p+"fixed", 5, slowRate),
			pipe.Do(ctx, "RL.FIXED", p+"fixed", 5, hourMs, 0),
			pipe.Do(ctx, "CL.THROTTLE", p+"log", 4, 1, 1000, 0),
			pipe.Do(ctx, "RL.LOG", p+"log", 5, hourMs, 0),
		}
		pipe.Exec(ctx)
		for i, cmd := range cmds {
			_, err := cmd.Result()
			var rerr redis.Error
			wantWT := i == 1 || i == 2 || i == 4
			if wantWT && (!errors.As(err, &rerr) || err.Error() != wrongType) {
				t.Errorf("pipelined %v: %v, want %s", cmd.Args(), err, wrongType)
			}
			if !wantWT && err != nil {
				t.Errorf("pipelined %v: %v", cmd.Args(), err)
			}
		}
	}
	stillBefore(t, c0, end)
}

// TestAlgorithmKeyspace: TYPE, PTTL, TTL, EXISTS, DEL, UNLINK, RL.RESET
// and DBSIZE on every kind.
func TestAlgorithmKeyspace(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	end := windowEnd(t, c, hourMs, boundaryMargin)
	w := hourMs * msNs
	toEnd := func(bracket) int64 { return end }
	toNext := func(bracket) int64 { return end + w }
	for _, k := range []struct {
		key, typ string
		args     []any
		pttl     span                // when at is nil
		at       func(bracket) int64 // the instant the state is empty again
	}{
		{"ks:allow", "rl-gcra", []any{"RL.ALLOW", "ks:allow", 5, slowRate, 2}, aged(2 * periodMs), nil},
		{"ks:throttle", "rl-gcra", []any{"CL.THROTTLE", "ks:throttle", 4, 1, 1000}, aged(periodMs), nil},
		{"ks:gcra", "rl-gcra", []any{"GCRA", "ks:gcra", 4, 1, 1000, "TOKENS", 3}, aged(3 * periodMs), nil},
		{"ks:fixed", "rl-fixed", []any{"RL.FIXED", "ks:fixed", 5, hourMs}, span{}, toEnd},
		{"ks:sliding", "rl-sliding", []any{"RL.SLIDING", "ks:sliding", 5, hourMs}, span{}, toNext},
		{"ks:log", "rl-log", []any{"RL.LOG", "ks:log", 5, hourMs}, aged(hourMs), nil},
		{"ks:shape", "rl-shape", []any{"RL.SHAPE", "ks:shape", 5, slowRate, 2}, aged(2 * periodMs), nil},
	} {
		do(t, c, k.args...)
		wantReply(t, c, k.typ, "TYPE", k.key)
		wantInt(t, c, 1, "EXISTS", k.key)
		pttl, b := timedInt(t, c, "PTTL", k.key)
		want := k.pttl
		if k.at != nil {
			want = b.until(t, k.at(b), msNs)
		}
		if !want.has(pttl) {
			t.Errorf("PTTL %s = %d, want %v", k.key, pttl, want)
		}
		ttl, b := timedInt(t, c, "TTL", k.key)
		wantS := span{divUp(k.pttl.lo, 1000), divUp(k.pttl.hi, 1000)}
		if k.at != nil {
			wantS = b.until(t, k.at(b), secNs)
		}
		if !wantS.has(ttl) {
			t.Errorf("TTL %s = %d, want %v", k.key, ttl, wantS)
		}
	}
	all := []any{"ks:allow", "ks:throttle", "ks:gcra", "ks:fixed", "ks:sliding", "ks:log", "ks:shape"}
	wantInt(t, c, 7, append([]any{"EXISTS", "ks:missing"}, all...)...)
	wantInt(t, c, 2, "EXISTS", "ks:log", "ks:log")
	wantInt(t, c, 7, "DBSIZE")
	wantReply(t, c, "none", "TYPE", "ks:missing")
	wantInt(t, c, -2, "PTTL", "ks:missing")
	wantInt(t, c, -2, "TTL", "ks:missing")

	wantInt(t, c, 2, "DEL", "ks:allow", "ks:fixed", "ks:missing")
	wantInt(t, c, 2, "RL.RESET", "ks:sliding", "ks:log", "ks:fixed")
	wantInt(t, c, 1, "UNLINK", "ks:shape")
	wantInt(t, c, 2, "DEL", "ks:throttle", "ks:gcra")
	wantInt(t, c, 0, append([]any{"EXISTS"}, all...)...)
	wantInt(t, c, 0, "DBSIZE")
	for _, k := range all {
		wantReply(t, c, "none", "TYPE", k)
		wantInt(t, c, -2, "PTTL", k)
	}
	// A deleted key can come back as another kind, fresh.
	timedRow(t, c, func(b bracket) row { return win(1, 4, exactly(0), b.until(t, end, msNs)) }, "RL.FIXED", "ks:allow", 5, hourMs)
	wantRow(t, c, ex(1, 4, 0, hourMs), "RL.LOG", "ks:fixed", 5, hourMs)
	wantRow(t, c, ex(1, 0, 1, periodMs), "RL.SHAPE", "ks:log", 5, slowRate)
	wantReply(t, c, "rl-fixed", "TYPE", "ks:allow")
	wantReply(t, c, "rl-log", "TYPE", "ks:fixed")
	wantReply(t, c, "rl-shape", "TYPE", "ks:log")
	stillBefore(t, c, end)
}

// TestAlgorithmKeysExpire: every kind's key disappears once its state is
// empty again, and may then be used by another kind. Periods of 1 s; the
// test polls EXISTS.
func TestAlgorithmKeysExpire(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	windowEnd(t, c, 1000, 500*time.Millisecond) // RL.FIXED's key lives at least 500 ms
	creates := [][]any{
		{"RL.ALLOW", "e:allow", 1, 1},
		{"CL.THROTTLE", "e:throttle", 0, 1, 1},
		{"GCRA", "e:gcra", 0, 1, 1},
		{"RL.FIXED", "e:fixed", 1, 1000},
		{"RL.SLIDING", "e:sliding", 1, 1000},
		{"RL.LOG", "e:log", 1, 1000},
		{"RL.SHAPE", "e:shape", 1, 1},
	}
	// Create every key, then PTTL each and EXISTS all, in one pipeline.
	keys := make([]any, len(creates))
	ctx := context.Background()
	pipe := c.Pipeline()
	var pttls []*redis.Cmd
	for i, args := range creates {
		keys[i] = args[1]
		pipe.Do(ctx, args...)
		pttls = append(pttls, pipe.Do(ctx, "PTTL", args[1]))
	}
	exists := pipe.Do(ctx, append([]any{"EXISTS"}, keys...)...)
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatalf("creating keys: %v", err)
	}
	for i, p := range pttls {
		limit := int64(1000)
		if creates[i][0] == "RL.SLIDING" {
			limit = 2000 // the count weighs through the next window
		}
		if ms, err := p.Int64(); err != nil || ms < 1 || ms > limit {
			t.Errorf("PTTL %v = %d ms (%v), want 1..%d", keys[i], ms, err, limit)
		}
	}
	if n, err := exists.Int64(); err != nil || n != int64(len(keys)) {
		t.Errorf("EXISTS = %d (%v) right after creating %d keys", n, err, len(keys))
	}
	waitFor(t, "every key to expire", func() bool {
		return doInt(t, c, append([]any{"EXISTS"}, keys...)...) == 0
	})
	wantInt(t, c, 0, "DBSIZE")
	for _, k := range keys {
		wantReply(t, c, "none", "TYPE", k)
	}
	// An expired key is free for any kind.
	wantRow(t, c, ex(1, 0, 1, periodMs), "RL.SHAPE", "e:allow", 5, slowRate)
	wantRow(t, c, ex(0, 5, 4, -1, 1000), "CL.THROTTLE", "e:shape", 4, 1, 1000)
	wantReply(t, c, "rl-shape", "TYPE", "e:allow")
	wantReply(t, c, "rl-gcra", "TYPE", "e:shape")
}

// --- redis-cli and COMMAND ---

// TestAlgorithmRedisCLI runs every command through redis-cli. Output that
// counts down is parsed and checked against a range; the rest is exact.
func TestAlgorithmRedisCLI(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	end := windowEnd(t, c, hourMs, boundaryMargin)
	w := hourMs * msNs
	hour := strconv.FormatInt(hourMs, 10)

	exact := func(args []string, want string) {
		t.Helper()
		out, errOut, code := cli(t, s, "", args...)
		if out != want || errOut != "" || code != 0 {
			t.Errorf("redis-cli %q = %q (stderr %q, status %d), want %q", args, out, errOut, code, want)
		}
	}
	// ranged runs redis-cli between two TIME readings and checks that it
	// printed one integer a line, within want(bracket).
	ranged := func(want func(b bracket) row, args ...string) {
		t.Helper()
		lo := serverTime(t, c)
		out, errOut, code := cli(t, s, "", args...)
		b := bracket{lo, serverTime(t, c) + 999}
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		got := make([]int64, len(lines))
		var printed strings.Builder
		for i, l := range lines {
			n, err := strconv.ParseInt(l, 10, 64)
			if err != nil {
				t.Errorf("redis-cli %q printed %q, want integers", args, out)
				return
			}
			got[i] = n
			fmt.Fprintf(&printed, "%d\n", n)
		}
		if w := want(b); printed.String() != out || errOut != "" || code != 0 || !w.match(got) {
			t.Errorf("redis-cli %q = %q (stderr %q, status %d), want %v", args, out, errOut, code, w)
		}
	}
	fixed := func(v ...int64) func(bracket) row { return func(bracket) row { return ex(v...) } }

	exact([]string{"CL.THROTTLE", "cli:throttle", "4", "1", "1000"}, "0\n5\n4\n-1\n1000\n")
	exact([]string{"CL.THROTTLE", "cli:never", "4", "1", "1000", "6"}, "1\n5\n5\n-1\n0\n")
	exact([]string{"cl.throttle", "cli:never", "4", "1", "1000", "0"}, "0\n5\n5\n-1\n0\n")
	exact([]string{"-3", "CL.THROTTLE", "cli:throttle3", "4", "1", "1000"}, "0\n5\n4\n-1\n1000\n")
	ranged(func(bracket) row { return thr(0, 5, 3, exactly(-1), agedS(2000)) }, "CL.THROTTLE", "cli:throttle", "4", "1", "1000")
	exact([]string{"GCRA", "api:user:123", "5", "10", "60"}, "0\n6\n5\n-1\n6\n")
	ranged(func(bracket) row { return thr(0, 6, 4, exactly(-1), agedS(12)) }, "GCRA", "api:user:123", "5", "10", "60")
	exact([]string{"GCRA", "cli:gcra", "5", "10", "60", "TOKENS", "6"}, "0\n6\n0\n-1\n36\n")
	ranged(func(bracket) row { return thr(1, 6, 0, agedS(6), agedS(36)) }, "gcra", "cli:gcra", "5", "10", "60", "tokens", "1")
	// 10 per 1800.5 s: T = 180.05 s, rounded up to 181.
	exact([]string{"-3", "GCRA", "cli:gcra3", "5", "10", "1800.5"}, "0\n6\n5\n-1\n181\n")
	ranged(func(b bracket) row { return win(1, 4, exactly(0), b.until(t, end, msNs)) }, "RL.FIXED", "cli:fixed", "5", hour)
	ranged(func(b bracket) row { return win(1, 0, exactly(0), b.until(t, end, msNs)) }, "RL.FIXED", "cli:fixed", "5", hour, "4")
	ranged(func(b bracket) row { return win(0, 0, b.until(t, end, msNs), b.until(t, end, msNs)) }, "RL.FIXED", "cli:fixed", "5", hour)
	exact([]string{"RL.FIXED", "cli:fixed0", "5", hour, "6"}, "0\n5\n-1\n0\n")
	ranged(func(b bracket) row { return win(1, 4, exactly(0), b.until(t, end+w, msNs)) }, "RL.SLIDING", "cli:sliding", "5", hour)
	exact([]string{"RL.SLIDING", "cli:sliding0", "5", hour, "0"}, "1\n5\n0\n0\n")
	exact([]string{"RL.LOG", "cli:log", "5", hour}, "1\n4\n0\n3600000\n")
	exact([]string{"-3", "RL.LOG", "cli:log", "5", hour, "4"}, "1\n0\n0\n3600000\n")
	ranged(func(bracket) row { return win(0, 0, aged(hourMs), aged(hourMs)) }, "RL.LOG", "cli:log", "5", hour)
	exact([]string{"RL.SHAPE", "cli:shape", "5", "0.001"}, "1\n0\n1\n1000000\n")
	ranged(func(bracket) row { return row{exactly(1), aged(periodMs), exactly(2), aged(2 * periodMs)} }, "RL.SHAPE", "cli:shape", "5", "0.001")
	ranged(fixed(0, -1, 0, 0), "RL.SHAPE", "cli:shape0", "5", "0.001", "6")

	// Errors: redis-cli prints the text and an empty line.
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"CL.THROTTLE", "cli:z", "4", "0", "1"}, errZeroRates},
		{[]string{"CL.THROTTLE", "cli:z", "4", "1"}, "ERR wrong number of arguments for 'cl.throttle' command"},
		{[]string{"CL.THROTTLE", "cli:z", "4", "1", "x"}, errNotInt},
		{[]string{"GCRA", "cli:z", "-1", "10", "60"}, errPositive},
		{[]string{"GCRA", "cli:z", "5", "0", "60"}, errOneToMax},
		{[]string{"GCRA", "cli:z", "5", "10", "0"}, errPeriod},
		{[]string{"GCRA", "cli:z", "5", "10", "60", "TOKENS"}, "ERR Missing TOKENS value"},
		{[]string{"GCRA", "cli:z", "5", "10", "60", "TOKENS", "0"}, errOneToMax},
		{[]string{"GCRA", "cli:z", "5", "10", "60", "COST", "1"}, errSyntaxTxt},
		{[]string{"GCRA", "cli:z", "5", "10", "60", "TOKENS", "1", "x"}, "ERR wrong number of arguments for 'gcra' command"},
		{[]string{"RL.FIXED", "cli:z", "5", "0"}, errWindow},
		{[]string{"RL.SLIDING", "cli:z", "0", "1000"}, errLimit},
		{[]string{"RL.LOG", "cli:z", "100001", "1000"}, errLogLimitMax},
		{[]string{"RL.FIXED", "cli:z", "1152921504606846977", "1000"}, errLimitMax},
		{[]string{"RL.SLIDING", "cli:z", "5", "1152921504607"}, errWindowMax},
		{[]string{"RL.SHAPE", "cli:z", "0", "1"}, errCapacity},
		{[]string{"RL.FIXED", "cli:throttle", "5", hour}, wrongType},
		{[]string{"GCRA", "cli:fixed", "5", "10", "60"}, wrongType},
		{[]string{"RL.SHAPE", "cli:log", "5", "0.001"}, wrongType},
		{[]string{"CL.THROTTLE", "cli:shape", "4", "1", "1000", "0"}, wrongType},
		{[]string{"RL.LOG", "cli:sliding", "5", hour}, wrongType},
		{[]string{"RL.SLIDING", "cli:gcra", "5", hour}, wrongType},
	} {
		exact(tc.args, tc.want+"\n\n")
	}

	for key, typ := range map[string]string{
		"cli:throttle": "rl-gcra", "cli:gcra": "rl-gcra", "api:user:123": "rl-gcra", "cli:fixed": "rl-fixed",
		"cli:sliding": "rl-sliding", "cli:log": "rl-log", "cli:shape": "rl-shape", "cli:z": "none",
	} {
		exact([]string{"TYPE", key}, typ+"\n")
	}
	exact([]string{"EXISTS", "cli:z", "cli:never", "cli:fixed0", "cli:sliding0", "cli:shape0"}, "0\n")
	exact([]string{"EXISTS", "cli:throttle", "cli:fixed", "cli:sliding", "cli:log", "cli:shape"}, "5\n")
	exact([]string{"DEL", "cli:throttle", "cli:fixed", "cli:sliding", "cli:log", "cli:shape", "cli:z"}, "5\n")
	exact([]string{"PTTL", "cli:fixed"}, "-2\n")
	exact([]string{"DBSIZE"}, "4\n") // api:user:123, cli:gcra, cli:throttle3, cli:gcra3
	stillBefore(t, c, end)
}

func TestAlgorithmCommandInfo(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	arity := map[string]int8{"cl.throttle": -5, "gcra": -5, "rl.fixed": -4, "rl.sliding": -4, "rl.log": -4, "rl.shape": -4}
	names := []string{"cl.throttle", "gcra", "rl.fixed", "rl.sliding", "rl.log", "rl.shape"}
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		cmds, err := c.Command(ctx).Result()
		if err != nil {
			t.Fatalf("RESP%d: COMMAND: %v", proto, err)
		}
		for _, name := range names {
			ci := cmds[name]
			if ci == nil {
				t.Errorf("RESP%d: COMMAND lacks %s", proto, name)
				continue
			}
			if ci.Name != name || ci.Arity != arity[name] || ci.FirstKeyPos != 1 || ci.LastKeyPos != 1 || ci.StepCount != 1 ||
				ci.ReadOnly || !slices.Contains(ci.Flags, "write") {
				t.Errorf("RESP%d: COMMAND %s = %+v, want arity %d, keys 1 1 1, write", proto, name, ci, arity[name])
			}
		}

		// COMMAND INFO, in the order asked.
		args := []any{"COMMAND", "INFO"}
		for _, n := range names {
			args = append(args, strings.ToUpper(n))
		}
		infos, ok := do(t, c, args...).([]any)
		if !ok || len(infos) != len(names) {
			t.Fatalf("RESP%d: COMMAND INFO %v = %#v", proto, names, infos)
		}
		for i, info := range infos {
			e, ok := info.([]any)
			if !ok || len(e) < 6 || e[0] != names[i] || e[1] != int64(arity[names[i]]) || e[3] != int64(1) || e[4] != int64(1) || e[5] != int64(1) {
				t.Errorf("RESP%d: COMMAND INFO %s = %#v, want [%s %d flags 1 1 1 ...]", proto, names[i], info, names[i], arity[names[i]])
			}
		}

		// COMMAND GETKEYS: the key is the first argument.
		for _, a := range [][]any{
			{"CL.THROTTLE", "k1", 4, 1, 1000},
			{"CL.THROTTLE", "k1", 4, 1, 1000, 2},
			{"GCRA", "k1", 5, 10, 60},
			{"GCRA", "k1", 5, 10, 60, "TOKENS", 2},
			{"RL.FIXED", "k1", 5, 1000},
			{"RL.SLIDING", "k1", 5, 1000, 2},
			{"RL.LOG", "k1", 5, 1000},
			{"RL.SHAPE", "k1", 5, 1},
		} {
			got, err := c.CommandGetKeys(ctx, a...).Result()
			if err != nil || !slices.Equal(got, []string{"k1"}) {
				t.Errorf("RESP%d: COMMAND GETKEYS %v = %q, %v; want [k1]", proto, a, got, err)
			}
		}
	}
}
