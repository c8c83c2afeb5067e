// Package clienttest holds rlserver's end-to-end tests: real rlserver
// processes, built once per run, driven by go-redis, rueidis, redis-cli and
// raw TCP connections.
//
// This file is the harness. Every test starts its own process on a free
// loopback port with a temporary --dir, waits until that very process
// answers PING (polling with a deadline, never a fixed sleep), and stops it
// in t.Cleanup with SIGTERM (SIGKILL after a timeout). A server that exits
// with a non-zero status fails the test that started it, and its stderr is
// logged whenever that test fails, so a data race reported by a server built
// with -race, or a panic, fails the run.
//
// Limiter parameters in the tests are chosen so that wall-clock drift cannot
// change an assertion: rate 0.001/s (one token per 1000 s) refills nothing
// during a test, and fields that do move with time (retry_after_ms,
// reset_after_ms, PTTL) are checked against ranges. Exact timing belongs in
// the engine's tests.
package clienttest

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"github.com/rlserver/rlserver/internal/testport"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// testVersion is linked into the binary under test, so --version, HELLO and
// INFO can be checked exactly.
const testVersion = "1.2.3-clienttest"

// serverBin is the rlserver binary built by TestMain; use binary().
var serverBin string

var trackOnce sync.Once

// binary returns the rlserver binary. The first call also looks at every
// source file of the module (see trackSources).
func binary() string {
	trackOnce.Do(func() { trackSources("..") })
	return serverBin
}

// trackSources stats the module's Go sources and go.mod/go.sum, and lists
// its folders. The tests build rlserver in a subprocess, which go test's
// result cache does not see; the files this process opens and stats it
// does, so a change to the server's sources reruns the tests instead of
// replaying a cached pass. It must run inside a test (after m.Run starts
// logging), hence from binary().
func trackSources(root string) {
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "clienttest") {
				return filepath.SkipDir
			}
			if f, err := os.Open(path); err == nil {
				f.Readdirnames(-1)
				f.Close()
			}
			return nil
		}
		if strings.HasSuffix(name, ".go") || name == "go.mod" || name == "go.sum" {
			os.Stat(path)
		}
		return nil
	})
}

// testHooksTag is the build tag that compiles the test hooks into rlserver
// (RLSERVER_TEST_REMOTE_IP, RLSERVER_TEST_CRASH_BEFORE_RENAME; the files
// testhooks_on.go); a build without it ignores those variables.
const testHooksTag = "rlserver_testhooks"

// buildServer compiles ./cmd/rlserver into dir with the test hooks, and
// with the race detector when the tests themselves run with it, so races in
// the server fail the run too.
func buildServer(dir string, race bool) (string, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("the go command is needed to build rlserver: %v", err)
	}
	bin := filepath.Join(dir, "rlserver")
	args := []string{"build", "-tags", testHooksTag, "-o", bin, "-ldflags", "-X main.version=" + testVersion}
	if race {
		args = append(args, "-race")
	}
	args = append(args, "github.com/rlserver/rlserver/cmd/rlserver")
	cmd := exec.Command(goBin, args...)
	cmd.Dir = ".." // the module root; the tests run in clienttest/
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return bin, nil
}

const (
	readyTimeout = 20 * time.Second // start to first PONG, race build included
	stopTimeout  = 15 * time.Second // SIGTERM to exit before SIGKILL
	ioTimeout    = 20 * time.Second // any one read or write on a raw connection
)

// opts configures a server process.
type opts struct {
	args     []string // extra flags
	env      []string // extra environment, KEY=VALUE
	authPass string   // the password the readiness check must AUTH with
	addrEnv  bool     // give the address as RL_ADDR instead of --addr
	bin      string   // the program to start (default: the rlserver TestMain built)
}

// server is one rlserver process started by a test.
type server struct {
	t      testing.TB
	addr   string // 127.0.0.1:port
	port   int
	dir    string
	cmd    *exec.Cmd
	stdout *syncBuffer
	stderr *syncBuffer
	exited chan struct{} // closed once the process has been waited for
	state  *os.ProcessState
}

// start launches rlserver on a free loopback port and waits until it
// answers. A port taken between choosing and binding is retried.
func start(t testing.TB, o opts) *server {
	t.Helper()
	var lastErr error
	for range 5 {
		s, err := launch(t, o)
		if err == nil {
			return s
		}
		lastErr = err
		if !strings.Contains(s.stderr.String(), "address already in use") {
			t.Fatalf("rlserver did not start: %v\nstderr:\n%s", err, s.stderr)
		}
	}
	t.Fatalf("rlserver did not start after 5 ports: %v", lastErr)
	return nil
}

// freePort returns a loopback port that was free a moment ago
// (testport.Free: below the ephemeral range).
func freePort(t testing.TB) int { return testport.Free(t) }

