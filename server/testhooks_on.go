//go:build rlserver_testhooks

package server

import (
	"net"
	"os"
	"time"
)

// testRemoteIP is RLSERVER_TEST_REMOTE_IP: a loopback address that
// protected mode treats as another host's, so the end-to-end tests
// exercise it without leaving the loopback interface. Only the
// rlserver_testhooks build tag compiles it in.
var testRemoteIP = net.ParseIP(os.Getenv("RLSERVER_TEST_REMOTE_IP"))

// testRemote reports whether ip is testRemoteIP.
func testRemote(ip net.IP) bool { return testRemoteIP != nil && ip.Equal(testRemoteIP) }

// testBlockPoll is RLSERVER_TEST_BLOCK_POLL (a Go duration): how often a
// parked client retries on its own, instead of blockPoll, so a test can
// show that a wake came from an applied write and not from the poll.
func testBlockPoll() time.Duration {
	d, err := time.ParseDuration(os.Getenv("RLSERVER_TEST_BLOCK_POLL"))
	if err != nil || d <= 0 {
		return blockPoll
	}
	return d
}
