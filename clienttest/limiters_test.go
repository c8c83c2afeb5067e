package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue 20: well-known limiters run unchanged against rlserver.

var npmMu sync.Mutex // one npm ci in clienttest/compat at a time

// compatNode makes sure node, npm and the given packages of
// clienttest/compat are there, running npm ci (which installs the versions
// package-lock.json pins) when a package is missing. Without node or npm
// the test is skipped, or fails under CI=true.
func compatNode(t *testing.T, pkgs ...string) {
	t.Helper()
	_, err := exec.LookPath("node")
	needCompat(t, "node (20 or later)", err, nil)
	_, err = exec.LookPath("npm")
	needCompat(t, "npm", err, nil)
	npmMu.Lock()
	defer npmMu.Unlock()
	for _, p := range pkgs {
		if _, err := os.Stat(filepath.Join("compat", "node_modules", p, "package.json")); err != nil {
			cmd := exec.Command("npm", "ci", "--no-audit", "--no-fund")
			cmd.Dir = "compat"
			out, err := cmd.CombinedOutput()
			needCompat(t, "npm ci in clienttest/compat", err, out)
			return
		}
	}
}

// redisClient returns a go-redis client (RESP2) for addr, closed at
// cleanup.
func redisClient(t testing.TB, addr string) *redis.Client {
	t.Helper()
	c := redis.NewClient(&redis.Options{Addr: addr, Protocol: 2})
	t.Cleanup(func() { c.Close() })
	return c
}

// rlfResults is what rate-limiter-flexible answered: each consume's
// result, how many were consumed and rejected, and limiter.get after them.
type rlfResults struct {
	Results []struct {
		OK              bool  `json:"ok"`
		RemainingPoints int64 `json:"remainingPoints"`
		MsBeforeNext    int64 `json:"msBeforeNext"`
		ConsumedPoints  int64 `json:"consumedPoints"`
	} `json:"results"`
	Consumed int `json:"consumed"`
	Rejected int `json:"rejected"`
	Get      *struct {
		ConsumedPoints int64 `json:"consumedPoints"`
		MsBeforeNext   int64 `json:"msBeforeNext"`
	} `json:"get"`
}

// rlfRun is what compat/rlf_nonatomic.js prints.
type rlfRun struct {
	Version string `json:"version"`
	IORedis string `json:"ioredis"`
	rlfResults
	Commands [][]string `json:"commands"`
}

// TestRateLimiterFlexible runs rate-limiter-flexible's
// RateLimiterRedisNonAtomic (the version package-lock.json pins, through
// ioredis in RESP2 and RESP3) against a real redis-server and against
// rlserver: a limiter of 10 points per 60 s consumed 13 times allows
// exactly the first 10 and rejects 3, with msBeforeNext in (0, 60000], on
// both, and the library sends both servers the same commands.
//
// What the library sends (lib/RateLimiterRedisNonAtomic.js, 11.4.0; the
// test records it by wrapping ioredis's sendCommand, since rlserver has no
// MONITOR, and checks it): every consume reads, then writes, each in its
// own MULTI,
//
//	MULTI; GET key; PTTL key; EXEC
//	MULTI; SET key n EX 60; EXEC          (no key, or a key without a TTL)
//	MULTI; SET key n; PEXPIRE key ms; EXEC (ms: the PTTL just read)
//
// so points are counted by GET + SET rather than INCRBY, and a rejected
// consume still writes its points (the 13th consume leaves 13). The default
// RateLimiterRedis instead runs a Lua script (SET key 0 EX d NX; INCRBY;
// PTTL; EXPIRE when PTTL is -1): that is the scripts issue's, and
// TestRedisCompare runs its commands in a MULTI.
func TestRateLimiterFlexible(t *testing.T) {
	compatNode(t, "ioredis", "rate-limiter-flexible")
	redisAddr := realRedis(t)
	s := start(t, opts{})
	targets := []struct{ name, addr string }{{"redis-server", redisAddr}, {"rlserver", s.addr}}
	const n = 13
	for _, proto := range []string{"2", "3"} {
		var shapes [][][]string
		for _, tg := range targets {
			key := "user-" + proto
			run := runRLF(t, proto, tg.addr, "rlf", key, n)
			name := fmt.Sprintf("%s RESP%s (rate-limiter-flexible %s, ioredis %s)", tg.name, proto, run.Version, run.IORedis)
			checkRLF(t, name, run.rlfResults, n)
			shape := rlfShape(run.Commands)
			if want := wantRLFShape("rlf:"+key, n); !reflect.DeepEqual(shape, want) {
				t.Errorf("%s sent %v\nwant %v", name, shape, want)
			}
			shapes = append(shapes, shape)

			// The key itself: 13 points (rejected consumes write too), a
			// TTL within the duration.
			c := redisClient(t, tg.addr)
			if v, err := c.Get(context.Background(), "rlf:"+key).Result(); err != nil || v != strconv.Itoa(n) {
				t.Errorf("%s: GET rlf:%s = %q, %v; want %d", name, key, v, err, n)
			}
			if ms := doInt(t, c, "PTTL", "rlf:"+key); ms <= 0 || ms > 60000 {
				t.Errorf("%s: PTTL rlf:%s = %d, want (0, 60000]", name, key, ms)
			}
		}
		if !reflect.DeepEqual(shapes[0], shapes[1]) {
			t.Errorf("RESP%s: the library sent redis-server %v\nand rlserver %v", proto, shapes[0], shapes[1])
		}
	}
}