// cleanEnv is the test process's environment without RL_* variables, so a
// developer's settings cannot change what the tests see. A race-enabled
// server would sleep a second at exit by default; 50 ms is enough for its
// reports to be written.
func cleanEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RL_") && !strings.HasPrefix(kv, "GORACE=") {
			env = append(env, kv)
		}
	}
	env = append(env, "GORACE="+os.Getenv("GORACE")+" atexit_sleep_ms=50")
	return append(env, extra...)
}

func launch(t testing.TB, o opts) (*server, error) {
	port := freePort(t)
	s := &server{
		t:      t,
		port:   port,
		addr:   net.JoinHostPort("127.0.0.1", strconv.Itoa(port)),
		dir:    t.TempDir(),
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	args := []string{"--dir", s.dir, "--log-level", "warn"}
	env := o.env
	if o.addrEnv {
		env = append(env[:len(env):len(env)], "RL_ADDR="+s.addr)
	} else {
		args = append(args, "--addr", s.addr)
	}
	bin := o.bin
	if bin == "" {
		bin = binary()
	}
	s.cmd = exec.Command(bin, append(args, o.args...)...)
	s.cmd.Env = cleanEnv(env...)
	s.cmd.Stdout = s.stdout
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", s.cmd.Path, err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.exited)
	}()
	if err := s.waitReady(o.authPass); err != nil {
		s.kill()
		return s, err
	}
	t.Cleanup(func() {
		code, err := s.stop()
		if err != nil {
			t.Errorf("stopping rlserver: %v", err)
		} else if code != 0 {
			t.Errorf("rlserver exited with status %d", code)
		}
		if t.Failed() {
			t.Logf("rlserver %s stderr:\n%s", s.addr, s.stderr)
		}
	})
	return s, nil
}

// waitReady polls until this very process answers PING on its address
// (INFO's process_id tells it apart from anything else on the port), the
// process exits, or readyTimeout passes.
func (s *server) waitReady(pass string) error {
	deadline := time.Now().Add(readyTimeout)
	poll := time.NewTicker(5 * time.Millisecond)
	defer poll.Stop()
	for {
		err := s.probe(pass)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("no PING reply from %s within %v: %v", s.addr, readyTimeout, err)
		}
		select {
		case <-s.exited:
			return fmt.Errorf("rlserver exited before answering PING: %v", s.state)
		case <-poll.C:
		}
	}
}

func (s *server) probe(pass string) error {
	c, err := net.DialTimeout("tcp", s.addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	req := "PING\r\nINFO server\r\n"
	if pass != "" {
		req = "AUTH " + pass + "\r\n" + req
	}
	if _, err := io.WriteString(c, req); err != nil {
		return err
	}
	if pass != "" {
		if v, err := readValue(r); err != nil || v.str != "OK" {
			return fmt.Errorf("AUTH: %v %v", v, err)
		}
	}
	if v, err := readValue(r); err != nil || v.kind != '+' || v.str != "PONG" {
		return fmt.Errorf("PING: %v %v", v, err)
	}
	v, err := readValue(r)
	if err != nil {
		return err
	}
	want := "process_id:" + strconv.Itoa(s.cmd.Process.Pid) + "\r\n"
	if !strings.Contains(v.str, want) {
		return fmt.Errorf("another server answers on %s", s.addr)
	}
	return nil
}

// signal sends sig to the process.
func (s *server) signal(sig os.Signal) {
	s.t.Helper()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signalling rlserver: %v", err)
	}
}

// wait waits up to timeout for the process to exit and returns its status.
func (s *server) wait(timeout time.Duration) (int, error) {
	t := time.NewTimer(timeout)
	defer t.Stop()
	select {
	case <-s.exited:
		return s.state.ExitCode(), nil
	case <-t.C:
		return -1, fmt.Errorf("rlserver still running %v after the signal", timeout)
	}
}

// stop ends the process with SIGTERM (SIGKILL after stopTimeout) and
// returns its exit status. It is safe to call after the process exited.
func (s *server) stop() (int, error) {
	select {
	case <-s.exited:
		return s.state.ExitCode(), nil
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	code, err := s.wait(stopTimeout)
	if err != nil {
		s.kill()
	}
	return code, err
}

func (s *server) kill() {
	s.cmd.Process.Kill()
	<-s.exited
}

// syncBuffer is a bytes.Buffer safe for the process's writer and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// rawConn is a plain TCP connection for byte-exact checks.
type rawConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

// raw opens a raw connection to the server, closed at cleanup.
func (s *server) raw(t testing.TB) *rawConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
	if err != nil {
		t.Fatalf("dial %s: %v", s.addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &rawConn{t: t, c: c, r: bufio.NewReader(c)}
}

// send writes the bytes of s.
func (rc *rawConn) send(s string) {
	rc.t.Helper()
	rc.c.SetWriteDeadline(time.Now().Add(ioTimeout))
	if _, err := io.WriteString(rc.c, s); err != nil {
		rc.t.Fatalf("write %q: %v", s, err)
	}
}

// expect reads exactly len(want) bytes and compares them with want.
func (rc *rawConn) expect(want string) {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(ioTimeout))
	got := make([]byte, len(want))
	n, err := io.ReadFull(rc.r, got)
	if err != nil || string(got) != want {
		rc.t.Fatalf("read %q (%v), want %q", got[:n], err, want)
	}
}

// do sends s and expects want.
func (rc *rawConn) do(s, want string) {
	rc.t.Helper()
	rc.send(s)
	rc.expect(want)
}

// read reads one reply.
func (rc *rawConn) read() value {
	rc.t.Helper()
	return rc.readWithin(ioTimeout)
}

// readWithin reads one reply that may take up to d.
func (rc *rawConn) readWithin(d time.Duration) value {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(d))
	v, err := readValue(rc.r)
	if err != nil {
		rc.t.Fatalf("reading a reply: %v", err)
	}
	return v
}

