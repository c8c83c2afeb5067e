package kv_test

import (
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/conf"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

// Shared helpers of the hash and sorted-set tests: a real engine that
// runs kv commands (the redis-server to compare with is in
// redis_test_helpers_test.go).

const hzNow = int64(1_700_000_000) * int64(time.Second)

// hzEnv is a real engine (two shards) that runs commands at a fixed time.
type hzEnv struct {
	t   testing.TB
	e   *engine.Engine
	now int64
}

func newHZEnv(t testing.TB) *hzEnv {
	e := engine.New(2)
	t.Cleanup(e.Close)
	return &hzEnv{t: t, e: e, now: hzNow}
}

// hzArgs splits a command line as redis-cli does (quotes, \x escapes).
func hzArgs(t testing.TB, line string) [][]byte {
	split, err := conf.Split(line)
	if err != nil || len(split) == 0 {
		t.Fatalf("bad command line %q: %v", line, err)
	}
	args := make([][]byte, len(split))
	for i, a := range split {
		args[i] = []byte(a)
	}
	return args
}

// do runs one command line and returns its RESP reply. A command with the
// wrong number of arguments gets the server's arity error. SET key value
// and DEL key, when package kv has no such command yet, run as test
// commands on the keyspace.
func (h *hzEnv) do(resp3 bool, line string) string {
	h.t.Helper()
	return h.doArgs(resp3, hzArgs(h.t, line))
}

func (h *hzEnv) doArgs(resp3 bool, args [][]byte) string {
	h.t.Helper()
	var req engine.Request
	spec, ok := kv.Lookup(args[0])
	switch {
	case ok:
		if !spec.ArityOK(len(args)) {
			return "-ERR wrong number of arguments for '" + spec.Name + "' command\r\n"
		}
		c := kv.New(spec, args, resp3)
		req = c.Request()
	case strings.EqualFold(string(args[0]), "set") && len(args) == 3,
		strings.EqualFold(string(args[0]), "del") && len(args) == 2:
		c := &hzRawCmd{args: args}
		req = engine.CommandRequest(c, false)
	default:
		h.t.Fatalf("unknown command %q", args[0])
	}
	return engineDo(h.t, h.e, h.now, req, args)
}

// limiter makes key a limiter key (a fixed window).
func (h *hzEnv) limiter(key string) {
	h.t.Helper()
	r, err := engine.Fixed([]byte(key), 10, 1000, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	engineDo(h.t, h.e, h.now, r, "limiter "+key)
}

// wantWrongType runs line and wants WRONGTYPE.
func (h *hzEnv) wantWrongType(resp3 bool, line string) {
	h.t.Helper()
	if got := h.do(resp3, line); got != hzWrong {
		h.t.Errorf("%s: %q", line, got)
	}
}

// hzRawCmd is SET key value or DEL key straight on the keyspace, for the
// tests that need a string key before package kv has the string commands.
type hzRawCmd struct{ args [][]byte }

func (c *hzRawCmd) Keys() [][]byte { return c.args[1:2] }

func (c *hzRawCmd) Exec(ks engine.Keyspace, dst []byte) []byte {
	key := c.args[1]
	if len(c.args) == 2 {
		if ks.Delete(key) {
			return append(dst, ":1\r\n"...)
		}
		return append(dst, ":0\r\n"...)
	}
	if e, err := ks.Get(key); err != nil || (e != nil && e.Type() != values.TypeString) {
		ks.Delete(key)
	}
	e, err := ks.Get(key)
	if e == nil && err == nil {
		e, err = ks.Create(key, values.TypeString)
	}
	if err != nil {
		return append(dst, "-"+err.Error()+"\r\n"...)
	}
	e.Expire = 0
	e.SetString(c.args[2])
	ks.Changed(key)
	return append(dst, "+OK\r\n"...)
}

// hzStep is one command and its expected replies.
type hzStep struct {
	cmd   string
	want  string // RESP2 reply
	want3 string // RESP3 reply; "" when the same as want
}

// hzRunTables runs every table of steps (hzRun), named by its key.
func hzRunTables(t *testing.T, tables map[string][]hzStep) {
	t.Helper()
	for name, steps := range tables {
		hzRun(t, name, steps)
	}
}

// hzRun runs steps on a fresh engine and compares every reply.
func hzRun(t *testing.T, name string, steps []hzStep) {
	t.Helper()
	for _, resp3 := range []bool{false, true} {
		h := newHZEnv(t)
		for i, s := range steps {
			want := s.want
			if resp3 && s.want3 != "" {
				want = s.want3
			}
			if got := h.do(resp3, s.cmd); got != want {
				t.Errorf("%s step %d (resp3 %v) %s:\n got %q\nwant %q", name, i, resp3, s.cmd, got, want)
			}
		}
	}
}

// Reply builders for the tables.

func hzI(n int) string     { return ":" + strconv.Itoa(n) + "\r\n" }
func hzB(s string) string  { return "$" + strconv.Itoa(len(s)) + "\r\n" + s + "\r\n" }
func hzE(s string) string  { return "-" + s + "\r\n" }
func hzD3(s string) string { return "," + s + "\r\n" }

const (
	hzNil   = "$-1\r\n"
	hzNil3  = "_\r\n"
	hzOK    = "+OK\r\n"
	hzEmpty = "*0\r\n"
	hzWrong = "-WRONGTYPE Operation against a key holding the wrong kind of value\r\n"
)

// hzA is an array of the replies.
func hzA(items ...string) string {
	return "*" + strconv.Itoa(len(items)) + "\r\n" + strings.Join(items, "")
}

// hzBs is an array of bulk strings.
func hzBs(items ...string) string {
	out := make([]string, len(items))
	for i, s := range items {
		out[i] = hzB(s)
	}
	return hzA(out...)
}
