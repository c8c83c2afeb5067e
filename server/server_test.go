package server

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/standalone"
)

// startServer serves a fresh engine on a loopback port and returns its address.
func startServer(t testing.TB, cfg Config) (string, *Server) {
	t.Helper()
	return serveStandalone(t, cfg, nil)
}

// serveStandalone serves cfg on a free loopback port with a standalone
// backend (4 shards, the given policies, which may be nil) until the test
// ends.
func serveStandalone(t testing.TB, cfg Config, store *policy.Store) (string, *Server) {
	t.Helper()
	return serveShards(t, cfg, store, 4)
}

// serveShards is serveStandalone with an engine of n shards.
func serveShards(t testing.TB, cfg Config, store *policy.Store, n int) (string, *Server) {
	t.Helper()
	eng := engine.New(n)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Version = "test"
	backend := standalone.New(eng, store)
	cfg.Policies = backend
	cfg.LiveEngine = backend // as cmd/rlserver declares it
	srv := New(cfg, backend)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
		eng.Close()
	})
	return ln.Addr().String(), srv
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c, bufio.NewReader(c)
}

func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply reads one RESP2 reply and renders it compactly: arrays as
// [a b], errors as -TEXT, integers as :n, strings as themselves.
func readReply(t *testing.T, r *bufio.Reader) string {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	line = strings.TrimSuffix(line, "\r\n")
	switch line[0] {
	case '+':
		return line[1:]
	case '-', ':':
		return line
	case '$':
		var n int
		fmt.Sscanf(line[1:], "%d", &n)
		if n < 0 {
			return "(nil)"
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		return string(buf[:n])
	case '*':
		var n int
		fmt.Sscanf(line[1:], "%d", &n)
		parts := make([]string, n)
		for i := range parts {
			parts[i] = readReply(t, r)
		}
		return "[" + strings.Join(parts, " ") + "]"
	}
	t.Fatalf("unexpected reply line %q", line)
	return ""
}

func TestPipelineMixesBatchAndDirectCommandsInOrder(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	pipeline := encode("RL.ALLOW", "k", "2", "0.001") +
		encode("PING") +
		encode("RL.ALLOW", "k", "2", "0.001") +
		encode("RL.ALLOW", "k", "x", "0.001") +
		encode("NOPE", "a") +
		encode("RL.ALLOW", "k", "2", "0.001") +
		encode("EXISTS", "k", "k", "other") +
		encode("DEL", "k") +
		encode("RL.PEEK", "k", "2", "0.001")
	if _, err := io.WriteString(c, pipeline); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"[:1 :1 :0 :1000000]",
		"PONG",
		"[:1 :0 :0 :2000000]",
		"-ERR value is not an integer or out of range",
		"-ERR unknown command 'NOPE', with args beginning with: 'a' ",
		"[:0 :0 :1000000 :2000000]",
		":2",
		":1",
		"[:1 :1 :0 :1000000]",
	}
	for i, w := range want {
		// PING splits the pipeline into batches read at different instants:
		// durations may be a few ms short of the full period.
		if got := coarse(readReply(t, r)); got != w {
			t.Errorf("reply %d = %q, want %q", i, got, w)
		}
	}
}

// coarse rounds every integer of at least 100000 in a rendered reply to the
// nearest 10000, so countdowns that moved by less than 5 s compare equal.
func coarse(s string) string {
	return regexp.MustCompile(`:\d{6,}`).ReplaceAllStringFunc(s, func(m string) string {
		n, _ := strconv.ParseInt(m[1:], 10, 64)
		return ":" + strconv.FormatInt((n+5000)/10000*10000, 10)
	})
}

func TestLongPipelineAnsweredInOrder(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	var b strings.Builder
	const n = 5000
	for i := range n {
		b.WriteString(encode("RL.ALLOW", fmt.Sprintf("key:%d", i%100), "1000", "0.001", fmt.Sprint(1+i%3)))
	}
	go io.WriteString(c, b.String())
	used := map[int]int{}
	for i := range n {
		key, cost := i%100, 1+i%3
		used[key] += cost
		want := fmt.Sprintf("[:1 :%d :0 :", 1000-used[key])
		if got := readReply(t, r); !strings.HasPrefix(got, want) {
			t.Fatalf("reply %d = %q, want prefix %q", i, got, want)
		}
	}
}

