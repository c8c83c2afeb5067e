package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The process: signals, flags, environment, start-up failures, and the
// byte-stream guard seen from outside.

// runBinary runs rlserver to completion (it must exit by itself) and
// returns its stdout, stderr and exit status.
func runBinary(t *testing.T, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary(), args...)
	cmd.Env = cleanEnv(env...)
	cmd.Dir = t.TempDir() // the default --dir ./data lands here
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("rlserver %q did not exit: stderr %q", args, errOut.String())
	}
	if _, ok := err.(*exec.ExitError); err != nil && !ok {
		t.Fatalf("rlserver %q: %v", args, err)
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

func TestHelpAndVersion(t *testing.T) {
	t.Parallel()
	out, errOut, code := runBinary(t, nil, "--help")
	if code != 0 || errOut != "" {
		t.Errorf("--help: status %d, stderr %q", code, errOut)
	}
	for _, flag := range []string{"addr", "shards", "dir", "requirepass", "log-level", "version"} {
		if !strings.Contains(out, "\n  -"+flag+" ") && !strings.Contains(out, "\n  -"+flag+"\n") {
			t.Errorf("--help does not document --%s:\n%s", flag, out)
		}
	}
	for _, s := range []string{"RL_<NAME>", "RL_ADDR", `(default "127.0.0.1:6379")`, `(default "./data")`} {
		if !strings.Contains(out, s) {
			t.Errorf("--help does not mention %s:\n%s", s, out)
		}
	}
	// Every flag listed has a description line under it.
	lines := strings.Split(out, "\n")
	for i, l := range lines {
		if strings.HasPrefix(l, "  -") && (i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "    \t") || len(lines[i+1]) < 10) {
			t.Errorf("--help: flag line %q has no description", l)
		}
	}
	if out2, _, code := runBinary(t, nil, "-h"); code != 0 || out2 != out {
		t.Errorf("-h: status %d, output differs from --help", code)
	}

	out, errOut, code = runBinary(t, nil, "--version")
	if out != "rlserver "+testVersion+"\n" || errOut != "" || code != 0 {
		t.Errorf("--version = %q (stderr %q, status %d), want %q", out, errOut, code, "rlserver "+testVersion+"\n")
	}
}

func TestStartupErrors(t *testing.T) {
	t.Parallel()
	// A port already in use.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	busy := ln.Addr().String()

	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	free := "127.0.0.1:" + strconv.Itoa(freePort(t))
	for _, tc := range []struct {
		env  []string
		args []string
		want string // the whole of stderr
	}{
		{nil, []string{"--addr", busy}, "rlserver: cannot listen on " + busy + ": bind: address already in use (--addr or RL_ADDR picks another address)\n"},
		{nil, []string{"--addr", "127.0.0.1:99999"}, "rlserver: cannot listen on 127.0.0.1:99999: "},
		{nil, []string{"--addr", free, "--shards", "0"}, "rlserver: invalid value 0 for --shards: must be between 1 and 4096\n"},
		{nil, []string{"--addr", free, "--shards", "-3"}, "rlserver: invalid value -3 for --shards: must be between 1 and 4096\n"},
		{nil, []string{"--addr", free, "--shards", "5000"}, "rlserver: invalid value 5000 for --shards: must be between 1 and 4096\n"},
		{nil, []string{"--addr", free, "--shards", "abc"}, "rlserver: invalid value \"abc\" for flag -shards: parse error (see rlserver --help)\n"},
		{nil, []string{"--addr", free, "--log-level", "loud"}, "rlserver: invalid value \"loud\" for --log-level: use debug, info, warn or error\n"},
		{nil, []string{"--addr", free, "--nosuch"}, "rlserver: flag provided but not defined: -nosuch (see rlserver --help)\n"},
		{nil, []string{"--addr", free, "extra"}, "rlserver: unexpected argument \"extra\" (see rlserver --help)\n"},
		{nil, []string{"--addr", free, "--dir", filepath.Join(file, "sub")}, "rlserver: data folder " + filepath.Join(file, "sub") + ": not a directory\n"},
		{nil, []string{"--addr", free, "--dir", file}, "rlserver: data folder " + file + ": not a directory\n"},
		{[]string{"RL_SHARDS=abc"}, []string{"--addr", free}, "rlserver: invalid value \"abc\" for RL_SHARDS: parse error\n"},
		{[]string{"RL_LOG_LEVEL=loud"}, []string{"--addr", free}, "rlserver: invalid value \"loud\" for --log-level: use debug, info, warn or error\n"},
		{[]string{"RL_ADDR=" + busy}, nil, "rlserver: cannot listen on " + busy + ": bind: address already in use (--addr or RL_ADDR picks another address)\n"},
	} {
		args := append([]string{"--dir", t.TempDir()}, tc.args...)
		out, errOut, code := runBinary(t, tc.env, args...)
		ok := errOut == tc.want
		if !strings.HasSuffix(tc.want, "\n") { // a prefix: the OS words the rest
			ok = strings.HasPrefix(errOut, tc.want) && strings.Count(errOut, "\n") == 1 && strings.HasSuffix(errOut, "\n")
		}
		if !ok || code == 0 || out != "" {
			t.Errorf("rlserver %v %q: stderr %q, stdout %q, status %d; want one line %q and a non-zero status",
				tc.env, tc.args, errOut, out, code, tc.want)
		}
	}
}

