// Package envoy runs envoy's ratelimit service (github.com/envoyproxy/ratelimit,
// its Redis backend, unchanged, built from its Go module) against rlserver:
// envoy's fixed-window limiter pipelines INCRBY key n and EXPIRE key s for
// every descriptor, and decides from the INCRBY reply, so the limit it
// enforces is exactly what rlserver's counters say (issue 20).
//
// This is a module of its own (go.mod here, module
// github.com/rlserver/rlserver/clienttest/envoy) so that envoy's large
// dependency tree never enters rlserver's go.mod. The ratelimit service is
// a tool of this module (the tool line of go.mod), so its version and every
// dependency's come from this module's go.mod and go.sum. make test runs
// it after the main module's tests.
package envoy

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	ratelimitcommon "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rls "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

const (
	// The ratelimit service's configuration: one descriptor, 5 a minute.
	domain    = "rl"
	descKey   = "api"
	descValue = "k1"
	limit     = 5
	calls     = 7 // two past the limit

	configYAML = `domain: rl
descriptors:
  - key: api
    value: k1
    rate_limit:
      unit: minute
      requests_per_unit: 5
`

	readyTimeout = 60 * time.Second // start to ready (a race build of rlserver, 2 cores)
	stopTimeout  = 15 * time.Second // SIGTERM to exit before SIGKILL
	ioTimeout    = 20 * time.Second // one RESP round trip, one gRPC call
)

// The build under -race is also a race build of rlserver (race_test.go), so
// a data race in the server's handling of envoy's commands fails the test.
var raceEnabled bool

// TestEnvoyRatelimit builds envoy's ratelimit service and rlserver, starts
// both (the service's Redis is rlserver), and asks the service 7 times
// about a descriptor limited to 5 a minute: the first 5 answers must be OK
// and the 6th and 7th OVER_LIMIT. Then it reads the counter envoy wrote
// straight from rlserver: value 7 (envoy counts denied requests too) and a
// TTL, so the count lived in rlserver, not in the service.
//
// The redis-server subtest runs the same against a real Redis (Debian's
// redis-server), so a fault of the harness tells itself apart from one of
// rlserver; it is skipped without redis-server, unless CI is set.
func TestEnvoyRatelimit(t *testing.T) {
	root := repoRoot(t)
	trackSources(root)
	os.Stat("go.mod") // the ratelimit service's version, for the same reason
	os.Stat("go.sum")
	bin := t.TempDir()
	ratelimitBin := buildRatelimit(t, bin)

	t.Run("rlserver", func(t *testing.T) {
		start := time.Now()
		backend := startRlserver(t, buildRlserver(t, root, bin))
		t.Logf("built and started rlserver in %v", time.Since(start).Round(time.Millisecond))
		enforce(t, ratelimitBin, backend)
	})
	t.Run("redis-server", func(t *testing.T) {
		enforce(t, ratelimitBin, startRedisServer(t))
	})
}