func TestAuthRequired(t *testing.T) {
	addr, srv := startServer(t, Config{RequirePass: "s3cret"})
	c, r := dial(t, addr)
	io.WriteString(c, encode("RL.ALLOW", "k", "1", "1")+encode("PING")+encode("AUTH", "wrong")+
		encode("AUTH", "s3cret")+encode("PING"))
	want := []string{"-NOAUTH Authentication required.", "-NOAUTH Authentication required.",
		"-WRONGPASS invalid username-password pair or user is disabled.", "OK", "PONG"}
	for i, w := range want {
		if got := readReply(t, r); got != w {
			t.Errorf("reply %d = %q, want %q", i, got, w)
		}
	}
	if n := srv.Stats.AuthFailures.Load(); n != 1 {
		t.Errorf("AuthFailures = %d, want 1", n)
	}
	// Regression: errors written by handlers (WRONGPASS) were not counted.
	if n := srv.Stats.ErrorReplies.Load(); n != 3 {
		t.Errorf("ErrorReplies = %d, want 3 (two NOAUTH, one WRONGPASS)", n)
	}
}

func TestShutdownAnswersReceivedCommandsThenCloses(t *testing.T) {
	eng := engine.New(2)
	defer eng.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := New(Config{Version: "test"}, standalone.New(eng, nil))
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	c, r := dial(t, ln.Addr().String())
	io.WriteString(c, encode("PING"))
	if got := readReply(t, r); got != "PONG" {
		t.Fatalf("PING = %q", got)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Serve returned %v after Shutdown", err)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("connection still open after Shutdown")
	}
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Fatal("still accepting after Shutdown")
	}
}

func TestMaxClientsRefusesTheNextConnection(t *testing.T) {
	addr, srv := startServer(t, Config{MaxClients: 2})
	for range 2 {
		c, r := dial(t, addr)
		io.WriteString(c, encode("PING"))
		if got := readReply(t, r); got != "PONG" {
			t.Fatalf("PING = %q", got)
		}
	}
	_, r := dial(t, addr)
	if got := readReply(t, r); got != "-ERR max number of clients reached" {
		t.Fatalf("third connection got %q", got)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("refused connection left open")
	}
	if n := srv.Stats.RejectedConnections.Load(); n != 1 {
		t.Fatalf("RejectedConnections = %d", n)
	}
}

func TestKeyLengthLimit(t *testing.T) {
	addr, _ := startServer(t, Config{MaxKeyLen: 8})
	c, r := dial(t, addr)
	io.WriteString(c, encode("RL.ALLOW", "123456789", "1", "1")+encode("DEL", "ok", "123456789")+
		encode("RL.ALLOW", "12345678", "1", "1"))
	for i, want := range []string{
		"-ERR key is too long: 9 bytes, the limit is 8 (max-key-len)",
		"-ERR key is too long: 9 bytes, the limit is 8 (max-key-len)",
		"[:1 :0 :0 :1000]",
	} {
		if got := readReply(t, r); got != want {
			t.Errorf("reply %d = %q, want %q", i, got, want)
		}
	}
}

func TestPreAuthLimitsAreTighter(t *testing.T) {
	addr, _ := startServer(t, Config{RequirePass: "pw"})
	// Before AUTH a 20 KiB bulk is a protocol error...
	c, r := dial(t, addr)
	io.WriteString(c, encode("ECHO", strings.Repeat("x", 20<<10)))
	if got := readReply(t, r); got != "-ERR Protocol error: unauthenticated bulk length" {
		t.Fatalf("unauthenticated big bulk: %q", got)
	}
	// ...after it, it is an ordinary argument.
	c2, r2 := dial(t, addr)
	io.WriteString(c2, encode("AUTH", "pw"))
	if got := readReply(t, r2); got != "OK" {
		t.Fatalf("AUTH = %q", got)
	}
	io.WriteString(c2, encode("ECHO", strings.Repeat("x", 20<<10)))
	if got := readReply(t, r2); len(got) != 20<<10 {
		t.Fatalf("authenticated big bulk: %d bytes", len(got))
	}
	// RESET drops authentication and the limits tighten again.
	io.WriteString(c2, encode("RESET"))
	if got := readReply(t, r2); got != "RESET" {
		t.Fatalf("RESET = %q", got)
	}
	io.WriteString(c2, "*11\r\n")
	if got := readReply(t, r2); got != "-ERR Protocol error: unauthenticated multibulk length" {
		t.Fatalf("after RESET, 11 arguments: %q", got)
	}
}

