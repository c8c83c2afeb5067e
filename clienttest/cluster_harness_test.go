package clienttest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// The three-process cluster harness. Each node is a *server (the package's
// process harness) with fixed ports and a fixed data folder, so it can be
// killed, paused and restarted as the same member. Nodes start from one
// static --peers list.

// clusterTimeouts are the election settings the tests run with: the
// defaults, so the measured failover is the shipped one.
var clusterArgs = []string{"--commit-timeout", "2s"}

type cnode struct {
	id       string
	respAddr string
	raftAddr string
	dir      string
	srv      *server // the current process; nil while down
	paused   bool
	joinVia  string        // start with --join this address instead of --peers
	wrap     []string      // command line the process starts under (ip netns exec NS)
	args     []string      // this node's own extra flags
	env      []string      // extra environment variables (KEY=value) of its processes
	logs     []*syncBuffer // stderr of every process this node ran
}

type pcluster struct {
	t     *testing.T
	bin   string
	nodes []*cnode
	peers string
	extra []string
}

// startCluster starts three nodes on fresh loopback ports and waits until
// every node knows the leader.
func startCluster(t *testing.T, bin string, extra ...string) *pcluster {
	t.Helper()
	return startClusterOf(t, bin, threeNodes(t), extra...)
}

// threeNodes are n1, n2 and n3 on fresh loopback ports, each with a
// temporary folder.
func threeNodes(t *testing.T) []*cnode {
	var nodes []*cnode
	for i := range 3 {
		nodes = append(nodes, &cnode{
			id:       fmt.Sprintf("n%d", i+1),
			respAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			raftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			dir:      t.TempDir(),
		})
	}
	return nodes
}

// startClusterOf starts the given nodes (ids, addresses, folders and
// wrappers set) from one --peers list and waits until every node knows the
// leader.
func startClusterOf(t *testing.T, bin string, nodes []*cnode, extra ...string) *pcluster {
	t.Helper()
	c := &pcluster{t: t, bin: bin, extra: extra, nodes: nodes}
	var peers []string
	for _, n := range nodes {
		peers = append(peers, n.id+"="+n.raftAddr)
	}
	c.peers = strings.Join(peers, ",")
	t.Cleanup(c.cleanup)
	for _, n := range c.nodes {
		c.launch(n)
	}
	c.waitLeader(20 * time.Second)
	return c
}

// launch starts n's process and waits until it answers PING.
func (c *pcluster) launch(n *cnode) {
	c.t.Helper()
	s := &server{
		t:      c.t,
		addr:   n.respAddr,
		dir:    n.dir,
		stdout: &syncBuffer{},
		stderr: &syncBuffer{},
		exited: make(chan struct{}),
	}
	args := []string{
		"--node-id", n.id, "--addr", n.respAddr, "--raft-addr", n.raftAddr,
		"--dir", n.dir, "--log-level", "warn",
	}
	if n.joinVia != "" {
		args = append(args, "--join", n.joinVia)
	} else {
		args = append(args, "--peers", c.peers)
	}
	args = append(append(append(args, clusterArgs...), c.extra...), n.args...)
	if len(n.wrap) > 0 {
		s.cmd = exec.Command(n.wrap[0], append(append(n.wrap[1:len(n.wrap):len(n.wrap)], c.bin), args...)...)
	} else {
		s.cmd = exec.Command(c.bin, args...)
	}
	s.cmd.Env = cleanEnv(n.env...)
	s.cmd.Stdout = s.stdout
	s.cmd.Stderr = s.stderr
	if err := s.cmd.Start(); err != nil {
		c.t.Fatalf("starting %s: %v", c.bin, err)
	}
	go func() {
		s.cmd.Wait()
		s.state = s.cmd.ProcessState
		close(s.exited)
	}()
	n.srv, n.paused = s, false
	n.logs = append(n.logs, s.stderr)
	if err := s.waitReady(""); err != nil {
		c.t.Fatalf("node %s: %v\nstderr:\n%s", n.id, err, s.stderr)
	}
}

