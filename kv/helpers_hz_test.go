package kv_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/values"
)

// Shared helpers of the hash and sorted-set tests: a real engine that
// runs kv commands, and a real redis-server to compare with.

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
	args, ok := resp.SplitArgs([]byte(line))
	if !ok || len(args) == 0 {
		t.Fatalf("bad command line %q", line)
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
	res := make([]engine.Result, 1)
	if err := h.e.Do(context.Background(), h.now, []engine.Request{req}, res); err != nil {
		h.t.Fatalf("%q: %v", args, err)
	}
	if res[0].Err != nil {
		h.t.Fatalf("%q: result error %v", args, res[0].Err)
	}
	return res[0].Reply
}

// limiter makes key a limiter key (a fixed window).
func (h *hzEnv) limiter(key string) {
	h.t.Helper()
	r, err := engine.Fixed([]byte(key), 10, 1000, 1)
	if err != nil {
		h.t.Fatal(err)
	}
	res := make([]engine.Result, 1)
	if err := h.e.Do(context.Background(), h.now, []engine.Request{r}, res); err != nil || res[0].Err != nil {
		h.t.Fatalf("limiter %s: %v %v", key, err, res[0].Err)
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

// hzRedis is a redis-server started by a test, in a temporary directory.
type hzRedis struct {
	addr string
	cmd  *exec.Cmd
}

// startHZRedis starts redis-server on a free port. Without redis-server
// on PATH the test is skipped, unless CI is set: then it fails.
func startHZRedis(t *testing.T) *hzRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: %v", err)
		}
		t.Skip("redis-server not on PATH")
	}
	dir := t.TempDir()
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		r := &hzRedis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd}
		deadline := time.Now().Add(5 * time.Second)
		for time.Now().Before(deadline) {
			select {
			case <-done:
				deadline = time.Time{} // exited: the port was taken; try another
				continue
			default:
			}
			if c, err := r.dial(false); err == nil {
				if reply, err := c.do([][]byte{[]byte("PING")}); err == nil && reply == "+PONG\r\n" {
					c.close()
					t.Cleanup(func() {
						cmd.Process.Kill()
						<-done
					})
					return r
				}
				c.close()
			}
			time.Sleep(20 * time.Millisecond)
		}
		cmd.Process.Kill()
		<-done
	}
	t.Fatal("redis-server did not start")
	return nil
}

// hzConn is a raw RESP connection.
type hzConn struct {
	nc net.Conn
	r  *bufio.Reader
}

func (r *hzRedis) dial(resp3 bool) (*hzConn, error) {
	nc, err := net.DialTimeout("tcp", r.addr, time.Second)
	if err != nil {
		return nil, err
	}
	c := &hzConn{nc: nc, r: bufio.NewReader(nc)}
	if resp3 {
		if _, err := c.do([][]byte{[]byte("HELLO"), []byte("3")}); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *hzConn) close() { c.nc.Close() }

// do sends args as a RESP array and reads exactly one reply, raw.
func (c *hzConn) do(args [][]byte) (string, error) {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n", len(a))
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	c.nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		return "", err
	}
	var out strings.Builder
	if err := hzReadReply(c.r, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

// hzReadReply copies one RESP2 or RESP3 reply from r to out.
func hzReadReply(r *bufio.Reader, out *strings.Builder) error {
	line, err := r.ReadString('\n')
	if err != nil {
		return err
	}
	if len(line) < 3 || !strings.HasSuffix(line, "\r\n") {
		return fmt.Errorf("bad reply line %q", line)
	}
	out.WriteString(line)
	body := line[1 : len(line)-2]
	switch line[0] {
	case '+', '-', ':', '_', ',', '#', '(':
		return nil
	case '$', '=', '!':
		n, err := strconv.Atoi(body)
		if err != nil {
			return err
		}
		if n < 0 {
			return nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return err
		}
		out.Write(buf)
		return nil
	case '*', '~', '>', '%', '|':
		n, err := strconv.Atoi(body)
		if err != nil {
			return err
		}
		if line[0] == '%' || line[0] == '|' {
			n *= 2
		}
		for range n {
			if err := hzReadReply(r, out); err != nil {
				return err
			}
		}
		if line[0] == '|' { // an attribute precedes the reply itself
			return hzReadReply(r, out)
		}
		return nil
	}
	return errors.New("unknown reply type " + line[:1])
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