// enforce starts the ratelimit service with backend as its Redis and checks
// the limit it enforces and the counter it leaves in backend.
func enforce(t *testing.T, ratelimitBin string, backend *proc) {
	t1 := time.Now()
	svc := startRatelimit(t, ratelimitBin, backend.addr)
	t.Logf("ratelimit service ready in %v", time.Since(t1).Round(time.Millisecond))

	conn, err := grpc.NewClient(svc.grpcAddr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatalf("gRPC client for %s: %v", svc.grpcAddr, err)
	}
	defer conn.Close()
	client := rls.NewRateLimitServiceClient(conn)

	// Envoy's window is the current minute of the clock (the cache key ends
	// in unix time / 60 * 60): stay clear of its end so that the 7 calls
	// fall in one window.
	if s := time.Now().Unix() % 60; s >= 55 {
		wait := time.Duration(60-s)*time.Second + 200*time.Millisecond
		t.Logf("%ds into the minute: waiting %v for a fresh window", s, wait)
		time.Sleep(wait)
	}
	window := time.Now().Unix() / 60 * 60
	req := &rls.RateLimitRequest{
		Domain: domain,
		Descriptors: []*ratelimitcommon.RateLimitDescriptor{{
			Entries: []*ratelimitcommon.RateLimitDescriptor_Entry{{Key: descKey, Value: descValue}},
		}},
	}
	t2 := time.Now()
	for i := 1; i <= calls; i++ {
		ctx, cancel := context.WithTimeout(context.Background(), ioTimeout)
		resp, err := client.ShouldRateLimit(ctx, req)
		cancel()
		if err != nil {
			svc.dumpLog(t)
			t.Fatalf("call %d: ShouldRateLimit: %v", i, err)
		}
		want := rls.RateLimitResponse_OK
		if i > limit {
			want = rls.RateLimitResponse_OVER_LIMIT
		}
		if resp.GetOverallCode() != want {
			t.Errorf("call %d: overall code %v, want %v", i, resp.GetOverallCode(), want)
		}
		st := resp.GetStatuses()
		if len(st) != 1 {
			t.Fatalf("call %d: %d descriptor statuses, want 1: %v", i, len(st), resp)
		}
		remaining := uint32(max(limit-i, 0))
		if st[0].GetCode() != want || st[0].GetLimitRemaining() != remaining ||
			st[0].GetCurrentLimit().GetRequestsPerUnit() != limit {
			t.Errorf("call %d: status %v, want code %v, limit_remaining %d, requests_per_unit %d",
				i, st[0], want, remaining, limit)
		}
	}
	t.Logf("%d ShouldRateLimit calls in %v", calls, time.Since(t2).Round(time.Millisecond))
	if w := time.Now().Unix() / 60 * 60; w != window {
		t.Fatalf("the calls spanned two windows (%d and %d): the clock jumped or the calls took %v",
			window, w, time.Since(t2))
	}

	// The counter, read from the backend itself.
	key := fmt.Sprintf("%s_%s_%s_%d", domain, descKey, descValue, window)
	c := dialRESP(t, backend.addr)
	if v, err := c.do("GET", key); err != nil || v != strconv.Itoa(calls) {
		t.Errorf("GET %s = %q, %v; want %q", key, v, err, strconv.Itoa(calls))
	}
	// EXPIRE's argument is 60 s plus a jitter below
	// EXPIRATION_JITTER_MAX_SECONDS (300 by default).
	if v, err := c.do("TTL", key); err != nil {
		t.Errorf("TTL %s: %v", key, err)
	} else if n, err := strconv.Atoi(v); err != nil || n <= 0 || n > 60+300 {
		t.Errorf("TTL %s = %q, want 1 to 360 seconds", key, v)
	}
	if t.Failed() {
		svc.dumpLog(t)
	}
}

// repoRoot is rlserver's module root, two folders up from this test's.
func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil || !bytes.HasPrefix(b, []byte("module github.com/rlserver/rlserver\n")) {
		t.Fatalf("%s is not rlserver's module root (go.mod: %v)", root, err)
	}
	return root
}

