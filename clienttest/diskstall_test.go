package clienttest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
)

// A disk that stalls: each node's Raft folder is on its own ext4 file
// system on a loop device, frozen with fsfreeze while load runs. A write
// or fsync into a frozen file system blocks, uninterruptibly, until it is
// thawed: what a hung disk does.

// mountLoop mounts a fresh 64 MiB ext4 file system, on a loop device over
// an image file, on dir. Cleanup unmounts it and frees the device, after
// the cleanups registered later (thaw, servers that use it). It needs
// root and a free loop device: without them the test skips, or fails
// under CI=true.
func mountLoop(t *testing.T, dir string) {
	t.Helper()
	need := func(what string, err error, out []byte) {
		t.Helper()
		if os.Getenv("CI") != "" {
			t.Fatalf("%s (the disk stall test needs root and a free loop device): %v: %s", what, err, out)
		}
		t.Skipf("%s (needs root and a free loop device): %v: %s", what, err, out)
	}
	img := filepath.Join(t.TempDir(), "disk.img")
	if out, err := exec.Command("truncate", "-s", "64M", img).CombinedOutput(); err != nil {
		t.Fatalf("truncate: %v: %s", err, out)
	}
	out, err := exec.Command("losetup", "-f", "--show", img).CombinedOutput()
	if err != nil {
		need("losetup -f found no free loop device or was refused", err, out)
	}
	dev := strings.TrimSpace(string(out))
	t.Cleanup(func() {
		if out, err := exec.Command("losetup", "-d", dev).CombinedOutput(); err != nil {
			t.Errorf("losetup -d %s: %v: %s", dev, err, out)
		}
	})
	if out, err := exec.Command("mkfs.ext4", "-q", dev).CombinedOutput(); err != nil {
		need("mkfs.ext4", err, out)
	}
	if out, err := exec.Command("mount", dev, dir).CombinedOutput(); err != nil {
		need("mount "+dev, err, out)
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v: %s", dir, err, out)
		}
	})
}

// freeze freezes the file system mounted on dir and returns the function
// that thaws it; the thaw also runs at cleanup, before anything
// registered earlier (stopping servers, unmounting), so that no process
// stays blocked in a write whatever the test did.
func freeze(t *testing.T, dir string) (thaw func()) {
	t.Helper()
	var once sync.Once
	thaw = func() {
		once.Do(func() {
			if out, err := exec.Command("fsfreeze", "-u", dir).CombinedOutput(); err != nil {
				t.Errorf("fsfreeze -u %s: %v: %s", dir, err, out)
			}
		})
	}
	t.Cleanup(thaw)
	if out, err := exec.Command("fsfreeze", "-f", dir).CombinedOutput(); err != nil {
		t.Fatalf("fsfreeze -f %s: %v: %s", dir, err, out)
	}
	return thaw
}

// servedAfter reports whether a command was served after at.
func (m *serveMonitor) servedAfter(at time.Time) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, ok := range m.ok {
		if ok.After(at) {
			return true
		}
	}
	return false
}

// TestClusterDiskStall freezes one node's Raft file system for a few
// seconds under load from clients spread over the nodes:
//
//  1. a follower's: the leader and the other follower serve on (longest
//     time with nothing served under 2 s), the follower keeps running, and
//     after the thaw its applied index reaches the leader's commit index
//     at thaw time within 5 s;
//  2. the leader's, for 5 s: the leader exits with status 3 (disk stall
//     detected, --raft-disk-stall-timeout 1s), the other two elect a new
//     leader, and the longest time with nothing served stays under 3 s
//     (issue 23: the leader loop blocked in its write while heartbeats went
//     on, so nothing was served for as long as the disk was frozen).
//
// Then the exited node is restarted, the replicas converge and porcupine
// checks the whole history. CI runs this once; RLSERVER_SOAK=1 (make
// faults) runs it 5 times, each on a fresh cluster and fresh disks.
func TestClusterDiskStall(t *testing.T) {
	for r := range rounds(1, 5) {
		t.Run(fmt.Sprintf("run%d", r+1), diskStallRun) // each run's cluster and disks go before the next
	}
}

