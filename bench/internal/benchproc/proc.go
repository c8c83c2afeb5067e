package benchproc

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Server is one server process a benchmark started (redis-server,
// rlserver...), listening on Addr, with its output in Log.
type Server struct {
	Name string
	Addr string
	Log  string
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done
}

// started tracks every process Start launched, so StopAll can end them on
// any exit path (normal end, error, SIGINT/SIGTERM).
var started struct {
	sync.Mutex
	list []*Server
}

// Start runs cmdline (a binary, then its arguments) with its output in
// dir/<name>.log and waits until addr answers PING (up to 15 s). On Linux
// the kernel kills the process if the benchmark dies without stopping it.
func Start(name, addr, dir string, cmdline ...string) (*Server, error) {
	logPath := filepath.Join(dir, name+".log")
	out, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(cmdline[0], cmdline[1:]...)
	cmd.Stdout = out
	cmd.Stderr = out
	cmd.SysProcAttr = childAttr()
	s := &Server{Name: name, Addr: addr, Log: logPath, cmd: cmd, done: make(chan struct{})}
	started.Lock()
	if err := cmd.Start(); err != nil {
		started.Unlock()
		out.Close()
		return nil, fmt.Errorf("starting %s: %w", name, err)
	}
	started.list = append(started.list, s)
	started.Unlock()
	go func() {
		s.err = cmd.Wait()
		out.Close()
		close(s.done)
	}()

	deadline := time.Now().Add(15 * time.Second)
	for {
		if err := s.Alive(); err != nil {
			return nil, fmt.Errorf("%s exited at start: %w", name, err)
		}
		if Ping(addr) == nil {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("%s did not answer PING on %s within 15s:\n%s", name, addr, Tail(logPath))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Ping sends PING to addr on a new connection and expects +PONG.
func Ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if line != "+PONG\r\n" {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}

// Stop sends SIGTERM, waits up to 10 s for a graceful exit, then kills.
func (s *Server) Stop() {
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

// Alive reports an error, with the log's last lines, when the process
// has exited.
func (s *Server) Alive() error {
	select {
	case <-s.done:
		return fmt.Errorf("%s exited (%v):\n%s", s.Name, s.err, Tail(s.Log))
	default:
		return nil
	}
}

// Pid is the process id, for /proc.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// StopAll stops every process Start launched and has not seen exit, last
// started first.
func StopAll() {
	started.Lock()
	list := started.list
	started.list = nil
	started.Unlock()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].Stop()
	}
}

// Tail returns the last lines of a log file, for error messages.
func Tail(path string) string {
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

// Status reads a size field (VmRSS, VmHWM...) of /proc/pid/status, in
// bytes.
func Status(pid int, field string) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), field+":"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			return kb * 1024, err
		}
	}
	return 0, fmt.Errorf("no %s in /proc/%d/status", field, pid)
}

// RSS is process pid's resident set size (VmRSS), in bytes.
func RSS(pid int) (int64, error) { return Status(pid, "VmRSS") }

// ResetPeakRSS resets process pid's peak resident set size (VmHWM) to its
// current one.
func ResetPeakRSS(pid int) error {
	return os.WriteFile(fmt.Sprintf("/proc/%d/clear_refs", pid), []byte("5"), 0)
}
