// Package benchproc holds what the benchmark programs share about the
// processes they start: free loopback ports and CPU time read from /proc.
package benchproc

import (
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"
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
func CPUTime(pid int) time.Duration {
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
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+st) * time.Second / clockTick
}
