package kv_test

import "testing"

func TestHZSmoke(t *testing.T) {
	h := newHZEnv(t)
	for _, l := range []string{"HSET h a 1 b 2", "HGETALL h", "HINCRBYFLOAT h a 0.1", "ZADD z 1 a 2 b", "ZRANGE z 0 -1 WITHSCORES", "SET s x", "HGET s a", "ZRANGE z (1 +inf BYSCORE"} {
		t.Logf("%s -> %q %q", l, h.do(false, l), h.do(true, l))
	}
}
