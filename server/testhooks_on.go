//go:build rlserver_testhooks

package server

import (
	"net"
	"os"
)

// testRemoteIP is RLSERVER_TEST_REMOTE_IP: a loopback address that
// protected mode treats as another host's, so the end-to-end tests
// exercise it without leaving the loopback interface. Only the
// rlserver_testhooks build tag compiles it in.
var testRemoteIP = net.ParseIP(os.Getenv("RLSERVER_TEST_REMOTE_IP"))

// testRemote reports whether ip is testRemoteIP.
func testRemote(ip net.IP) bool { return testRemoteIP != nil && ip.Equal(testRemoteIP) }
