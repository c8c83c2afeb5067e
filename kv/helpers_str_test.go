package kv_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
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
	cmd := kv.New(spec, b, s.resp3)
	res := make([]engine.Result, 1)
	if err := s.e.Do(context.Background(), now, []engine.Request{cmd.Request()}, res); err != nil {
		s.t.Fatalf("%q: %v", args, err)
	}
	if res[0].Err != nil {
		s.t.Fatalf("%q: %v", args, res[0].Err)
	}
	return res[0].Reply
}

// limiter gives key token-bucket state at now (engine.TokenBucket).
func (s *strEnv) limiter(now int64, key string) {
	s.t.Helper()
	r, err := engine.TokenBucket([]byte(key), 10, 1, 1)
	if err != nil {
		s.t.Fatal(err)
	}
	res := make([]engine.Result, 1)
	if err := s.e.Do(context.Background(), now, []engine.Request{r}, res); err != nil || res[0].Err != nil {
		s.t.Fatalf("limiter %s: %v %v", key, err, res[0].Err)
	}
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
	res := make([]engine.Result, 1)
	r := engine.CommandRequest(&strMakeCmd{key: []byte(key), zset: zset}, false)
	if err := s.e.Do(context.Background(), now, []engine.Request{r}, res); err != nil || res[0].Reply != ":1\r\n" {
		s.t.Fatalf("make %s: %v %q", key, err, res[0].Reply)
	}
}

// strRedis is a real redis-server the test started, spoken to in raw
// RESP over TCP.
type strRedis struct {
	t    *testing.T
	conn net.Conn
	r    *bufio.Reader
}

// startStrRedis starts redis-server on a free port in a temporary
// directory. Without redis-server on PATH the test is skipped, unless CI
// is set: there it fails.
func startStrRedis(t *testing.T) *strRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not on PATH (CI is set, so the comparison with Redis must run): %v", err)
		}
		t.Skip("redis-server is not on PATH")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := ln.Addr().(*net.TCPAddr).Port
	ln.Close()
	dir := t.TempDir()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
		"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", filepath.Join(dir, "redis.log"))
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	deadline := time.Now().Add(10 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			r := &strRedis{t: t, conn: c, r: bufio.NewReader(c)}
			t.Cleanup(func() { c.Close() })
			if got := r.do("PING"); got == "+PONG\r\n" {
				return r
			}
			c.Close()
		}
		if time.Now().After(deadline) {
			log, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			t.Fatalf("redis-server did not answer on %s: %v\n%s", addr, err, log)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// do sends args as a RESP array and returns the raw bytes of one reply.
func (r *strRedis) do(args ...string) string {
	r.t.Helper()
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	r.conn.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(r.conn, b.String()); err != nil {
		r.t.Fatal(err)
	}
	var out []byte
	if err := readStrReply(r.r, &out); err != nil {
		r.t.Fatalf("reading the reply to %q: %v", args, err)
	}
	return string(out)
}

// readStrReply appends one RESP2 or RESP3 reply, raw, to out.
func readStrReply(r *bufio.Reader, out *[]byte) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	*out = append(*out, line...)
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return fmt.Errorf("bad line %q", line)
	}
	n, _ := strconv.Atoi(line[1 : len(line)-2])
	switch line[0] {
	case '$', '!', '=':
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		*out = append(*out, buf...)
	case '*', '~', '>', '%', '|':
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for i := 0; i < n; i++ {
			if err := readStrReply(r, out); err != nil {
				return err
			}
		}
	}
	return nil
}
