// Package testport picks loopback ports for tests that start server
// processes. It is for tests only.
package testport

import (
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
)

var (
	mu    sync.Mutex
	given = map[int]bool{}
)

// Free returns a loopback port that was free a moment ago, picked below
// the kernel's ephemeral range, so that the outgoing connections every
// test opens (which take ephemeral ports) cannot take it between the pick
// and the moment a server process binds it. A port another program holds
// fails the trial bind and is skipped; one this process handed out is
// never handed out again.
func Free(t testing.TB) int {
	t.Helper()
	lo, hi := portRange()
	mu.Lock()
	defer mu.Unlock()
	for range 1000 {
		port := lo + rand.IntN(hi-lo)
		if given[port] {
			continue
		}
		ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
		if err != nil {
			continue
		}
		ln.Close()
		given[port] = true
		return port
	}
	t.Fatalf("no free loopback port in [%d, %d)", lo, hi)
	return 0
}

// Addr is Free as a 127.0.0.1:port address.
func Addr(t testing.TB) string {
	t.Helper()
	return net.JoinHostPort("127.0.0.1", strconv.Itoa(Free(t)))
}

// portRange is [10000, the first ephemeral port), or [10000, 32768) when
// the kernel does not say.
func portRange() (lo, hi int) {
	lo, hi = 10000, 32768
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return lo, hi
	}
	f := strings.Fields(string(b))
	if len(f) == 2 {
		if first, err := strconv.Atoi(f[0]); err == nil && first > lo+1000 {
			hi = first
		}
	}
	return lo, hi
}