// runRLF runs compat/rlf_nonatomic.js once.
func runRLF(t *testing.T, proto, addr, prefix, key string, n int) rlfRun {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "rlf_nonatomic.js", proto, addr, prefix, key, strconv.Itoa(n))
	cmd.Dir = "compat"
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("node rlf_nonatomic.js %s %s: %v\nstderr:\n%s", proto, addr, err, stderr.String())
	}
	var run rlfRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Fatalf("node rlf_nonatomic.js: %v\noutput: %s", err, out)
	}
	return run
}

// checkRLF checks n consumes of a 10-point limiter with a 60 s window,
// and logs the last.
func checkRLF(t *testing.T, name string, run rlfResults, n int) {
	t.Helper()
	const points = 10
	if run.Consumed != points || run.Rejected != n-points || len(run.Results) != n {
		t.Errorf("%s: %d consumed, %d rejected of %d; want %d and %d", name, run.Consumed, run.Rejected, len(run.Results), points, n-points)
	}
	for i, r := range run.Results {
		want := max(int64(points-i-1), 0)
		if r.OK != (i < points) || r.RemainingPoints != want || r.ConsumedPoints != int64(i+1) || !luaWindow(r.MsBeforeNext) {
			t.Errorf("%s: consume %d: %+v; want ok %v, remainingPoints %d, consumedPoints %d, msBeforeNext in (0, 60000]",
				name, i+1, r, i < points, want, i+1)
		}
	}
	if g := run.Get; g == nil || g.ConsumedPoints != int64(n) || !luaWindow(g.MsBeforeNext) {
		t.Errorf("%s: limiter.get = %+v; want consumedPoints %d, msBeforeNext in (0, 60000]", name, g, n)
	}
	if len(run.Results) > 0 {
		last := run.Results[len(run.Results)-1]
		t.Logf("%s: %d consumed, %d rejected; consume %d: remainingPoints %d, msBeforeNext %d", name, run.Consumed, run.Rejected, len(run.Results), last.RemainingPoints, last.MsBeforeNext)
	}
}

// rlfShape is the commands sent with PEXPIRE's milliseconds (the PTTL just
// read, which moves with the clock) replaced by "ms".
func rlfShape(cmds [][]string) [][]string {
	out := make([][]string, len(cmds))
	for i, c := range cmds {
		c = append([]string(nil), c...)
		if len(c) == 3 && c[0] == "pexpire" {
			if ms, err := strconv.ParseInt(c[2], 10, 64); err == nil && ms > 0 && ms <= 60000 {
				c[2] = "ms"
			}
		}
		out[i] = c
	}
	return out
}

// wantRLFShape is what RateLimiterRedisNonAtomic sends for n consumes of
// key and one get (see TestRateLimiterFlexible).
func wantRLFShape(key string, n int) [][]string {
	read := [][]string{{"multi"}, {"get", key}, {"pttl", key}, {"exec"}}
	var out [][]string
	for i := 1; i <= n; i++ {
		out = append(out, read...)
		if i == 1 {
			out = append(out, []string{"multi"}, []string{"set", key, "1", "EX", "60"}, []string{"exec"})
		} else {
			out = append(out, []string{"multi"}, []string{"set", key, strconv.Itoa(i)}, []string{"pexpire", key, "ms"}, []string{"exec"})
		}
	}
	return append(out, read...)
}
