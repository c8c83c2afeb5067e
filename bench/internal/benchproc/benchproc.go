// Package benchproc holds what the benchmark programs share about the
// processes they start: free loopback ports, starting and stopping
// servers, CPU time and memory read from /proc, and what their reports
// say of the machine and how they write numbers.
package benchproc

import (
	"fmt"
	"log"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// FreePorts returns n distinct free loopback ports. All listeners stay
// open until every port is chosen, so the kernel cannot hand out one
// twice; a port can still be taken by someone else before a server binds
// it, which its start reports.
func FreePorts(n int) ([]int, error) {
	var ports []int
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// clockTick is USER_HZ: 100 on every Linux architecture Go supports.
const clockTick = 100

// CPUTime is the user+system CPU time process pid has used (0 when it
// cannot be read), from /proc/pid/stat.
func CPUTime(pid int) time.Duration { return cpuTime(pid, false) }

// CPUTimeWithChildren is CPUTime plus the CPU time of pid's children it
// has waited for (a Redis's finished BGSAVE and rewrite children).
func CPUTimeWithChildren(pid int) time.Duration { return cpuTime(pid, true) }

func cpuTime(pid int, children bool) time.Duration {
	if pid <= 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name (in parentheses) may hold spaces: fields count
	// from after its ')'.
	s := string(b)
	if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 <= len(s) {
		s = s[i+2:]
	}
	f := strings.Fields(s)
	if len(f) < 15 {
		return 0
	}
	// utime, stime, cutime, cstime.
	var ticks int64
	last := 12
	if children {
		last = 14
	}
	for i := 11; i <= last; i++ {
		v, _ := strconv.ParseInt(f[i], 10, 64)
		ticks += v
	}
	return time.Duration(ticks) * time.Second / clockTick
}

// BuildServer builds ./cmd/rlserver (the working directory must be the
// repository's root) into dir and returns the binary's path; go's output
// goes to stderr.
func BuildServer(dir string) (string, error) {
	bin := filepath.Join(dir, "rlserver")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/rlserver")
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go build: %v (run from the repository's root)", err)
	}
	return bin, nil
}

// Scratch is a benchmark's clean-up of its temporary folder tmp: cleanup
// runs stop, then removes tmp (or, with keep, names it on stderr); fail
// cleans up and exits with the message. cleanup also runs on SIGINT or
// SIGTERM (OnInterrupt).
func Scratch(tmp string, keep bool, stop func()) (cleanup func(), fail func(format string, args ...any)) {
	cleanup = func() {
		stop()
		if keep {
			fmt.Fprintf(os.Stderr, "kept %s\n", tmp)
		} else {
			os.RemoveAll(tmp)
		}
	}
	OnInterrupt(cleanup)
	fail = func(format string, args ...any) {
		cleanup()
		log.Fatalf(format, args...)
	}
	return cleanup, fail
}

// OnInterrupt runs cleanup and exits with status 130 on SIGINT or
// SIGTERM.
func OnInterrupt(cleanup func()) {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		cleanup()
		os.Exit(130)
	}()
}
