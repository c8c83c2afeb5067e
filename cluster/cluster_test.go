package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
)

// In-process clusters: real TCP on loopback, real raftlog stores in temp
// dirs, short timeouts, and waits that poll until a deadline.

type tnode struct {
	id   string
	dir  string
	addr string // raft address, fixed after the first start
	eng  *engine.Engine
	n    *Node
}

type tcluster struct {
	t     *testing.T
	nodes []*tnode
	tweak func(*Config)
}

func testConfig(id, dir, addr string) Config {
	return Config{
		NodeID:           id,
		RaftAddr:         addr,
		RESPAddr:         "resp-" + id + ":6379",
		Dir:              dir,
		HeartbeatTimeout: 600 * time.Millisecond,
		ElectionTimeout:  600 * time.Millisecond,
		CommitTimeout:    3 * time.Second,
		NoSync:           true,
	}
}

func (c *tcluster) start(tn *tnode, bootstrap bool) {
	c.t.Helper()
	cfg := testConfig(tn.id, tn.dir, tn.addr)
	cfg.Bootstrap = bootstrap
	if c.tweak != nil {
		c.tweak(&cfg)
	}
	tn.eng = engine.New(4)
	n, err := Open(cfg, tn.eng)
	if err != nil {
		c.t.Fatalf("open %s: %v", tn.id, err)
	}
	tn.n = n
	tn.addr = n.RaftAddr()
}

// stop ends a node abruptly (no leadership hand-off), like a crash.
func (tn *tnode) stop() {
	if tn.n == nil {
		return
	}
	tn.n.noTransfer = true
	tn.n.Close()
	tn.eng.Close()
	tn.n = nil
}

// newCluster bootstraps n1 and adds the others through RL.CLUSTER JOIN's
// code path.
func newCluster(t *testing.T, size int, tweak func(*Config)) *tcluster {
	c := &tcluster{t: t, tweak: tweak}
	for i := range size {
		tn := &tnode{id: fmt.Sprintf("n%d", i+1), dir: t.TempDir(), addr: "127.0.0.1:0"}
		c.nodes = append(c.nodes, tn)
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.stop()
		}
	})
	c.start(c.nodes[0], true)
	c.leader()
	for _, tn := range c.nodes[1:] {
		c.add(tn)
	}
	c.waitAllSeeLeader()
	c.waitAllKnowMembers()
	return c
}

// waitAllKnowMembers waits until every live node's latest configuration
// lists every live node. A voter that has not yet received the entry
// adding another refuses that node's (pre-)votes as "not in
// configuration" (hashicorp/raft), so a test that kills the leader right
// after forming the cluster could otherwise leave two survivors that can
// never elect each other.
func (c *tcluster) waitAllKnowMembers() {
	c.t.Helper()
	waitFor(c.t, 10*time.Second, "every node to know every member", func() bool {
		for _, tn := range c.live() {
			f := tn.n.raft.GetConfiguration()
			if f.Error() != nil {
				return false
			}
			known := map[raft.ServerID]bool{}
			for _, s := range f.Configuration().Servers {
				known[s.ID] = true
			}
			for _, o := range c.live() {
				if !known[raft.ServerID(o.id)] {
					return false
				}
			}
		}
		return true
	})
}

func (c *tcluster) add(tn *tnode) {
	c.t.Helper()
	c.start(tn, false)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	// Through any member: a follower forwards the join to the leader.
	if err := c.nodes[0].n.Join(ctx, tn.id, tn.addr); err != nil {
		c.t.Fatalf("join %s: %v", tn.id, err)
	}
}

func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (c *tcluster) live() []*tnode {
	var out []*tnode
	for _, tn := range c.nodes {
		if tn.n != nil {
			out = append(out, tn)
		}
	}
	return out
}

