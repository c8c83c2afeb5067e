// Package rltest starts real rlserver processes for the client's tests:
// Main (from TestMain) compiles ./cmd/rlserver once, Start runs
// it on a free loopback port with a temporary data folder and waits until
// that very process answers PING. Tests stop only the processes they
// started: Kill (SIGKILL) and Stop (SIGSTOP) simulate a crash and a hung
// server, Restart starts a new process on the same address and folder.
// StartCluster runs three such processes as a sharded cluster (--peers,
// --groups) and waits until every node says cluster_state:ok.
package rltest

import (
	"bufio"
	"context"
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

	"github.com/redis/go-redis/v9"
)

const readyTimeout = 20 * time.Second

// Main is a test package's TestMain: it builds rlserver, sets *bin to the
// binary, silences go-redis's own logger (a failed dial per call while a
// server is down), runs the tests, removes the build and exits with the
// tests' code.
func Main(m *testing.M, bin *string) {
	b, cleanup, err := Build()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin = b
	redis.SetLogger(quiet{})
	code := m.Run()
	cleanup()
	os.Exit(code)
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

// Build compiles cmd/rlserver into a new temporary folder and returns the
// binary's path and a function removing the folder.
func Build() (bin string, cleanup func(), err error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	dir, err := os.MkdirTemp("", "rltest-")
	if err != nil {
		return "", nil, err
	}
	bin = filepath.Join(dir, "rlserver")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rlserver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return "", nil, fmt.Errorf("building rlserver: %v\n%s", err, out)
	}
	return bin, func() { os.RemoveAll(dir) }, nil
}

// Server is one rlserver process started by a test.
type Server struct {
	Addr string
	t    testing.TB
	bin  string
	dir  string
	args []string // extra flags (a cluster node's)

	mu     sync.Mutex
	cmd    *exec.Cmd
	exited chan struct{}
	stderr *buffer
}

// Start runs bin on a free loopback port with a temporary --dir and waits
// for it. The process is stopped (SIGCONT, SIGTERM, then SIGKILL) at the
// end of the test.
func Start(t testing.TB, bin string) *Server {
	t.Helper()
	s := &Server{Addr: freeAddr(t), t: t, bin: bin, dir: t.TempDir()}
	s.launch()
	t.Cleanup(s.shutdown)
	return s
}

// freeAddr returns a loopback address nothing listens on right now
// (testport.Addr: below the ephemeral range).
func freeAddr(t testing.TB) string { return testport.Addr(t) }

func (s *Server) launch() {
	s.t.Helper()
	var lastErr error
	// The port was free a moment ago, and after a kill it is free again
	// at once (listeners use SO_REUSEADDR); retry a few times if another
	// process took it in between.
	for range 20 {
		cmd := exec.Command(s.bin, append([]string{"--addr", s.Addr, "--dir", s.dir, "--log-level", "warn", "--save-interval", "0"}, s.args...)...)
		cmd.Env = cleanEnv()
		stderr := &buffer{}
		cmd.Stderr = stderr
		if err := cmd.Start(); err != nil {
			s.t.Fatalf("starting rlserver: %v", err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		s.mu.Lock()
		s.cmd, s.exited, s.stderr = cmd, exited, stderr
		s.mu.Unlock()
		if lastErr = s.waitReady(cmd, exited); lastErr == nil {
			return
		}
		cmd.Process.Kill()
		<-exited
		time.Sleep(50 * time.Millisecond)
	}
	s.t.Fatalf("rlserver on %s did not start: %v", s.Addr, lastErr)
}

func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "RL_") {
			env = append(env, kv)
		}
	}
	return env
}

// waitReady polls until this process answers PING and names its own pid
// in INFO server.
func (s *Server) waitReady(cmd *exec.Cmd, exited chan struct{}) error {
	deadline := time.Now().Add(readyTimeout)
	want := "process_id:" + strconv.Itoa(cmd.Process.Pid) + "\r\n"
	for {
		err := probe(s.Addr, want)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return err
		}
		select {
		case <-exited:
			return fmt.Errorf("rlserver exited: %s", cmd.ProcessState)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func probe(addr, want string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "PING\r\nINFO server\r\n"); err != nil {
		return err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		return fmt.Errorf("PING: %q %v", line, err)
	}
	line, err = r.ReadString('\n')
	if err != nil || len(line) < 2 || line[0] != '$' {
		return fmt.Errorf("INFO: %q %v", line, err)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return err
	}
	body := make([]byte, n+2)
	if _, err := io.ReadFull(r, body); err != nil {
		return err
	}
	if !strings.Contains(string(body), want) {
		return fmt.Errorf("another process answers on %s", addr)
	}
	return nil
}

// Kill ends the process with SIGKILL, as a crash would, and waits for it.
func (s *Server) Kill() {
	s.mu.Lock()
	cmd, exited := s.cmd, s.exited
	s.mu.Unlock()
	cmd.Process.Kill()
	<-exited
}

// Alive reports whether the process is still running.
func (s *Server) Alive() bool {
	s.mu.Lock()
	exited := s.exited
	s.mu.Unlock()
	select {
	case <-exited:
		return false
	default:
		return true
	}
}

// Stop freezes the process with SIGSTOP: the kernel still accepts
// connections, nothing answers. It returns once every thread is stopped
// (the signal is delivered asynchronously). Cont resumes it.
func (s *Server) Stop() {
	s.t.Helper()
	s.signal(syscall.SIGSTOP)
	s.mu.Lock()
	pid := s.cmd.Process.Pid
	s.mu.Unlock()
	deadline := time.Now().Add(10 * time.Second)
	for !allStopped(pid) {
		if time.Now().After(deadline) {
			s.t.Fatalf("rlserver %d not stopped 10 s after SIGSTOP", pid)
		}
		time.Sleep(time.Millisecond)
	}
}

// allStopped reports whether every thread of pid is in state T.
func allStopped(pid int) bool {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return false
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if err != nil {
			return false
		}
		// pid (comm) state ...: comm may hold spaces, so look after the
		// last ')'.
		i := strings.LastIndexByte(string(b), ')')
		if i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return false
		}
	}
	return true
}

// Cont resumes a stopped process.
func (s *Server) Cont() { s.signal(syscall.SIGCONT) }

func (s *Server) signal(sig syscall.Signal) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.cmd.Process.Signal(sig); err != nil {
		s.t.Fatalf("signalling rlserver: %v", err)
	}
}

// Restart starts a new process on the same address and folder after
// Kill.
func (s *Server) Restart() {
	s.t.Helper()
	s.launch()
}

func (s *Server) shutdown() {
	s.mu.Lock()
	cmd, exited, stderr := s.cmd, s.exited, s.stderr
	s.mu.Unlock()
	select {
	case <-exited:
		return
	default:
	}
	cmd.Process.Signal(syscall.SIGCONT)
	cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-exited:
	case <-time.After(15 * time.Second):
		cmd.Process.Kill()
		<-exited
		s.t.Errorf("rlserver %s did not stop on SIGTERM", s.Addr)
	}
	if s.t.Failed() {
		s.t.Logf("rlserver %s stderr:\n%s", s.Addr, stderr)
	}
}

type buffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (b *buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
