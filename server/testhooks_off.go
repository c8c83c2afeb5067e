//go:build !rlserver_testhooks

package server

import "net"

// testRemote is false: only the rlserver_testhooks build (testhooks_on.go)
// treats a loopback address as another host's.
func testRemote(net.IP) bool { return false }
