package server

import (
	"strings"
	"testing"
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
