package clienttest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/internal/testfs"
)

// Disk faults in a three-process cluster: each node's Raft folder is on
// its own small tmpfs, filled with a file while load runs, then freed.
// RLSERVER_SOAK=1 (make soak, make faults) repeats every fault many times.

// raftTmpfs moves n's Raft folder onto a fresh tmpfs of size (mount's
// size= syntax): n is stopped, its folder copied, and n started again.
// The tmpfs is unmounted at cleanup, after n has stopped. Mounting needs
// root: without it the test skips, or fails under CI=true.
func (c *pcluster) raftTmpfs(n *cnode, size string) string {
	c.t.Helper()
	return c.raftOn(n, func(dir string) { testfs.MountTmpfs(c.t, dir, size) })
}

// raftOn moves n's Raft folder onto the file system mount mounts on the
// folder's path (registering its unmount at cleanup): n is stopped, its
// folder copied, and n started again.
func (c *pcluster) raftOn(n *cnode, mount func(dir string)) string {
	c.t.Helper()
	c.stop(n)
	dir := filepath.Join(n.dir, "raft")
	orig := dir + ".orig"
	if err := os.Rename(dir, orig); err != nil {
		c.t.Fatal(err)
	}
	if err := os.Mkdir(dir, 0o755); err != nil {
		c.t.Fatal(err)
	}
	mount(dir)
	c.t.Cleanup(func() { // before the unmount: cleanups run last first
		if n.srv != nil {
			c.stop(n)
		}
	})
	if out, err := exec.Command("cp", "-a", orig+"/.", dir+"/").CombinedOutput(); err != nil {
		c.t.Fatalf("copying the raft folder: %v: %s", err, out)
	}
	c.launch(n)
	return dir
}

// replInfo returns n's INFO replication fields; nil when n does not answer.
func replInfo(n *cnode) map[string]string {
	v, err := rawDo(n.respAddr, time.Second, "INFO", "replication")
	if err != nil || v.kind == '-' {
		return nil
	}
	m := map[string]string{}
	for _, line := range strings.Split(v.str, "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok {
			m[k] = val
		}
	}
	return m
}

func replUint(n *cnode, field string) (uint64, bool) {
	v, err := strconv.ParseUint(replInfo(n)[field], 10, 64)
	return v, err == nil
}

// serveMonitor sends RL.ALLOW (cost 0) to every node, one goroutine per
// node, and records when each was served, to find the longest time
// nothing was.
type serveMonitor struct {
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	ok   []time.Time
}