func TestEnvironment(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	// RL_ADDR alone.
	s := start(t, opts{addrEnv: true})
	c := newGoRedis(t, s, nil)
	if got, err := c.ConfigGet(ctx, "port").Result(); err != nil || got["port"] != strconv.Itoa(s.port) {
		t.Errorf("with RL_ADDR: CONFIG GET port = %v, %v; want %d", got, err, s.port)
	}
	// The flag wins over RL_ADDR; the other settings come from the environment.
	other := "127.0.0.1:" + strconv.Itoa(freePort(t))
	s = start(t, opts{
		env:      []string{"RL_ADDR=" + other, "RL_SHARDS=3", "RL_REQUIREPASS=envpass", "RL_LOG_LEVEL=error"},
		args:     []string{"--log-level", "warn"},
		authPass: "envpass",
	})
	c = newGoRedis(t, s, &redis.Options{Password: "envpass"})
	got, err := c.ConfigGet(ctx, "*").Result()
	if err != nil || got["port"] != strconv.Itoa(s.port) || got["shards"] != "3" || got["loglevel"] != "warn" {
		t.Errorf("CONFIG GET * = %v, %v; want port %d, shards 3, loglevel warn", got, err, s.port)
	}
	if conn, err := net.DialTimeout("tcp", other, time.Second); err == nil {
		conn.Close()
		t.Errorf("something listens on %s, the address RL_ADDR gave but --addr overrode", other)
	}
	noPass := newGoRedis(t, s, &redis.Options{MaxRetries: -1})
	if err := noPass.Ping(ctx).Err(); err == nil || err.Error() != "NOAUTH Authentication required." {
		t.Errorf("PING without the RL_REQUIREPASS password: %v", err)
	}
	// --shards overrides RL_SHARDS.
	s = start(t, opts{env: []string{"RL_SHARDS=3"}, args: []string{"--shards", "1"}})
	c = newGoRedis(t, s, nil)
	if got, err := c.ConfigGet(ctx, "shards").Result(); err != nil || got["shards"] != "1" {
		t.Errorf("CONFIG GET shards = %v, %v; want 1", got, err)
	}
}

// TestSysmonSetting: the server re-executes itself (same process id) with
// GODEBUG's schedtrace set, which keeps the runtime's sysmon out of the
// deep sleep whose wake-ups cost a Raft node 15-18% of its CPU
// (internal/sysmon); other GODEBUG settings are kept, and a
// schedtrace the operator set (schedtrace=0 turns this off) is left alone.
func TestSysmonSetting(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ env, want string }{
		{"", "schedtrace=2147483647"},
		{"GODEBUG=madvdontneed=1", "madvdontneed=1,schedtrace=2147483647"},
		{"GODEBUG=schedtrace=0", "schedtrace=0"},
	} {
		var env []string
		if tc.env != "" {
			env = []string{tc.env}
		} else {
			env = []string{"GODEBUG="} // empty, whatever the test's own is
		}
		s := start(t, opts{env: env})
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", s.cmd.Process.Pid))
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, kv := range strings.Split(string(raw), "\x00") {
			if v, ok := strings.CutPrefix(kv, "GODEBUG="); ok {
				got = append(got, v)
			}
		}
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("started with %q: the running server's GODEBUG = %q, want exactly [%q]", tc.env, got, tc.want)
		}
		if err := newGoRedis(t, s, nil).Ping(context.Background()).Err(); err != nil {
			t.Errorf("started with %q: PING: %v", tc.env, err)
		}
	}
}