func (c *tcluster) leader() *tnode {
	c.t.Helper()
	// Elections take well under a second here, but a machine whose disk
	// is busy (fsync) and whose CPUs are shared can take several.
	deadline := time.Now().Add(20 * time.Second)
	for {
		for _, tn := range c.live() {
			if tn.n.raft.State() == raft.Leader {
				return tn
			}
		}
		if time.Now().After(deadline) {
			break
		}
		time.Sleep(5 * time.Millisecond)
	}
	// Rare under a loaded machine (seen twice in full -race runs): say
	// what each node thinks, for whoever chases it.
	var states []string
	for _, tn := range c.live() {
		st := tn.n.raft.Stats()
		_, id := tn.n.raft.LeaderWithID()
		states = append(states, fmt.Sprintf("%s: %s term %s last_log %s/%s commit %s applied %s last_contact %s leader %q disk_failed %v",
			tn.id, tn.n.raft.State(), st["term"], st["last_log_index"], st["last_log_term"], st["commit_index"],
			st["applied_index"], st["last_contact"], id, tn.n.disk.failed.Load()))
	}
	c.t.Fatalf("timed out after 20s waiting for a leader:\n%s", strings.Join(states, "\n"))
	return nil
}

func (c *tcluster) waitAllSeeLeader() {
	c.t.Helper()
	waitFor(c.t, 10*time.Second, "every node to know the leader", func() bool {
		for _, tn := range c.live() {
			if addr, _ := tn.n.raft.LeaderWithID(); addr == "" {
				return false
			}
		}
		return true
	})
}

// converged waits until every live node reports the same applied index and
// digest, and returns them.
func (c *tcluster) converged() (uint64, string) {
	c.t.Helper()
	var idx uint64
	var dig string
	var last string
	waitFor(c.t, 15*time.Second, "identical digests", func() bool {
		ctx := context.Background()
		idx, dig, last = 0, "", ""
		for i, tn := range c.live() {
			ix, d, err := tn.n.Digest(ctx)
			if err != nil {
				return false
			}
			last += fmt.Sprintf(" %s@%d=%.8s", tn.id, ix, d)
			if i == 0 {
				idx, dig = ix, d
			} else if ix != idx || d != dig {
				return false
			}
		}
		return true
	})
	c.t.Logf("converged at index %d, digest %.16s", idx, dig)
	return idx, dig
}