// kill9 ends n's process with SIGKILL.
func (c *pcluster) kill9(n *cnode) {
	if n.srv == nil {
		return
	}
	n.srv.cmd.Process.Signal(syscall.SIGKILL)
	<-n.srv.exited
	n.srv, n.paused = nil, false
}

// stop ends n's process with SIGTERM and requires a clean exit.
func (c *pcluster) stop(n *cnode) {
	c.t.Helper()
	if n.srv == nil {
		return
	}
	if n.paused {
		c.resume(n)
	}
	code, err := n.srv.stop()
	if err != nil || code != 0 {
		c.t.Errorf("node %s: exit %d, %v", n.id, code, err)
	}
	n.srv = nil
}

func (c *pcluster) pause(n *cnode) {
	n.srv.cmd.Process.Signal(syscall.SIGSTOP)
	n.paused = true
}

func (c *pcluster) resume(n *cnode) {
	n.srv.cmd.Process.Signal(syscall.SIGCONT)
	n.paused = false
}

func (c *pcluster) cleanup() {
	for _, n := range c.nodes {
		if n.srv != nil {
			c.stop(n)
		}
	}
	for _, n := range c.nodes {
		for i, l := range n.logs {
			out := l.String()
			if strings.Contains(out, "WARNING: DATA RACE") || strings.Contains(out, "panic:") {
				c.t.Errorf("node %s (process %d) reported a race or a panic", n.id, i+1)
			}
			if c.t.Failed() && out != "" {
				c.t.Logf("node %s process %d stderr:\n%s", n.id, i+1, out)
			}
		}
	}
}

// live lists the nodes whose process runs and is not paused.
func (c *pcluster) live() []*cnode {
	var out []*cnode
	for _, n := range c.nodes {
		if n.srv != nil && !n.paused {
			out = append(out, n)
		}
	}
	return out
}

// rawDo sends one command on a fresh connection with a short deadline.
func rawDo(addr string, timeout time.Duration, args ...string) (value, error) {
	conn, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return value{}, err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := conn.Write([]byte(b.String())); err != nil {
		return value{}, err
	}
	return readValue(bufio.NewReader(conn))
}

// leaderOf asks n which node leads; "" when it knows none.
func (c *pcluster) leaderOf(n *cnode) string {
	v, err := rawDo(n.respAddr, time.Second, "RL.CLUSTER", "LEADER")
	if err != nil || v.null || len(v.elems) != 3 {
		return ""
	}
	return v.elems[0].str
}

func (c *pcluster) node(id string) *cnode {
	for _, n := range c.nodes {
		if n.id == id {
			return n
		}
	}
	return nil
}

// waitLeader waits until every live node names the same live leader, and
// returns it.
func (c *pcluster) waitLeader(timeout time.Duration) *cnode {
	c.t.Helper()
	var leader *cnode
	pollUntil(c.t, timeout, "every live node to agree on a live leader", func() bool {
		id := ""
		for _, n := range c.live() {
			l := c.leaderOf(n)
			if l == "" || (id != "" && l != id) {
				return false
			}
			id = l
		}
		leader = c.node(id)
		return leader != nil && leader.srv != nil && !leader.paused
	})
	return leader
}