// expectEOF checks that the server closes the connection with nothing more
// to say.
func (rc *rawConn) expectEOF() {
	rc.t.Helper()
	rc.c.SetReadDeadline(time.Now().Add(ioTimeout))
	b, err := rc.r.ReadByte()
	if err == nil {
		rest, _ := rc.r.Peek(rc.r.Buffered())
		rc.t.Fatalf("read %q, want the connection closed", append([]byte{b}, rest...))
	}
	if !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET) {
		rc.t.Fatalf("read error %v, want the connection closed", err)
	}
}

// value is one RESP2 or RESP3 reply.
type value struct {
	kind  byte    // the type byte: + - : $ * % ~ _ = , # ( > |
	str   string  // simple, error, bulk, verbatim (without its format), double, big number
	num   int64   // integer; boolean as 0/1
	null  bool    // RESP2 null bulk or array, RESP3 null
	elems []value // array, set, push; a map's keys and values alternate
}

// String renders the value compactly for messages and exact comparisons:
// integers as :n, strings quoted, errors as -text, aggregates in brackets
// after their type byte.
func (v value) String() string {
	switch {
	case v.null:
		return "(nil)"
	case v.kind == ':' || v.kind == '#':
		return ":" + strconv.FormatInt(v.num, 10)
	case v.kind == '+':
		return "+" + v.str
	case v.kind == '-':
		return "-" + v.str
	case v.kind == '*' || v.kind == '%' || v.kind == '~' || v.kind == '>' || v.kind == '|':
		parts := make([]string, len(v.elems))
		for i, e := range v.elems {
			parts[i] = e.String()
		}
		return string(v.kind) + "[" + strings.Join(parts, " ") + "]"
	}
	return strconv.Quote(v.str)
}

// mapOf returns a map reply (or a RESP2 array of pairs) as a Go map keyed
// by the string form of each key.
func (v value) mapOf() map[string]value {
	m := map[string]value{}
	for i := 0; i+1 < len(v.elems); i += 2 {
		m[v.elems[i].str] = v.elems[i+1]
	}
	return m
}

const maxReplyLen = 64 << 20

// readValue parses one reply.
func readValue(r *bufio.Reader) (value, error) {
	line, err := r.ReadString('\n')
	if err != nil {
		return value{}, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return value{}, fmt.Errorf("malformed reply line %q", line)
	}
	v := value{kind: line[0]}
	body := line[1 : len(line)-2]
	switch v.kind {
	case '+', '-', ',', '(':
		v.str = body
	case ':':
		v.num, err = strconv.ParseInt(body, 10, 64)
	case '#':
		switch body {
		case "t":
			v.num = 1
		case "f":
		default:
			err = fmt.Errorf("bad boolean %q", line)
		}
	case '_':
		v.null = true
	case '$', '=', '!':
		n, perr := strconv.Atoi(body)
		if perr != nil || n < -1 || n > maxReplyLen {
			return v, fmt.Errorf("bad length in %q", line)
		}
		if n == -1 {
			v.null = true
			return v, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			return v, err
		}
		if string(buf[n:]) != "\r\n" {
			return v, fmt.Errorf("bulk of %d bytes not followed by CRLF", n)
		}
		v.str = string(buf[:n])
		if v.kind == '=' {
			if len(v.str) < 4 || v.str[3] != ':' {
				return v, fmt.Errorf("bad verbatim string %q", v.str)
			}
			v.str = v.str[4:]
		}
		if v.kind == '!' {
			v.kind = '-'
		}
	case '*', '%', '~', '>', '|':
		n, perr := strconv.Atoi(body)
		if perr != nil || n < -1 || n > maxReplyLen {
			return v, fmt.Errorf("bad length in %q", line)
		}
		if n == -1 {
			v.null = true
			return v, nil
		}
		if v.kind == '%' || v.kind == '|' {
			n *= 2
		}
		v.elems = make([]value, 0, n)
		for range n {
			e, err := readValue(r)
			if err != nil {
				return v, err
			}
			v.elems = append(v.elems, e)
		}
		if v.kind == '|' { // attributes precede the reply they describe
			return readValue(r)
		}
	default:
		err = fmt.Errorf("unknown reply type in %q", line)
	}
	return v, err
}