// do runs one request through node tn, retrying errors that guarantee the
// command was not applied (as a client would on TRYAGAIN/CLUSTERDOWN), and
// unknown outcomes (a spurious election on a busy machine): callers only
// send requests whose repetition does not change what they check.
func do(t *testing.T, tn *tnode, req engine.Request) engine.Result {
	t.Helper()
	res := make([]engine.Result, 1)
	deadline := time.Now().Add(15 * time.Second)
	for {
		err := tn.n.Do(context.Background(), []engine.Request{req}, res)
		if err == nil {
			return res[0]
		}
		if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrNotAppended) && !errors.Is(err, ErrUnknownOutcome) || time.Now().After(deadline) {
			t.Fatalf("do via %s: %v", tn.id, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// drain takes the whole capacity of key through tn (rate near zero: the
// bucket stays empty for the test's lifetime).
func drain(t *testing.T, tn *tnode, key string, capacity int64) {
	t.Helper()
	// Denied with nothing left: an earlier try with an unknown outcome
	// had applied.
	r := do(t, tn, allow(t, key, capacity, 1e-6, capacity))
	if !r.Allowed && r.Remaining != 0 {
		t.Fatalf("drain %s via %s: denied", key, tn.id)
	}
}

func denied(t *testing.T, tn *tnode, key string, capacity int64) bool {
	t.Helper()
	return !do(t, tn, allow(t, key, capacity, 1e-6, 1)).Allowed
}

// TestClusterGroupCommitAcrossNodes: many goroutines on every node race for
// the same buckets; exactly the capacity is admitted in total, and every
// replica ends identical.
func TestClusterGroupCommitAcrossNodes(t *testing.T) {
	c := newCluster(t, 3, nil)
	const keys, capacity, workers, perWorker = 4, 30, 12, 20
	var allowed [keys]atomic.Int64
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			tn := c.nodes[w%3]
			for i := range perWorker {
				k := (w + i) % keys
				// A pipeline of two: both keys travel in one batch.
				reqs := []engine.Request{
					allow(t, fmt.Sprintf("k%d", k), capacity, 1e-6, 1),
					allow(t, fmt.Sprintf("k%d", (k+1)%keys), capacity, 1e-6, 1),
				}
				res := make([]engine.Result, 2)
				if err := tn.n.Do(context.Background(), reqs, res); err != nil {
					t.Errorf("do via %s: %v", tn.id, err)
					return
				}
				for j, r := range res {
					if r.Allowed {
						allowed[(k+j)%keys].Add(1)
					}
				}
			}
		}()
	}
	wg.Wait()
	for k := range keys {
		if got := allowed[k].Load(); got != capacity {
			t.Errorf("key k%d: %d admitted, want exactly %d", k, got, capacity)
		}
	}
	for _, tn := range c.nodes {
		if !denied(t, tn, "k0", capacity) {
			t.Errorf("k0 not drained as seen from %s", tn.id)
		}
	}
	// Followers forward over one persistent connection each.
	l := c.leader()
	l.n.mu.Lock()
	inbound := len(l.n.conns)
	l.n.mu.Unlock()
	if inbound != 2 {
		t.Errorf("leader has %d inbound forward connections, want one per follower", inbound)
	}
	// DBSIZE and FLUSHALL go through the log from any node.
	n, err := c.nodes[2].n.Len(context.Background())
	if err != nil || n != keys {
		t.Fatalf("Len via follower = %d, %v; want %d", n, err, keys)
	}
	c.converged()
	if err := c.nodes[1].n.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n, _ := c.nodes[0].n.Len(context.Background()); n != 0 {
		t.Fatalf("Len after flush = %d", n)
	}
	c.converged()
}

// TestClusterLeaderLossKeepsConsumption: buckets drained through the old
// leader and through followers stay drained after the leader dies; the
// survivors and then the restarted old leader converge to one state.
func TestClusterLeaderLossKeepsConsumption(t *testing.T) {
	c := newCluster(t, 3, nil)
	old := c.leader()
	for i, tn := range c.nodes {
		drain(t, tn, fmt.Sprintf("via-%d", i), 10)
	}
	drain(t, old, "via-leader", 7)
	start := time.Now()
	old.stop()
	nl := c.leader()
	// The first successful command after the kill, through a follower.
	var other *tnode
	for _, tn := range c.live() {
		if tn != nl {
			other = tn
		}
	}
	if !denied(t, other, "via-leader", 7) {
		t.Fatal("bucket drained through the old leader has tokens on the new one")
	}
	t.Logf("failover: %s -> %s, served after %v", old.id, nl.id, time.Since(start))
	for i := range c.nodes {
		if !denied(t, nl, fmt.Sprintf("via-%d", i), 10) {
			t.Fatalf("via-%d lost its consumption", i)
		}
	}
	c.converged()
	c.start(old, false)
	c.waitAllSeeLeader()
	c.converged()
	if !denied(t, old, "via-leader", 7) {
		t.Fatal("restarted node disagrees")
	}
}

// TestClusterSnapshotsAndMembership: a follower that misses more than the
// trailing log catches up from a snapshot; a new node joins and gets a
// snapshot; a removed node stops receiving entries.
func TestClusterSnapshotsAndMembership(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 8
		cfg.SnapshotThreshold = 16
		cfg.SnapshotInterval = 50 * time.Millisecond
	})
	l := c.leader()
	var follower *tnode
	for _, tn := range c.nodes {
		if tn != l {
			follower = tn
		}
	}
	follower.stop()
	for i := range 60 {
		drain(t, l, fmt.Sprintf("k%d", i), 3)
	}
	if f := l.n.raft.Snapshot(); f.Error() != nil {
		t.Fatal(f.Error())
	}
	waitFor(t, 5*time.Second, "log compaction", func() bool {
		first, _ := l.n.store.FirstIndex()
		return first > 10
	})
	c.start(follower, false)
	c.converged()
	if !denied(t, follower, "k0", 3) {
		t.Fatal("follower restored from snapshot lost k0")
	}

	// A fourth node joins and receives the snapshot.
	n4 := &tnode{id: "n4", dir: t.TempDir(), addr: "127.0.0.1:0"}
	c.nodes = append(c.nodes, n4)
	c.add(n4)
	c.converged()
	if !denied(t, n4, "k59", 3) {
		t.Fatal("joined node lacks state")
	}

	// Remove it: it stops receiving entries, the rest go on.
	if err := c.nodes[1].n.Remove(context.Background(), "n4"); err != nil {
		t.Fatal(err)
	}
	if err := c.nodes[1].n.Remove(context.Background(), "nope"); !errors.Is(err, ErrUnknownNode) {
		t.Fatalf("remove unknown node: %v", err)
	}
	if got := len(c.leader().n.ClusterStatus().Nodes); got != 3 {
		t.Fatalf("%d members after remove", got)
	}
	for i := range 5 {
		drain(t, c.leader(), fmt.Sprintf("after-remove%d", i), 3)
	}
	for _, tn := range c.nodes[:3] {
		if !denied(t, tn, "after-remove4", 3) {
			t.Fatal("lost after-remove4")
		}
	}
	// The leader stops replicating to it (after at most what was in flight).
	if got, lead := n4.n.fsm.applied.Load(), c.leader().n.fsm.applied.Load(); got >= lead {
		t.Fatalf("removed node applied up to %d, the leader %d", got, lead)
	}
	n4.stop()
	c.converged()
}