// TestBugPipelinedAuthThenBigCommand pins a divergence from Redis: the
// limits before AUTH were applied to everything that arrived in the same
// read as the AUTH, so AUTH pipelined with a command of more than 10
// arguments or 16 KiB failed with a protocol error. Redis parses one
// command at a time, and so does the guard before AUTH now.
func TestBugPipelinedAuthThenBigCommand(t *testing.T) {
	addr, _ := startServer(t, Config{RequirePass: "pw"})
	c, r := dial(t, addr)
	big := strings.Repeat("y", 20<<10)
	args := []string{"DEL"}
	for i := 0; i < 12; i++ {
		args = append(args, fmt.Sprintf("k%d", i))
	}
	io.WriteString(c, encode("AUTH", "pw")+encode("ECHO", big)+encode(args...)+encode("PING"))
	for i, want := range []string{"OK", big, ":0", "PONG"} {
		if got := readReply(t, r); got != want {
			t.Fatalf("reply %d = %.40q, want %.40q", i, got, want)
		}
	}
	// A wrong password pipelined with a big command: the big command is
	// checked against the limits before AUTH, as in Redis.
	c2, r2 := dial(t, addr)
	io.WriteString(c2, encode("AUTH", "wrong")+encode("ECHO", big))
	if got := readReply(t, r2); !strings.HasPrefix(got, "-WRONGPASS") {
		t.Fatalf("AUTH wrong = %q", got)
	}
	if got := readReply(t, r2); got != "-ERR Protocol error: unauthenticated bulk length" {
		t.Fatalf("big bulk after a failed AUTH = %q", got)
	}
}

func TestPartialCommandDeadline(t *testing.T) {
	addr, _ := startServer(t, Config{PartialTimeout: 200 * time.Millisecond})
	c, r := dial(t, addr)
	io.WriteString(c, "*2\r\n$4\r\nECHO\r\n")
	// The connection is closed once the deadline passes with the command
	// still incomplete; the read below returns then, not at the 10 s dial
	// deadline.
	start := time.Now()
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("connection with a stalled command still open")
	}
	if time.Since(start) > 5*time.Second {
		t.Fatal("stalled command not cut off by its deadline")
	}
	// An idle connection (nothing partial) is not cut off.
	c2, r2 := dial(t, addr)
	io.WriteString(c2, encode("PING"))
	readReply(t, r2)
	time.Sleep(400 * time.Millisecond) // longer than PartialTimeout, while idle
	io.WriteString(c2, encode("PING"))
	if got := readReply(t, r2); got != "PONG" {
		t.Fatalf("idle connection after the partial timeout: %q", got)
	}
}

func TestProtectedModeDecision(t *testing.T) {
	for _, tc := range []struct {
		addr string
		want bool
	}{
		{"127.0.0.1:5000", true}, {"[::1]:5000", true}, {"10.1.2.3:5000", false}, {"192.168.0.9:1", false},
	} {
		a, _ := net.ResolveTCPAddr("tcp", tc.addr)
		if got := isLoopback(a); got != tc.want {
			t.Errorf("isLoopback(%s) = %v", tc.addr, got)
		}
	}
}

// Regression: a command whose name is the empty string indexed its first
// byte and panicked the connection's goroutine (found by FuzzCommandArgs).
func TestEmptyCommandName(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	io.WriteString(c, "*1\r\n$0\r\n\r\n"+encode("PING"))
	if got := readReply(t, r); got != "-ERR unknown command '', with args beginning with: " {
		t.Fatalf("empty command: %q", got)
	}
	if got := readReply(t, r); got != "PONG" {
		t.Fatalf("PING after it: %q", got)
	}
}