// diskStallRun is one run of TestClusterDiskStall.
func diskStallRun(t *testing.T) {
	c := startCluster(t, serverBin)
	dirs := map[string]string{}
	for _, n := range c.nodes {
		dirs[n.id] = c.raftOn(n, func(dir string) { mountLoop(t, dir) })
	}
	c.waitLeader(10 * time.Second)
	ld := startLoad(t, c, 6, 32, "stall")
	mon := c.monitorServing(t)
	time.Sleep(300 * time.Millisecond) // load running before the fault

	// 1. A follower's disk stalls.
	leader := c.waitLeader(10 * time.Second)
	var f *cnode
	for _, n := range c.nodes {
		if n != leader {
			f = n
			break
		}
	}
	frozen := time.Now()
	thaw := freeze(t, dirs[f.id])
	time.Sleep(3 * time.Second) // the fault's length, under load
	thaw()
	thawed := time.Now()
	target, ok := replUint(leader, "raft_commit_index")
	if !ok {
		t.Fatalf("leader %s did not answer INFO", leader.id)
	}
	var applied uint64
	if !pollFor(5*time.Second, func() bool {
		applied, _ = replUint(f, "raft_applied_index")
		return applied >= target
	}) {
		t.Fatalf("follower %s at applied index %d, %v after its disk was thawed; the leader had committed %d",
			f.id, applied, time.Since(thawed).Round(time.Millisecond), target)
	}
	catchUp := time.Since(thawed)
	gap := mon.longestGap(frozen, time.Now())
	select {
	case <-f.srv.exited:
		t.Fatalf("follower %s exited during its disk stall: %v", f.id, f.srv.state)
	default:
	}
	t.Logf("follower %s frozen for 3s: longest time with nothing served %v; caught up to %d %v after the thaw",
		f.id, gap.Round(time.Millisecond), target, catchUp.Round(time.Millisecond))
	if gap > 2*time.Second {
		t.Errorf("follower's disk stalled: nothing served for %v, want under 2s", gap)
	}

	// 2. The leader's disk stalls.
	leader = c.waitLeader(10 * time.Second)
	frozen = time.Now()
	thaw = freeze(t, dirs[leader.id])
	var others []*cnode
	for _, n := range c.nodes {
		if n != leader {
			others = append(others, n)
		}
	}
	var nl string
	elected := pollFor(4500*time.Millisecond, func() bool {
		nl = c.leaderOf(others[0])
		return nl != "" && nl != leader.id && c.leaderOf(others[1]) == nl
	})
	newLeader := time.Since(frozen)
	if rest := 5*time.Second - time.Since(frozen); rest > 0 {
		time.Sleep(rest) // frozen for 5 s in all
	}
	thaw()
	thawed = time.Now()
	if !elected {
		t.Errorf("leader %s's disk frozen: no other node led within 4.5s", leader.id)
	} else {
		t.Logf("leader %s frozen for 5s: %s leads %v after the freeze", leader.id, nl, newLeader.Round(time.Millisecond))
	}
	select {
	case <-leader.srv.exited:
		if code := leader.srv.state.ExitCode(); code != 3 {
			t.Errorf("leader %s exited with status %d after its disk stalled, want 3", leader.id, code)
		}
		out := leader.srv.stderr.String()
		if i := strings.Index(out, "disk stall detected"); i < 0 {
			t.Errorf("leader %s's log has no \"disk stall detected\" line:\n%s", leader.id, out)
		} else {
			line, _, _ := strings.Cut(out[i:], "\n")
			t.Logf("leader %s exited with status 3: %s", leader.id, line)
		}
		leader.srv = nil
		c.launch(leader) // what a supervisor does
	case <-time.After(5 * time.Second):
		t.Errorf("leader %s still running 5s after its disk was thawed; want exit status 3", leader.id)
	}

	// Served again (at the latest after the thaw, without the fix).
	pollUntil(t, 10*time.Second, "a command served after the thaw", func() bool {
		return mon.servedAfter(thawed)
	})
	gap = mon.longestGap(frozen, thawed)
	t.Logf("leader %s frozen for 5s: longest time with nothing served %v", leader.id, gap.Round(time.Millisecond))
	if gap > 3*time.Second {
		t.Errorf("leader's disk stalled: nothing served for %v, want under 3s", gap)
	}

	ld.end()
	mon.end()
	c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	if res := ld.h.check(t, time.Minute); res != porcupine.Ok {
		t.Errorf("history under disk stalls: %s", res)
	}
}
