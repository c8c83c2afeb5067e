package command

import (
	"testing"

	"github.com/rlserver/rlserver/kv"
)

// UNWATCH inside MULTI is queued, as in Redis, and answers +OK in its place
// in EXEC's reply (withUnwatches).
func TestWithUnwatches(t *testing.T) {
	cmd := func(unwatch bool) Queued {
		if unwatch {
			return Queued{}
		}
		spec, _ := kv.Lookup([]byte("get"))
		return Queued{Spec: spec}
	}
	cases := []struct {
		queued []bool // true: UNWATCH
		reply  string
		want   string
	}{
		{[]bool{true}, "*0\r\n", "*1\r\n+OK\r\n"},
		{[]bool{true, false}, "*1\r\n$1\r\n1\r\n", "*2\r\n+OK\r\n$1\r\n1\r\n"},
		{[]bool{false, true, false, true}, "*2\r\n:1\r\n$-1\r\n", "*4\r\n:1\r\n+OK\r\n$-1\r\n+OK\r\n"},
		// nested replies: RESP2 and RESP3 arrays, maps, doubles, errors
		{[]bool{false, true, false, false}, "*3\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n*0\r\n-ERR x\r\n", "*4\r\n*2\r\n$1\r\na\r\n$1\r\n1\r\n+OK\r\n*0\r\n-ERR x\r\n"},
		{[]bool{false, false, true}, "*2\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n", "*3\r\n%1\r\n$1\r\nf\r\n$1\r\nv\r\n*1\r\n*2\r\n$1\r\nm\r\n,1.5\r\n+OK\r\n"},
		{[]bool{true, false}, "*1\r\n_\r\n", "*2\r\n+OK\r\n_\r\n"},
		// a changed watched key: the null array stays
		{[]bool{true, false}, "*-1\r\n", "*-1\r\n"},
		{[]bool{true, false}, "_\r\n", "_\r\n"},
	}
	for _, tc := range cases {
		var q []Queued
		n := 0
		for _, u := range tc.queued {
			q = append(q, cmd(u))
			if !u {
				n++
			}
		}
		got, ok := withUnwatches(tc.reply, q, n)
		if !ok || got != tc.want {
			t.Errorf("withUnwatches(%q, %v) = %q, %v; want %q", tc.reply, tc.queued, got, ok, tc.want)
		}
	}
	// A reply that does not parse, or has more than its count.
	for _, bad := range []string{"*1\r\n$5\r\nab\r\n", "*1\r\n:1\r\n:2\r\n", "*1\r\n?x\r\n"} {
		if _, ok := withUnwatches(bad, []Queued{cmd(true), cmd(false)}, 1); ok {
			t.Errorf("withUnwatches(%q) accepted", bad)
		}
	}
}
