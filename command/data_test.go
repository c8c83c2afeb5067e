package command

import "testing"

// DataError tells an error reply from the others by what kv writes, so
// the edge counts errors without reading replies.
func TestDataError(t *testing.T) {
	for _, tc := range []struct {
		reply, text string
		failed      bool
	}{
		{"+OK\r\n", "", false},
		{":1\r\n", "", false},
		{"$3\r\n-ab\r\n", "", false},
		{"", "", false},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", "WRONGTYPE Operation against a key holding the wrong kind of value", true},
		{"-ERR x", "ERR x", true},
	} {
		text, failed := DataError(tc.reply)
		if text != tc.text || failed != tc.failed {
			t.Errorf("DataError(%q) = %q, %v; want %q, %v", tc.reply, text, failed, tc.text, tc.failed)
		}
	}
}

// Queue takes data, limiter and script commands and UNWATCH, copies
// their arguments, and refuses the rest.
func TestQueue(t *testing.T) {
	args := func(s ...string) [][]byte {
		out := make([][]byte, len(s))
		for i, a := range s {
			out[i] = []byte(a)
		}
		return out
	}
	in := args("SET", "k", "v")
	q, text := Queue(in)
	if text != "" || q.Spec == nil || string(q.Keys()[0]) != "k" {
		t.Fatalf("SET: %+v %q", q, text)
	}
	in[1][0] = 'x'
	if string(q.Args[1]) != "k" {
		t.Fatal("Queue kept the caller's buffer")
	}
	if q, _ := Queue(args("rl.allow", "b", "10", "1")); q.Limiter == nil || string(q.Keys()[0]) != "b" {
		t.Fatalf("RL.ALLOW: %+v", q)
	}
	if q, _ := Queue(args("EVALSHA", "abc", "2", "k1", "k2", "a")); !q.Script || len(q.Keys()) != 2 {
		t.Fatalf("EVALSHA: %+v", q)
	}
	if q, text := Queue(args("unwatch")); text != "" || q.Args != nil {
		t.Fatalf("UNWATCH: %+v %q", q, text)
	}
	if _, text := Queue(args("config", "get", "x")); text == "" {
		t.Fatal("CONFIG queued")
	}
}

// TestBlockingReply: the nulls of both protocols are "nothing to take",
// WRONGTYPE is told apart from other errors, and a value is neither.
func TestBlockingReply(t *testing.T) {
	for _, tc := range []struct {
		reply            string
		empty, wrongType bool
	}{
		{"*-1\r\n", true, false},
		{"$-1\r\n", true, false},
		{"_\r\n", true, false},
		{"*2\r\n$1\r\nk\r\n$1\r\nv\r\n", false, false},
		{"$1\r\nv\r\n", false, false},
		{"-WRONGTYPE Operation against a key holding the wrong kind of value\r\n", false, true},
		{"-ERR timeout is negative\r\n", false, false},
		{"", false, false},
	} {
		if empty, wrongType := BlockingReply(tc.reply); empty != tc.empty || wrongType != tc.wrongType {
			t.Errorf("BlockingReply(%q) = %v, %v; want %v, %v", tc.reply, empty, wrongType, tc.empty, tc.wrongType)
		}
	}
}