// TestServerThroughSymlinkKeepsName: a server started through a symlink
// keeps the symlink's name after it re-executes itself with GODEBUG's
// schedtrace set: /proc/<pid>/comm (what ps shows and pgrep matches) and
// argv[0] in /proc/<pid>/cmdline. Regression (issue 31): it re-executed
// the symlink's target, and ps and pgrep showed "rlserver".
func TestServerThroughSymlinkKeepsName(t *testing.T) {
	t.Parallel()
	link := filepath.Join(t.TempDir(), "rl-edge-7")
	if err := os.Symlink(binary(), link); err != nil {
		t.Fatal(err)
	}
	s := start(t, opts{bin: link})
	pid := s.cmd.Process.Pid
	comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
	if err != nil {
		t.Fatal(err)
	}
	cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		t.Fatal(err)
	}
	environ, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	argv0, _, _ := strings.Cut(string(cmdline), "\x00")
	if got := strings.TrimSpace(string(comm)); got != "rl-edge-7" {
		t.Errorf("/proc/%d/comm = %q, want %q", pid, got, "rl-edge-7")
	}
	if argv0 != link {
		t.Errorf("/proc/%d/cmdline's argv[0] = %q, want %q", pid, argv0, link)
	}
	if !strings.Contains(string(environ), "GODEBUG=schedtrace=2147483647\x00") {
		t.Errorf("the server did not re-execute itself with schedtrace set: environ %q", environ)
	}
	if out, err := exec.Command("pgrep", "-x", "rl-edge-7").Output(); err == nil && !strings.Contains(" "+strings.Join(strings.Fields(string(out)), " ")+" ", fmt.Sprintf(" %d ", pid)) {
		t.Errorf("pgrep -x rl-edge-7 = %q, want pid %d among them", out, pid)
	}
}

// sigtermClient pipelines RL.ALLOW on its own key and ECHO of the command
// index over a raw connection, and checks every reply that arrives.
type sigtermClient struct {
	conn    net.Conn
	key     string
	sent    atomic.Int64 // commands written
	checked atomic.Int64 // replies read and found correct
	err     error        // the first wrong reply
}

const (
	sigtermCapacity = 1_000_000 // at slowRate: tau = 1e18 ns, within the 2^60 limit
	sigtermMaxCmds  = 400_000   // per client; at most 360,000 RL.ALLOW, well under capacity
	sigtermBatch    = 100
)

// command returns the i-th command and how many RL.ALLOW precede it
// (including itself).
func (c *sigtermClient) command(i int64) string {
	if i%10 == 9 {
		return "ECHO " + strconv.FormatInt(i, 10) + "\r\n"
	}
	return "RL.ALLOW " + c.key + " 1000000 0.001\r\n"
}

func (c *sigtermClient) write() {
	var b []byte
	for i := int64(0); i < sigtermMaxCmds; {
		b = b[:0]
		for range sigtermBatch {
			b = append(b, c.command(i)...)
			i++
		}
		c.conn.SetWriteDeadline(time.Now().Add(ioTimeout))
		if _, err := c.conn.Write(b); err != nil {
			return // the server closed the connection
		}
		c.sent.Add(sigtermBatch)
	}
}

func (c *sigtermClient) read() {
	r := bufio.NewReaderSize(c.conn, 1<<16)
	allows := int64(0)
	for i := int64(0); ; i++ {
		c.conn.SetReadDeadline(time.Now().Add(ioTimeout))
		v, err := readValue(r)
		if err != nil {
			return // the end of the stream, possibly inside a reply
		}
		var want string
		if i%10 == 9 {
			want = strconv.Quote(strconv.FormatInt(i, 10))
		} else {
			allows++
			want = fmt.Sprintf("*[:1 :%d :0 ", sigtermCapacity-allows)
		}
		if got := v.String(); !strings.HasPrefix(got, want) {
			c.err = fmt.Errorf("reply %d = %s, want %s...", i, got, want)
			return
		}
		c.checked.Add(1)
	}
}