// converge waits until every live node reports the same applied index and
// state digest (RL.CLUSTER DIGEST), and returns them.
func (c *pcluster) converge(timeout time.Duration) (int64, string) {
	c.t.Helper()
	var idx int64
	var digest, seen string
	ok := pollFor(timeout, func() bool {
		idx, digest, seen = -1, "", ""
		for _, n := range c.live() {
			v, err := rawDo(n.respAddr, 2*time.Second, "RL.CLUSTER", "DIGEST")
			if err != nil || len(v.elems) != 2 {
				seen += fmt.Sprintf(" %s:%v", n.id, err)
				return false
			}
			seen += fmt.Sprintf(" %s@%d=%.12s", n.id, v.elems[0].num, v.elems[1].str)
			if idx == -1 {
				idx, digest = v.elems[0].num, v.elems[1].str
			} else if v.elems[0].num != idx || v.elems[1].str != digest {
				return false
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("nodes did not converge within %v:%s", timeout, seen)
	}
	c.t.Logf("converged: %d nodes at index %d, digest %.16s", len(c.live()), idx, digest)
	return idx, digest
}

func pollFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
	return true
}

func pollUntil(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if !pollFor(timeout, cond) {
		t.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
}

// clusterClient is a go-redis client for one node that never retries by
// itself, so the tests see every outcome.
func clusterClient(t *testing.T, addr string) *redis.Client {
	c := redis.NewClient(&redis.Options{
		Addr:            addr,
		Protocol:        2,
		MaxRetries:      -1,
		DialTimeout:     500 * time.Millisecond,
		ReadTimeout:     4 * time.Second,
		WriteTimeout:    2 * time.Second,
		PoolSize:        4,
		DisableIdentity: true,
	})
	t.Cleanup(func() { c.Close() })
	return c
}

// opOutcome classifies a reply error: opApplied (no error), opNotApplied
// (the command certainly did not take effect: TRYAGAIN, CLUSTERDOWN,
// REMOVED (a node removed from the cluster appends nothing), or the
// connection could not be made) or opUnknown (it may have taken effect).
type opOutcome int

const (
	opApplied opOutcome = iota
	opNotApplied
	opUnknown
)

func classify(err error) opOutcome {
	if err == nil {
		return opApplied
	}
	var rerr redis.Error
	if errors.As(err, &rerr) {
		msg := rerr.Error()
		if strings.HasPrefix(msg, "TRYAGAIN") || strings.HasPrefix(msg, "CLUSTERDOWN") || strings.HasPrefix(msg, "REMOVED") {
			return opNotApplied
		}
		return opUnknown
	}
	var op *net.OpError
	if errors.As(err, &op) && op.Op == "dial" {
		return opNotApplied
	}
	if errors.Is(err, syscall.ECONNREFUSED) {
		return opNotApplied
	}
	return opUnknown
}

// allowArgs is RL.ALLOW key capacity rate cost at a rate of one token per
// 10^6 s: nothing refills during a test, so a bucket is a counter.
func allowArgs(key string, capacity, cost int64) []any {
	return []any{"RL.ALLOW", key, capacity, "0.000001", cost}
}

// allowOnce runs one RL.ALLOW and returns [allowed, remaining].
func allowOnce(ctx context.Context, c *redis.Client, key string, capacity, cost int64) (bool, int64, error) {
	v, err := c.Do(ctx, allowArgs(key, capacity, cost)...).Int64Slice()
	if err != nil {
		return false, 0, err
	}
	if len(v) != 4 {
		return false, 0, fmt.Errorf("reply %v", v)
	}
	return v[0] == 1, v[1], nil
}

var (
	bugBinOnce sync.Once
	bugBin     string
	bugBinErr  error
)

// plantedBugBinary builds rlserver with the rlserver_ackbeforecommit tag
// (and the test hooks): followers answer from their own engine without
// replicating.
func plantedBugBinary(t *testing.T) string {
	t.Helper()
	bugBinOnce.Do(func() {
		dir := filepath.Dir(serverBin)
		bugBin = filepath.Join(dir, "rlserver-ackbeforecommit")
		args := []string{"build", "-tags", "rlserver_ackbeforecommit," + testHooksTag, "-o", bugBin}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, "github.com/rlserver/rlserver/cmd/rlserver")
		cmd := exec.Command("go", args...)
		cmd.Dir = ".."
		cmd.Env = os.Environ()
		if out, err := cmd.CombinedOutput(); err != nil {
			bugBinErr = fmt.Errorf("go %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	})
	if bugBinErr != nil {
		t.Fatal(bugBinErr)
	}
	return bugBin
}
