package server

import (
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

// A pipeline's scripts run as one batch between the commands around them:
// every reply in the pipeline's order, each script seeing the writes of
// the commands and scripts before it (issue 34).
func TestPipelineScriptsBatchInOrder(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	incr := "return redis.call('INCR', KEYS[1])"
	pipeline := []string{
		encode("EVAL", incr, "1", "a"),
		encode("EVAL", incr, "1", "b"),
		encode("EVAL", incr, "1", "a"),
		encode("RL.ALLOW", "rl", "10", "1"),
		encode("EVAL", incr, "1", "a"),
		encode("SET", "a", "10"),
		encode("EVAL", incr, "1", "a"),
		encode("EVALSHA", "ffffffffffffffffffffffffffffffffffffffff", "0"),
		encode("EVAL", "return redis.call('GET', 'a')", "0"),
		encode("MULTI"),
		encode("EVAL", incr, "1", "a"),
		encode("EXEC"),
		encode("EVAL", "return redis.call('NOPE')", "0"),
		encode("GET", "a"),
	}
	if _, err := c.Write([]byte(strings.Join(pipeline, ""))); err != nil {
		t.Fatal(err)
	}
	want := []string{
		":1", ":1", ":2", "[:1 :9 :0 :1000]", ":3", "OK", ":11",
		"-NOSCRIPT No matching script. Please use EVAL.", "11",
		"OK", "QUEUED", "[:12]",
		"-ERR Unknown Redis command called from script script: ",
		"12",
	}
	for i, w := range want {
		got := readReply(t, r)
		if !strings.HasPrefix(got, w) || (!strings.HasSuffix(w, ": ") && got != w) {
			t.Errorf("reply %d = %q, want %q", i, got, w)
		}
	}
}

// A script runs on the shard of its declared keys (command/live.go). One
// that touches a key of another shard, or asks for DBSIZE, is discarded
// (its writes so far with it) and runs again on a copy of its keys: each
// of its writes lands once, and the scripts after it in the pipeline see
// them, in order.
func TestLiveScriptReachingPastItsShard(t *testing.T) {
	addr, _ := startServer(t, Config{}) // 4 shards
	c, r := dial(t, addr)
	a := "a"
	z := "z0"
	for i := 1; engine.ShardOf([]byte(z), 4) == engine.ShardOf([]byte(a), 4); i++ {
		z = "z" + strconv.Itoa(i)
	}
	incr := "return redis.call('INCR', KEYS[1])"
	pipeline := []string{
		// INCR a on its shard, then INCR z, undeclared, on another.
		encode("EVAL", "redis.call('INCR', KEYS[1]) return redis.call('INCR', ARGV[1])", "1", a, z),
		encode("EVAL", incr, "1", z),
		encode("EVAL", "return redis.call('GET', KEYS[1])", "1", a),
		encode("EVAL", "redis.call('INCR', KEYS[1]) return redis.call('DBSIZE')", "1", a),
		encode("EVAL", incr, "1", a),
		encode("GET", z),
	}
	if _, err := c.Write([]byte(strings.Join(pipeline, ""))); err != nil {
		t.Fatal(err)
	}
	want := []string{":1", ":2", "1", ":2", ":3", "2"}
	for i, w := range want {
		if got := readReply(t, r); got != w {
			t.Errorf("reply %d = %q, want %q", i, got, w)
		}
	}
}

// Random pipelines of scripts that write their declared key and, some of
// them, keys they did not declare (on any of the 4 shards), from several
// connections at once: every reply is what running each connection's
// scripts one at a time, in order, gives. Each connection has keys of its
// own, so a sequential model per connection predicts every reply; a
// script that reached past its shard and ran again on a copy must land
// once and in its place.
func TestLiveScriptsRandomPipelines(t *testing.T) {
	addr, _ := startServer(t, Config{}) // 4 shards
	const conns, rounds, depth = 4, 30, 24
	src := `local n = redis.call('INCRBY', KEYS[1], ARGV[1])
for i = 2, #ARGV do n = n + redis.call('INCR', ARGV[i]) end
return n`
	var wg sync.WaitGroup
	for ci := range conns {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(ci), 11))
			c, r := dial(t, addr)
			model := map[string]int64{}
			key := func() string { return "c" + strconv.Itoa(ci) + ":k" + strconv.Itoa(rng.IntN(12)) }
			for range rounds {
				var out []byte
				var want []string
				for range depth {
					k, by := key(), int64(rng.IntN(5)+1)
					args := []string{"EVAL", src, "1", k, strconv.FormatInt(by, 10)}
					model[k] += by
					n := model[k]
					for range rng.IntN(3) { // undeclared keys
						u := key()
						args = append(args, u)
						model[u]++
						n += model[u]
					}
					out = append(out, encode(args...)...)
					want = append(want, ":"+strconv.FormatInt(n, 10))
				}
				if _, err := c.Write(out); err != nil {
					t.Error(err)
					return
				}
				for i, w := range want {
					if got := readReply(t, r); got != w {
						t.Errorf("conn %d: reply %d = %q, want %q", ci, i, got, w)
						return
					}
				}
			}
		})
	}
	wg.Wait()
}

// INFO memory counts the cached scripts, as Redis's
// number_of_cached_scripts does (its unit/scripting reads it).
func TestInfoCachedScripts(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	count := func() string {
		t.Helper()
		if _, err := c.Write([]byte(encode("INFO", "memory"))); err != nil {
			t.Fatal(err)
		}
		info := readReply(t, r)
		for _, l := range strings.Split(info, "\r\n") {
			if n, ok := strings.CutPrefix(l, "number_of_cached_scripts:"); ok {
				return n
			}
		}
		t.Fatalf("no number_of_cached_scripts in %q", info)
		return ""
	}
	if n := count(); n != "0" {
		t.Fatalf("before any script: %s, want 0", n)
	}
	for _, src := range []string{"return 1", "return 2", "return 1"} {
		c.Write([]byte(encode("SCRIPT", "LOAD", src)))
		readReply(t, r)
	}
	if n := count(); n != "2" {
		t.Fatalf("after two scripts: %s, want 2", n)
	}
	c.Write([]byte(encode("SCRIPT", "FLUSH")))
	readReply(t, r)
	if n := count(); n != "0" {
		t.Fatalf("after SCRIPT FLUSH: %s, want 0", n)
	}
}

// A script's error reply counts in INFO errorstats by its code, as
// Redis's does (redis.error_reply, an error a script raised).
func TestScriptErrorsInErrorStats(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	for _, src := range []string{"return redis.error_reply('MY_ERR_CODE custom msg')", "return redis.error_reply('')", "return redis.call('nosuch')"} {
		c.Write([]byte(encode("EVAL", src, "0")))
		if got := readReply(t, r); got[0] != '-' {
			t.Fatalf("EVAL %q: %q, want an error", src, got)
		}
	}
	c.Write([]byte(encode("INFO", "errorstats")))
	info := readReply(t, r)
	for _, want := range []string{"errorstat_MY_ERR_CODE:count=1", "errorstat_ERR:count=2"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO errorstats %q: no %s", info, want)
		}
	}
}
