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
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// Helpers shared by the string, key, hash and sorted-set tests: one
// request on a real engine, and a real redis-server to compare with,
// spoken to in raw RESP over TCP.

// engineDo runs req on e at now (Unix ns) and returns its RESP reply; an
// error from the engine or the request fails the test.
func engineDo(t testing.TB, e *engine.Engine, now int64, req engine.Request, what any) string {
	t.Helper()
	res := make([]engine.Result, 1)
	if err := e.Do(context.Background(), now, []engine.Request{req}, res); err != nil {
		t.Fatalf("%q: %v", what, err)
	}
	if res[0].Err != nil {
		t.Fatalf("%q: result error %v", what, res[0].Err)
	}
	return res[0].Reply
}

// testRedis is a redis-server started by a test, in a temporary
// directory.
type testRedis struct {
	addr string
}

// startRedis starts redis-server on a free port. Without redis-server on
// PATH the test is skipped, unless CI is set: there it fails, so the
// comparison with Redis must run.
func startRedis(t *testing.T) *testRedis {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not on PATH (CI is set, so the comparison with Redis must run): %v", err)
		}
		t.Skip("redis-server is not on PATH")
	}
	dir := t.TempDir()
	logfile := filepath.Join(dir, "redis.log")
	for attempt := 0; attempt < 5; attempt++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "",
			"--appendonly", "no", "--dir", dir, "--daemonize", "no", "--logfile", logfile)
		cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { cmd.Wait(); close(done) }()
		r := &testRedis{addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))}
		deadline := time.Now().Add(10 * time.Second)
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
	log, _ := os.ReadFile(logfile)
	t.Fatalf("redis-server did not start\n%s", log)
	return nil
}

// redisConn is a raw RESP connection.
type redisConn struct {
	nc net.Conn
	r  *bufio.Reader
}

// dial connects to the server, in RESP3 (HELLO 3) when resp3 is set.
func (r *testRedis) dial(resp3 bool) (*redisConn, error) {
	nc, err := net.DialTimeout("tcp", r.addr, time.Second)
	if err != nil {
		return nil, err
	}
	c := &redisConn{nc: nc, r: bufio.NewReader(nc)}
	if resp3 {
		if _, err := c.do([][]byte{[]byte("HELLO"), []byte("3")}); err != nil {
			nc.Close()
			return nil, err
		}
	}
	return c, nil
}

func (c *redisConn) close() { c.nc.Close() }

// do sends args as a RESP array and reads exactly one reply, raw.
func (c *redisConn) do(args [][]byte) (string, error) {
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n", len(a))
		b = append(b, a...)
		b = append(b, '\r', '\n')
	}
	c.nc.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.nc.Write(b); err != nil {
		return "", err
	}
	var out strings.Builder
	if err := readReply(c.r, &out); err != nil {
		return "", err
	}
	return out.String(), nil
}

// readReply copies one RESP2 or RESP3 reply from r to out.
func readReply(r *bufio.Reader, out *strings.Builder) error {
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
			if err := readReply(r, out); err != nil {
				return err
			}
		}
		if line[0] == '|' { // an attribute precedes the reply itself
			return readReply(r, out)
		}
		return nil
	}
	return errors.New("unknown reply type " + line[:1])
}

// compareRandom runs rounds commands from gen, in RESP2 and then RESP3
// (each from an empty keyspace), on redis-server and on a fresh kv
// environment, and fails on the first replies that differ (up to ten
// are shown). skip, when set, gets each line with both replies and says
// which to leave uncompared (a random pick).
func compareRandom(t *testing.T, r *testRedis, rounds int, gen func() string, skip func(line, got, want string) bool) {
	t.Helper()
	for _, resp3 := range []bool{false, true} {
		c, err := r.dial(resp3)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.do([][]byte{[]byte("FLUSHALL")}); err != nil {
			t.Fatal(err)
		}
		h := newHZEnv(t)
		fails := 0
		for range rounds {
			line := gen()
			args := hzArgs(t, line)
			want, err := c.do(args)
			if err != nil {
				t.Fatal(err)
			}
			got := h.doArgs(resp3, args)
			if got == want || (skip != nil && skip(line, got, want)) {
				continue
			}
			t.Errorf("resp3=%v %s:\n got %q\nwant %q", resp3, line, got, want)
			if fails++; fails > 10 {
				t.FailNow()
			}
		}
		c.close()
	}
}
