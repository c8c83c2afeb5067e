//go:build !rlserver_testhooks

package server

import (
	"net"
	"time"
)

// testRemote is false: only the rlserver_testhooks build (testhooks_on.go)
// treats a loopback address as another host's.
func testRemote(net.IP) bool { return false }

// testBlockPoll is blockPoll: only the rlserver_testhooks build reads
// RLSERVER_TEST_BLOCK_POLL.
func testBlockPoll() time.Duration { return blockPoll }