func TestSIGTERMWhilePipelining(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	clients := make([]*sigtermClient, 8)
	var wg sync.WaitGroup
	for i := range clients {
		c := &sigtermClient{conn: s.raw(t).c, key: "sig" + strconv.Itoa(i)}
		clients[i] = c
		wg.Go(c.write)
		wg.Go(c.read)
	}
	// Signal once every client has had replies: commands are in flight.
	waitFor(t, "replies on every connection", func() bool {
		for _, c := range clients {
			if c.checked.Load() < 2000 || c.err != nil {
				return c.err != nil
			}
		}
		return true
	})
	before := make([]int64, len(clients))
	for i, c := range clients {
		before[i] = c.checked.Load()
	}
	s.signal(syscall.SIGTERM)
	code, err := s.wait(stopTimeout)
	if err != nil {
		t.Fatal(err)
	}
	if code != 0 {
		t.Errorf("exit status %d after SIGTERM, want 0", code)
	}
	wg.Wait() // the server closed every connection
	for i, c := range clients {
		if c.err != nil {
			t.Errorf("client %d: %v", i, c.err)
		}
		if n := c.checked.Load(); n < before[i] || n > c.sent.Load() {
			t.Errorf("client %d: %d correct replies, %d before the signal, %d commands sent", i, n, before[i], c.sent.Load())
		}
		t.Logf("client %d: %d commands sent, %d replies checked, %d of them before the signal", i, c.sent.Load(), c.checked.Load(), before[i])
		if c.sent.Load() >= sigtermMaxCmds {
			t.Errorf("client %d sent all its commands before the server stopped: nothing was in flight", i)
		}
	}
}

func TestProtocolGuard(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	// Clients connected before, and served throughout.
	other := s.raw(t)
	other.do("PING\r\n", "+PONG\r\n")
	c := newGoRedis(t, s, nil)
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "g", 5, slowRate)

	for _, tc := range []struct{ name, send, want string }{
		{"bulk length overflowing int64", "*1\r\n$9223372036854775807\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"answered after the commands before it", "PING\r\n*1\r\n$9223372036854775807\r\n", "+PONG\r\n-ERR Protocol error: invalid bulk length\r\n"},
		{"bulk above 8 MiB", "*2\r\n$4\r\nECHO\r\n$8388609\r\n", "-ERR Protocol error: invalid bulk length\r\n"},
		{"huge multibulk count", "*2147483648\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"1,048,577 arguments", "*1048577\r\n", "-ERR Protocol error: invalid multibulk length\r\n"},
		{"not a bulk", "*1\r\nx", "-ERR Protocol error: expected '$', got 'x'\r\n"},
		{"inline line over 64 KiB", "PING " + strings.Repeat("a", 64<<10), "-ERR Protocol error: too big inline request\r\n"},
	} {
		bad := s.raw(t)
		bad.send(tc.send)
		bad.expect(tc.want)
		bad.expectEOF()
		// Everyone else is still served.
		other.do("EXISTS g\r\n", ":1\r\n")
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatalf("after %s: PING: %v", tc.name, err)
		}
	}
	// The limits themselves are fine: an 8 MiB bulk, 1024 arguments.
	big := strings.Repeat("x", 8<<20)
	if got, err := c.Echo(ctx, big).Result(); err != nil || got != big {
		t.Errorf("ECHO of 8 MiB: %d bytes, %v", len(got), err)
	}
	args := []any{"EXISTS"}
	for range 1023 {
		args = append(args, "g")
	}
	wantInt(t, c, 1023, args...)
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "g", 5, slowRate)
	other.do("PING\r\n", "+PONG\r\n")
	if _, err := io.WriteString(other.c, "QUIT\r\n"); err != nil {
		t.Fatal(err)
	}
	other.expect("+OK\r\n")
}

// Regression: the background sweeper (every 100 ms) was not waited for
// before the engine closed its shard queues at shutdown, so a sweep in
// flight could send on a closed channel; a race-enabled server reported the
// race and exited with status 66. The race is seen only when the last
// sweeps come after the last command that reached the engine (any such
// command orders the sweeps before the shutdown), so the server answers
// PINGs, which never reach it, for a few sweep intervals before the signal.
func TestShutdownWaitsForSweeper(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	do(t, c, "RL.ALLOW", "sweep", 1, "1000000") // full again at once: sweepable
	for begin := time.Now(); time.Since(begin) < 350*time.Millisecond; {
		do(t, c, "PING")
	}
	s.signal(syscall.SIGTERM)
	if code, err := s.wait(stopTimeout); err != nil || code != 0 {
		t.Errorf("after SIGTERM: status %d, %v; want 0\nstderr:\n%s", code, err, s.stderr)
	}
}