func (c *pcluster) monitorServing(t *testing.T) *serveMonitor {
	m := &serveMonitor{stop: make(chan struct{})}
	for _, n := range c.nodes {
		cl := redis.NewClient(&redis.Options{Addr: n.respAddr, Protocol: 2, MaxRetries: -1, DisableIdentity: true,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 3 * time.Second, PoolSize: 1})
		m.wg.Add(1)
		go func() {
			defer m.wg.Done()
			defer cl.Close()
			for i := 0; ; i++ {
				select {
				case <-m.stop:
					return
				default:
				}
				if _, _, err := allowOnce(context.Background(), cl, fmt.Sprintf("mon%d", i%64), histCapacity, 0); err == nil {
					m.mu.Lock()
					m.ok = append(m.ok, time.Now())
					m.mu.Unlock()
				} else {
					time.Sleep(5 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(m.end)
	return m
}

func (m *serveMonitor) end() {
	select {
	case <-m.stop:
	default:
		close(m.stop)
	}
	m.wg.Wait()
}

// longestGap is the longest time between two served commands (or from
// from to the first, or from the last to to when none was served after
// to) between from and to.
func (m *serveMonitor) longestGap(from, to time.Time) time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	slices.SortFunc(m.ok, func(a, b time.Time) int { return a.Compare(b) })
	var gap time.Duration
	last := from
	for _, at := range m.ok {
		if at.Before(from) {
			last = at
			continue
		}
		if at.After(to) {
			return max(gap, at.Sub(last))
		}
		gap = max(gap, at.Sub(last))
		last = at
	}
	return max(gap, to.Sub(last))
}

// burn sends pipelines of large read-only commands to the nodes in turn
// until stop is closed; replies are ignored.
func burn(c *pcluster, stop chan struct{}) {
	clients := make([]*redis.Client, len(c.nodes))
	for i, n := range c.nodes {
		clients[i] = redis.NewClient(&redis.Options{Addr: n.respAddr, Protocol: 2, MaxRetries: -1, DisableIdentity: true,
			DialTimeout: 200 * time.Millisecond, ReadTimeout: 3 * time.Second, PoolSize: 1})
		defer clients[i].Close()
	}
	pad := strings.Repeat("x", 4<<10)
	for i := 0; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		p := clients[i%len(clients)].Pipeline()
		for k := range 16 {
			p.Do(context.Background(), "RL.ALLOW", fmt.Sprintf("burn%d:%s", k, pad), 10, 1, 0)
		}
		if _, err := p.Exec(context.Background()); err != nil {
			time.Sleep(5 * time.Millisecond)
		}
	}
}

func rounds(short, soak int) int {
	if os.Getenv("RLSERVER_SOAK") != "" {
		return soak
	}
	return short
}

// TestClusterDiskFull runs disk faults under load from clients spread over
// the nodes, each node's Raft folder on its own 64 MiB tmpfs:
//
//  1. a follower's disk fills until its log writes fail (INFO
//     raft_disk_failed:1), is freed, and the follower's applied index
//     reaches the leader's commit index at the time it was freed within
//     5 s, round after round (issue 23.1: with pipelined replication the
//     leader could stop sending it entries for good);
//  2. after a follower's disk was full for 4 s, the other follower is
//     paused the moment the disk is freed: a command must be served within
//     1.5 s (23.3: the leader backed off from the failed follower for
//     2.3 s and more);
//  3. the leader's disk fills: leadership moves to another node within
//     2 s of the last served command and never comes back to the full node
//     while its disk is full (23.2: it used to win the next elections).
//
// Then the replicas converge and porcupine checks the whole history.
func TestClusterDiskFull(t *testing.T) {
	// Frequent snapshots keep each log (and the large entries waitMarked
	// sends) compacted, so that only the filled node runs out of room.
	c := startCluster(t, serverBin, "--snapshot-interval", "2s", "--snapshot-threshold", "2048")
	dirs := map[string]string{}
	for _, n := range c.nodes {
		dirs[n.id] = c.raftTmpfs(n, "64m")
	}
	c.waitLeader(10 * time.Second)
	ld := startLoad(t, c, 6, 32, "disk")
	mon := c.monitorServing(t)

	// waitMarked waits until n reports raft_disk_failed as want. Waiting
	// for 1, it also sends large entries (read-only RL.ALLOW with 4 KiB
	// keys, 16 to a pipeline): a node keeps writing on a full file
	// system while its entries fit in room its files already have (the
	// free pages of the bbolt file the log used to be, the last page of a
	// segment file now).
	waitMarked := func(n *cnode, want string, timeout time.Duration) {
		t.Helper()
		stop := make(chan struct{})
		var wg sync.WaitGroup
		if want == "1" {
			wg.Add(1)
			go func() {
				defer wg.Done()
				burn(c, stop)
			}()
		}
		defer func() { close(stop); wg.Wait() }()
		pollUntil(t, timeout, fmt.Sprintf("%s raft_disk_failed:%s", n.id, want), func() bool {
			return replInfo(n)["raft_disk_failed"] == want
		})
	}
	filled := map[*cnode]bool{}
	fill := func(n *cnode) string {
		t.Helper()
		filled[n] = true
		return testfs.FillUp(t, dirs[n.id])
	}
	free := func(path string) {
		t.Helper()
		if err := os.Remove(path); err != nil {
			t.Fatal(err)
		}
	}

	// 1. A follower's disk fills and is freed, round after round.
	var catchUps []time.Duration
	for i := range rounds(3, 20) {
		leader := c.waitLeader(10 * time.Second)
		var f *cnode
		for j := range c.nodes {
			if n := c.nodes[(i+j)%len(c.nodes)]; n != leader {
				f = n
				break
			}
		}
		filler := fill(f)
		waitMarked(f, "1", 10*time.Second)
		time.Sleep(500 * time.Millisecond) // full under load
		free(filler)
		freed := time.Now()
		target, ok := replUint(leader, "raft_commit_index")
		if !ok {
			t.Fatalf("round %d: leader %s did not answer INFO", i+1, leader.id)
		}
		var applied uint64
		if !pollFor(5*time.Second, func() bool {
			applied, _ = replUint(f, "raft_applied_index")
			return applied >= target
		}) {
			t.Fatalf("round %d: follower %s at applied index %d, %v after its disk was freed; the leader had committed %d",
				i+1, f.id, applied, time.Since(freed).Round(time.Millisecond), target)
		}
		d := time.Since(freed)
		catchUps = append(catchUps, d)
		waitMarked(f, "0", 5*time.Second)
		t.Logf("round %d: follower %s full then freed, caught up to %d in %v", i+1, f.id, target, d.Round(time.Millisecond))
	}
	t.Logf("follower catch-up after the disk was freed over %d rounds: %s", len(catchUps), spread(catchUps))

	// 2. The window after a follower's disk error: the other follower
	// stops the moment the disk is freed.
	var windows []time.Duration
	for i := range rounds(1, 5) {
		leader := c.waitLeader(10 * time.Second)
		var f, other *cnode
		for _, n := range c.nodes {
			switch {
			case n == leader:
			case f == nil:
				f = n
			default:
				other = n
			}
		}
		filler := fill(f)
		waitMarked(f, "1", 10*time.Second)
		time.Sleep(4 * time.Second) // the leader's appends to f keep failing
		free(filler)
		freed := time.Now()
		c.pause(other)
		d := c.probeServed(freed, fmt.Sprintf("window%d", i), 20*time.Second)
		c.resume(other)
		windows = append(windows, d)
		t.Logf("window %d: %s full for 4 s, freed, %s paused: served after %v", i+1, f.id, other.id, d.Round(time.Millisecond))
		if d > 1500*time.Millisecond {
			t.Errorf("window %d: served %v after the follower's disk was freed with the other follower paused, want within 1.5s", i+1, d)
		}
		waitMarked(f, "0", 5*time.Second)
	}
	t.Logf("served after a follower's disk was freed, the other follower paused: %s", spread(windows))

	// 3. The leader's disk fills.
	var gaps []time.Duration
	for i := range rounds(1, 5) {
		leader := c.waitLeader(10 * time.Second)
		filled := time.Now()
		filler := fill(leader)
		waitMarked(leader, "1", 10*time.Second)
		var nl string
		pollUntil(t, 10*time.Second, "a leader other than the full node", func() bool {
			nl = c.leaderOf(c.nodes[0])
			for _, n := range c.nodes {
				if l := c.leaderOf(n); l == "" || l == leader.id || l != nl {
					return false
				}
			}
			return true
		})
		moved := time.Now()
		// Full for 2.5 s more: leadership must stay away.
		for time.Since(moved) < 2500*time.Millisecond {
			for _, n := range c.nodes {
				if l := c.leaderOf(n); l == leader.id {
					t.Errorf("leader fault %d: %s says the full node %s leads again, %v after leadership moved", i+1, n.id, leader.id, time.Since(moved).Round(time.Millisecond))
				}
			}
			time.Sleep(20 * time.Millisecond)
		}
		free(filler)
		waitMarked(leader, "0", 5*time.Second)
		gap := mon.longestGap(filled, time.Now())
		gaps = append(gaps, gap)
		t.Logf("leader fault %d: %s full, %s leads %v after the fill; longest time with nothing served %v",
			i+1, leader.id, nl, moved.Sub(filled).Round(time.Millisecond), gap.Round(time.Millisecond))
		if gap > 2*time.Second {
			t.Errorf("leader fault %d: nothing served for %v, want at most 2s", i+1, gap)
		}
	}
	t.Logf("longest time with nothing served, leader's disk full: %s", spread(gaps))

	ld.end()
	mon.end()
	c.waitLeader(10 * time.Second)
	c.converge(20 * time.Second)
	if res := ld.h.check(t, time.Minute); res != porcupine.Ok {
		t.Errorf("history under disk faults: %s", res)
	}
	for _, n := range c.nodes {
		if errs, _ := replUint(n, "raft_disk_write_errors"); filled[n] && errs == 0 {
			t.Errorf("%s: raft_disk_write_errors 0 after its disk filled", n.id)
		}
	}
}

// spread renders durations as min, median, max and all of them.
func spread(ds []time.Duration) string {
	if len(ds) == 0 {
		return "none"
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return fmt.Sprintf("min %v, median %v, max %v; all %v", s[0].Round(time.Millisecond),
		s[len(s)/2].Round(time.Millisecond), s[len(s)-1].Round(time.Millisecond), roundAll(ds))
}