// trackSources stats rlserver's Go sources and go.mod/go.sum and lists its
// folders (as clienttest/harness.go does): rlserver is built in a
// subprocess, which go test's result cache does not see, so without this a
// change to the server would replay a cached pass.
func trackSources(root string) {
	filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		name := d.Name()
		if d.IsDir() {
			if path != root && (strings.HasPrefix(name, ".") || name == "testdata" || name == "clienttest" || name == "node_modules") {
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

func goBuild(t *testing.T, dir string, args ...string) {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		t.Fatalf("the go command is needed: %v", err)
	}
	start := time.Now()
	cmd := exec.Command(goBin, append([]string{"build"}, args...)...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build %s (in %s): %v\n%s", strings.Join(args, " "), dir, err, out)
	}
	t.Logf("go build %s: %v", args[len(args)-1], time.Since(start).Round(time.Millisecond))
}

// buildRatelimit builds envoy's ratelimit service at the version this
// module's go.mod requires.
func buildRatelimit(t *testing.T, dir string) string {
	bin := filepath.Join(dir, "ratelimit")
	goBuild(t, ".", "-o", bin, "github.com/envoyproxy/ratelimit/src/service_cmd")
	return bin
}

// buildRlserver builds ./cmd/rlserver from the parent module, with the race
// detector when this test runs with it.
func buildRlserver(t *testing.T, root, dir string) string {
	bin := filepath.Join(dir, "rlserver")
	args := []string{"-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	goBuild(t, root, append(args, "./cmd/rlserver")...)
	return bin
}

// proc is one process started by this test; Cleanup stops it.
type proc struct {
	name      string
	mustExit0 bool   // a backend: SIGTERM must end it with status 0
	addr      string // the backend's RESP address; empty for the service
	cmd       *exec.Cmd
	out       *syncBuffer // stdout and stderr
	exited    chan struct{}
	state     *os.ProcessState
}

// spawn starts bin and registers its stop. A backend (rlserver, redis-server)
// must exit with status 0 on SIGTERM; the ratelimit service is only stopped.
func spawn(t *testing.T, name string, mustExit0 bool, env []string, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, mustExit0: mustExit0, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		p.cmd.Wait()
		p.state = p.cmd.ProcessState
		close(p.exited)
	}()
	t.Cleanup(func() {
		code, err := p.stop()
		switch {
		case err != nil:
			t.Errorf("stopping %s: %v", name, err)
		case p.mustExit0 && code != 0:
			t.Errorf("%s exited with status %d", name, code)
		}
		if t.Failed() && name != "ratelimit" {
			t.Logf("%s output:\n%s", name, p.out)
		}
	})
	return p
}

// stop ends the process with SIGTERM, SIGKILL after stopTimeout, and
// returns its exit status.
func (p *proc) stop() (int, error) {
	select {
	case <-p.exited:
		return p.state.ExitCode(), nil
	default:
	}
	p.cmd.Process.Signal(syscall.SIGTERM)
	timer := time.NewTimer(stopTimeout)
	defer timer.Stop()
	select {
	case <-p.exited:
		return p.state.ExitCode(), nil
	case <-timer.C:
		p.cmd.Process.Kill()
		<-p.exited
		return -1, fmt.Errorf("still running %v after SIGTERM; killed", stopTimeout)
	}
}

// respReady is a readiness check for a RESP server: PING answered, by this
// very process (INFO's process_id), so a stray server on the port cannot
// pass for it.
func (p *proc) respReady() error {
	c, err := net.DialTimeout("tcp", p.addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	rc := &respConn{c: c, r: bufio.NewReader(c)}
	if v, err := rc.do("PING"); err != nil || v != "PONG" {
		return fmt.Errorf("PING: %q %v", v, err)
	}
	v, err := rc.do("INFO", "server")
	if err != nil {
		return err
	}
	if !strings.Contains(v, "process_id:"+strconv.Itoa(p.cmd.Process.Pid)+"\r\n") {
		return fmt.Errorf("another server answers on %s", p.addr)
	}
	return nil
}

// baseEnv is the environment of a started process: PATH and HOME only, so
// the developer's or CI's variables (RL_*, PORT, REDIS_URL...) cannot
// change what the test sees.
func baseEnv(extra ...string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=" + os.Getenv("HOME")}
	if raceEnabled {
		// A race build sleeps a second at exit by default.
		env = append(env, "GORACE=atexit_sleep_ms=50")
	}
	return append(env, extra...)
}

func startRlserver(t *testing.T, bin string) *proc {
	t.Helper()
	for range 5 {
		addr := freeAddr(t)
		p := spawn(t, "rlserver", true, baseEnv(), bin, "--addr", addr, "--dir", t.TempDir(), "--log-level", "warn")
		p.addr = addr
		if err := tryReady(p, p.respReady); err == nil {
			return p
		} else if !strings.Contains(p.out.String(), "address already in use") {
			t.Fatalf("rlserver not ready: %v (its output follows)", err)
		}
		p.mustExit0 = false // its port was taken: try another
		p.stop()
	}
	t.Fatal("rlserver did not start on 5 ports")
	return nil
}

func startRedisServer(t *testing.T) *proc {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server is not on PATH (CI is set, so the comparison with Redis must run): %v", err)
		}
		t.Skipf("redis-server is not on PATH: %v", err)
	}
	addr := freeAddr(t)
	_, port, _ := net.SplitHostPort(addr)
	p := spawn(t, "redis-server", true, baseEnv(), bin, "--bind", "127.0.0.1", "--port", port,
		"--dir", t.TempDir(), "--save", "", "--appendonly", "no")
	p.addr = addr
	if err := tryReady(p, p.respReady); err != nil {
		t.Fatalf("redis-server not ready: %v (its output follows)", err)
	}
	return p
}

// tryReady is waitReady returning the error instead of failing, for a
// start that may retry on another port.
func tryReady(p *proc, ready func() error) error {
	deadline := time.Now().Add(readyTimeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-p.exited:
			return fmt.Errorf("exited (%v): %v", p.state, err)
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// service is a started ratelimit service.
type service struct {
	*proc
	grpcAddr string
	dumped   bool
}

// startRatelimit writes the configuration and starts the service, with
// rlserver at redisAddr as its Redis, on free loopback ports; ready once its
// /healthcheck answers 200 (after the configuration loaded and Redis
// connected).
func startRatelimit(t *testing.T, bin, redisAddr string) *service {
	t.Helper()
	// RUNTIME_ROOT/RUNTIME_SUBDIRECTORY/config/*.yaml is read at start
	// (RUNTIME_WATCH_ROOT=false: the root is not a symlink to watch).
	runtime := t.TempDir()
	cfgDir := filepath.Join(runtime, "ratelimit", "config")
	if err := os.MkdirAll(cfgDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "rl.yaml"), []byte(configYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	for range 5 {
		grpcPort, httpPort, debugPort := freePort(t), freePort(t), freePort(t)
		env := baseEnv(
			"USE_STATSD=false",
			"LOG_LEVEL=debug",
			"LOG_FORMAT=text",
			"BACKEND_TYPE=redis",
			"REDIS_SOCKET_TYPE=tcp",
			"REDIS_TYPE=SINGLE",
			"REDIS_URL="+redisAddr,
			"REDIS_POOL_SIZE=2",
			"RUNTIME_ROOT="+runtime,
			"RUNTIME_SUBDIRECTORY=ratelimit",
			"RUNTIME_APPDIRECTORY=config",
			"RUNTIME_WATCH_ROOT=false",
			"HOST=127.0.0.1",
			"PORT="+strconv.Itoa(httpPort),
			"GRPC_HOST=127.0.0.1",
			"GRPC_PORT="+strconv.Itoa(grpcPort),
			"DEBUG_HOST=127.0.0.1",
			"DEBUG_PORT="+strconv.Itoa(debugPort),
		)
		s := &service{
			proc:     spawn(t, "ratelimit", false, env, bin),
			grpcAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(grpcPort)),
		}
		health := fmt.Sprintf("http://127.0.0.1:%d/healthcheck", httpPort)
		hc := &http.Client{Timeout: 2 * time.Second}
		err := tryReady(s.proc, func() error {
			resp, err := hc.Get(health)
			if err != nil {
				return err
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				return fmt.Errorf("%s: %s %s", health, resp.Status, bytes.TrimSpace(body))
			}
			return nil
		})
		if err == nil {
			t.Cleanup(func() {
				if t.Failed() {
					s.dumpLog(t)
				}
			})
			return s
		}
		if !strings.Contains(s.out.String(), "address already in use") {
			t.Fatalf("ratelimit service not ready: %v\noutput:\n%s", err, s.out)
		}
		s.stop()
	}
	t.Fatal("the ratelimit service did not start on 5 sets of ports")
	return nil
}

// dumpLog logs the service's output once (its debug log names every cache
// key and Redis error).
func (s *service) dumpLog(t *testing.T) {
	if s.dumped {
		return
	}
	s.dumped = true
	t.Logf("ratelimit service output:\n%s", s.out)
}

// freePort returns a loopback port that was free a moment ago, below the
// kernel's ephemeral range, so that the outgoing connections of the test
// and the services (which take ephemeral ports) cannot take it before the
// server binds it (as rlserver's internal/testport does).
func freePort(t *testing.T) int {
	t.Helper()
	lo, hi := 10000, 32768
	if b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range"); err == nil {
		if f := strings.Fields(string(b)); len(f) == 2 {
			if n, err := strconv.Atoi(f[0]); err == nil && n > lo+1000 {
				hi = n
			}
		}
	}
	portMu.Lock()
	defer portMu.Unlock()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if portsGiven[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		portsGiven[port] = true
		return port
	}
	t.Fatalf("no free loopback port in [%d, %d)", lo, hi)
	return 0
}

var (
	portMu     sync.Mutex
	portsGiven = map[int]bool{}
)

func freeAddr(t *testing.T) string {
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
}

// respConn is a minimal RESP2 client: commands as arrays of bulk strings,
// replies of the kinds GET, TTL, PING and INFO give.
type respConn struct {
	c net.Conn
	r *bufio.Reader
}

func dialRESP(t *testing.T, addr string) *respConn {
	t.Helper()
	c, err := net.DialTimeout("tcp", addr, ioTimeout)
	if err != nil {
		t.Fatalf("connecting to %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return &respConn{c: c, r: bufio.NewReader(c)}
}

// errNil is a null bulk string reply.
var errNil = errors.New("nil reply")

// do sends one command and returns its reply as a string: the text of a
// simple string or bulk string, the decimal of an integer; an error reply
// or a null is an error.
func (rc *respConn) do(args ...string) (string, error) {
	rc.c.SetDeadline(time.Now().Add(ioTimeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := io.WriteString(rc.c, b.String()); err != nil {
		return "", err
	}
	line, err := rc.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", fmt.Errorf("empty reply line")
	}
	switch line[0] {
	case '+', ':':
		return line[1:], nil
	case '-':
		return "", fmt.Errorf("error reply: %s", line[1:])
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		if n < 0 {
			return "", errNil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(rc.r, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

// syncBuffer is a bytes.Buffer safe for a process's writer and the test.
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
