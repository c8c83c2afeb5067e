package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"
)

// server is one process compare started: redis-server or rlserver, listening
// on addr, with its output in log.
type server struct {
	name string
	addr string
	log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// procs tracks every process compare started, so stopAll can end them on
// any exit path (normal end, error, SIGINT/SIGTERM).
var procs struct {
	sync.Mutex
	list []*server
}

// start runs cmdline (a binary, then its arguments), output to
// dir/<name>.log, and waits until addr answers PING (up to 15 s).
func start(name, addr, dir string, cmdline ...string) (*server, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = childAttr()
	s := &server{name: name, addr: addr, log: logPath, cmd: cmd, done: make(chan struct{})}
	procs.Lock()
	if err := cmd.Start(); err != nil {
		procs.Unlock()
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	procs.list = append(procs.list, s)
	procs.Unlock()
	go func() {
		s.err = cmd.Wait()
		out.Close()
		close(s.done)
	}()

	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-s.done:
			return nil, fmt.Errorf("%s exited at start (%v):\n%s", name, s.err, tail(logPath))
		default:
		}
		if c, err := dial(addr, time.Second); err == nil {
			_, err = c.do("PING")
			c.close()
			if err == nil {
				return s, nil
			}
		}
		if time.Now().After(deadline) {
			s.stop()
			return nil, fmt.Errorf("%s did not answer PING on %s within 15s:\n%s", name, addr, tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// stop sends SIGTERM, waits up to 10 s for a graceful exit, then kills.
func (s *server) stop() {
	select {
	case <-s.done:
		return
	default:
	}
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// alive reports an error when the process has already exited.
func (s *server) alive() error {
	select {
	case <-s.done:
		return fmt.Errorf("%s exited (%v):\n%s", s.name, s.err, tail(s.log))
	default:
		return nil
	}
}

// pid is the process id, for /proc.
func (s *server) pid() int { return s.cmd.Process.Pid }

// stopAll stops every process start launched, last started first.
func stopAll() {
	procs.Lock()
	list := procs.list
	procs.list = nil
	procs.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// tail returns the last lines of a log file, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return "  " + strings.Join(lines, "\n  ")
}

// runTool runs a short-lived tool (redis-benchmark) with a time limit and
// returns its stdout. The process is killed when ctx ends or the limit
// passes.
func runTool(ctx context.Context, limit time.Duration, cmdline ...string) (out string, cpu time.Duration, err error) {
	bin, args := cmdline[0], cmdline[1:]
	ctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.SysProcAttr = childAttr()
	var stdout, stderr strings.Builder
	cmd.Stdout = &stdout
	cmd.Stderr = &stderr
	err = cmd.Run()
	if ctx.Err() != nil {
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return "", 0, fmt.Errorf("%s %s: no result within %v", bin, strings.Join(args, " "), limit)
		}
		return "", 0, ctx.Err()
	}
	if err != nil {
		return "", 0, fmt.Errorf("%s %s: %v\n%s%s", bin, strings.Join(args, " "), err, stdout.String(), stderr.String())
	}
	if ps := cmd.ProcessState; ps != nil {
		cpu = ps.UserTime() + ps.SystemTime()
	}
	return stdout.String(), cpu, nil
}
