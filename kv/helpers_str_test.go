package kv_test

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

// strT0 is the instant the string and key tests start at: a whole
// second, 2023-11-14T22:13:20Z.
const strT0 = int64(1_700_000_000) * int64(time.Second)

// strEnv runs kv commands on a real engine.
type strEnv struct {
	t     *testing.T
	e     *engine.Engine
	resp3 bool
}

func newStrEnv(t *testing.T, shards int) *strEnv {
	t.Helper()
	e := engine.New(shards)
	t.Cleanup(e.Close)
	return &strEnv{t: t, e: e}
}

// strArity is the server's reply to a command outside its Spec's arity.
func strArity(name string) string {
	return "-ERR wrong number of arguments for '" + strings.ToLower(name) + "' command\r\n"
}

// do runs args (name first) at now (Unix ns) and returns the RESP reply.
// A call outside the spec's arity gets the server's arity error, as the
// server would answer before building the command.
func (s *strEnv) do(now int64, args ...string) string {
	s.t.Helper()
	spec, ok := kv.Lookup([]byte(args[0]))
	if !ok {
		s.t.Fatalf("no command %q", args[0])
	}
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	if !spec.ArityOK(len(b)) {
		return strArity(args[0])
	}
	return engineDo(s.t, s.e, now, kv.New(spec, b, s.resp3).Request(), args)
}

// limiter gives key token-bucket state at now (engine.TokenBucket).
func (s *strEnv) limiter(now int64, key string) {
	s.t.Helper()
	r, err := engine.TokenBucket([]byte(key), 10, 1, 1)
	if err != nil {
		s.t.Fatal(err)
	}
	engineDo(s.t, s.e, now, r, "limiter "+key)
}

// strStep is one command of a scenario: at strT0+at, args (split on
// spaces unless argv is set) must reply want (exact RESP).
type strStep struct {
	at   time.Duration
	cmd  string
	want string
	argv []string // the command's arguments when they hold spaces or are empty
}

// strScenario is a sequence of commands on a fresh engine.
type strScenario struct {
	name     string
	shards   int      // engine.New(shards); 2 when 0
	resp3    bool     // reply in RESP3
	limiters []string // keys given token-bucket state at strT0 first
	hashes   []string // keys given a hash at strT0 first
	zsets    []string // keys given a sorted set at strT0 first
	steps    []strStep
}

func runStrScenarios(t *testing.T, scenarios []strScenario) {
	t.Helper()
	for _, sc := range scenarios {
		t.Run(sc.name, func(t *testing.T) {
			n := sc.shards
			if n == 0 {
				n = 2
			}
			s := newStrEnv(t, n)
			s.resp3 = sc.resp3
			for _, k := range sc.limiters {
				s.limiter(strT0, k)
			}
			for _, k := range sc.hashes {
				s.make(strT0, k, false)
			}
			for _, k := range sc.zsets {
				s.make(strT0, k, true)
			}
			for i, st := range sc.steps {
				args := st.argv
				if args == nil {
					args = strings.Fields(st.cmd)
				}
				if got := s.do(strT0+int64(st.at), args...); got != st.want {
					t.Fatalf("step %d at +%v %q: got %q, want %q", i, st.at, args, got, st.want)
				}
			}
		})
	}
}

// RESP builders for the expected replies.

const (
	sOK   = "+OK\r\n"
	sNil  = "$-1\r\n"
	sNil3 = "_\r\n"
)

func sInt(n int64) string { return ":" + strconv.FormatInt(n, 10) + "\r\n" }

func sBulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func sErr(msg string) string { return "-" + msg + "\r\n" }

func sStatus(s string) string { return "+" + s + "\r\n" }

func sArr(items ...string) string {
	return "*" + strconv.Itoa(len(items)) + "\r\n" + strings.Join(items, "")
}

// strMakeCmd is a test command that replaces key with a hash or sorted
// set of one element, for the commands' behaviour on other types (the
// hash and sorted set commands live in other files of the package).
type strMakeCmd struct {
	key  []byte
	zset bool
}

func (c *strMakeCmd) Keys() [][]byte { return [][]byte{c.key} }

func (c *strMakeCmd) Exec(ks engine.Keyspace, dst []byte) []byte {
	t := values.TypeHash
	if c.zset {
		t = values.TypeZSet
	}
	ks.Delete(c.key)
	e, err := ks.Create(c.key, t)
	if err != nil {
		return append(dst, "-ERR "+err.Error()+"\r\n"...)
	}
	if c.zset {
		e.Obj.(*values.ZSet).Add([]byte("m"), 1)
	} else {
		e.Obj.(*values.Hash).Set([]byte("f"), []byte("v"))
	}
	ks.Changed(c.key)
	return append(dst, ":1\r\n"...)
}

// make gives key a hash (or a sorted set) at now.
func (s *strEnv) make(now int64, key string, zset bool) {
	s.t.Helper()
	r := engine.CommandRequest(&strMakeCmd{key: []byte(key), zset: zset}, false)
	if got := engineDo(s.t, s.e, now, r, "make "+key); got != ":1\r\n" {
		s.t.Fatalf("make %s: %q", key, got)
	}
}

// strRedis is a connection to a real redis-server the test started
// (startRedis) on which a failed exchange fails the test.
type strRedis struct {
	t *testing.T
	c *redisConn
}

// startStrRedis starts redis-server (startRedis) and connects to it.
func startStrRedis(t *testing.T) *strRedis {
	t.Helper()
	c, err := startRedis(t).dial(false)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.close)
	return &strRedis{t: t, c: c}
}

// do sends args as a RESP array and returns the raw bytes of one reply.
func (r *strRedis) do(args ...string) string {
	r.t.Helper()
	b := make([][]byte, len(args))
	for i, a := range args {
		b[i] = []byte(a)
	}
	reply, err := r.c.do(b)
	if err != nil {
		r.t.Fatalf("reading the reply to %q: %v", args, err)
	}
	return reply
}
