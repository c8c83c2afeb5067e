package clienttest

import (
	"fmt"
	"testing"
	"time"
)

// TestClusterLogWriteCrashes ends nodes in the middle of their Raft log
// writes (RLSERVER_TEST_CRASH_LOG, the rlserver_testhooks build the tests
// run): with the batch half on disk (torn), lost whole before its sync
// (unsynced), and synced but not yet acknowledged (synced), each while the
// node leads and while it follows, as six clients send INCRBY and
// MULTI/INCRBY/EXPIRE/EXEC through every node. A crashed node restarts at
// once (opening the log cuts what the crash left) and catches up. The
// counter history is linearizable, the replicas converge, and each counter
// holds every acknowledged increment: a crash between any two steps of a
// log write loses no acknowledged decision.
func TestClusterLogWriteCrashes(t *testing.T) {
	// Every crash leaves some increments of unknown outcome; spread over
	// 32 counters each one's history stays small enough for porcupine
	// (with 8, about 95 unknowns once made it give up after 2 minutes).
	const keys = 32
	c := startCluster(t, serverBin)
	ld := startIncrLoad(t, c, 6, keys, "walctr")
	for _, role := range []string{"leader", "follower"} {
		for _, step := range []string{"torn", "unsynced", "synced"} {
			// Every node armed to crash at its 10th write in that role
			// from now (restarted with kill -9: a node armed before may
			// be crashing already): the first to get there is the one
			// in the role.
			for _, n := range c.nodes {
				c.kill9(n)
				n.env = []string{fmt.Sprintf("RLSERVER_TEST_CRASH_LOG=%s:10:%s", step, role)}
				c.launch(n)
				n.env = nil // its restart after the crash runs unarmed
			}
			crashed := c.relaunchCrashed(t, 15*time.Second, step+" as "+role)
			t.Logf("%s while %s: %v crashed and restarted", step, role, crashed)
			// The rest, armed, may crash later: the next round's restarts
			// or the final check see to them.
		}
	}
	// Disarm every node.
	for _, n := range c.nodes {
		c.kill9(n)
		c.launch(n)
	}
	endIncrLoad(t, c, ld, "walctr", keys)
}

// relaunchCrashed waits up to limit for a node's process to end by itself
// and restarts it, then goes on restarting any that end within a second
// after; it fails the test if none ended, and returns the ids of those
// that did.
func (c *pcluster) relaunchCrashed(t *testing.T, limit time.Duration, what string) []string {
	t.Helper()
	var ids []string
	deadline := time.Now().Add(limit)
	for time.Now().Before(deadline) {
		for _, n := range c.nodes {
			if c.relaunchIfCrashed(n) {
				ids = append(ids, n.id)
				if len(ids) == 1 {
					deadline = time.Now().Add(time.Second)
				}
			}
		}
		time.Sleep(10 * time.Millisecond)
	}
	if len(ids) == 0 {
		t.Fatalf("%s: no node crashed within %v", what, limit)
	}
	return ids
}

// relaunchIfCrashed restarts n if its process has ended, and reports
// whether it had.
func (c *pcluster) relaunchIfCrashed(n *cnode) bool {
	if n.srv == nil {
		return false
	}
	select {
	case <-n.srv.exited:
	default:
		return false
	}
	n.srv = nil
	c.launch(n)
	return true
}