// TestClusterErrorsWithoutQuorum: with both followers gone the leader
// cannot commit: a command waits at most the commit timeout and gets the
// unknown-outcome error (it was appended); once the leader steps down,
// commands fail fast with CLUSTERDOWN (not appended).
func TestClusterErrorsWithoutQuorum(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) { cfg.CommitTimeout = time.Second })
	l := c.leader()
	drain(t, l, "k", 5)
	for _, tn := range c.nodes {
		if tn != l {
			tn.stop()
		}
	}
	res := make([]engine.Result, 1)
	start := time.Now()
	err := l.n.Do(context.Background(), []engine.Request{allow(t, "k", 5, 1e-6, 1)}, res)
	if !errors.Is(err, ErrUnknownOutcome) && !errors.Is(err, ErrNoLeader) {
		t.Fatalf("without quorum: %v", err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("waited %v, commit timeout is 1s", d)
	}
	waitFor(t, 5*time.Second, "the leader to step down", func() bool {
		return l.n.raft.State() != raft.Leader
	})
	err = l.n.Do(context.Background(), []engine.Request{allow(t, "k", 5, 1e-6, 1)}, res)
	var we interface{ WireText() string }
	if !errors.Is(err, ErrNoLeader) || !errors.As(err, &we) || we.WireText()[:11] != "CLUSTERDOWN" {
		t.Fatalf("no leader: %v", err)
	}
	if ErrUnknownOutcome.WireText()[:8] != "UNKNOWN " || ErrNotAppended.WireText()[:9] != "TRYAGAIN " {
		t.Fatal("wire texts")
	}
}

// TestForwardRejectsMalformedBatch: a forwarded batch that does not decode
// is refused before it can reach the log (where it would halt every
// replica), and the leader keeps serving.
func TestForwardRejectsMalformedBatch(t *testing.T) {
	c := newCluster(t, 1, nil)
	l := c.leader()
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	good := appendRequest(nil, ptr(allow(t, "k", 5, 1, 1)))
	for _, payload := range [][]byte{
		{},
		{5, 1, 2, 3},
		append([]byte{2}, good...),            // count 2, one request
		append(append([]byte{1}, good...), 0), // trailing byte
		append([]byte{1}, good[:len(good)-1]...),
	} {
		r, err := p.call(ctx, msgBatchV1, payload)
		if err != nil || r.status != statusBadRequest {
			t.Fatalf("payload %x: status %d, %v", payload, r.status, err)
		}
	}
	r, err := p.call(ctx, msgBatchV1, append([]byte{1}, good...))
	if err != nil || r.status != statusOK {
		t.Fatalf("good batch: status %d, %v", r.status, err)
	}
	res, err := decodeResults(r.body)
	if err != nil || len(res) != 1 || !res[0].Allowed {
		t.Fatalf("good batch results: %+v %v", res, err)
	}
	if r, err := p.call(ctx, 99, nil); err != nil || r.status != statusBadRequest {
		t.Fatalf("unknown message type: %d %v", r.status, err)
	}
}

func ptr[T any](v T) *T { return &v }
