package server

import (
	"strconv"
	"strings"
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
