package rltest

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Cluster is a sharded rlserver cluster of three processes started by a
// test: every node is a replica of every group (--groups), with the
// default election timeouts, and answers keys of groups it does not lead
// with -MOVED.
type Cluster struct {
	Nodes []*Server
	t     testing.TB
}

// StartCluster starts three nodes from one --peers list with groups Raft
// groups on free loopback ports and temporary folders, and waits until
// every node says cluster_state:ok (every slot has a leader) and the
// leaders are where the server's balancing puts them (group g on node
// n((g-1) mod 3 + 1)), so no hand-off moves slots under the test later.
// The processes are stopped at the end of the test. extra flags are
// given to every node.
func StartCluster(t testing.TB, bin string, groups int, extra ...string) *Cluster {
	t.Helper()
	c := &Cluster{t: t}
	var peers []string
	raft := make([]string, 3)
	for i := range raft {
		raft[i] = freeAddr(t)
		peers = append(peers, fmt.Sprintf("n%d=%s", i+1, raft[i]))
	}
	for i := range raft {
		s := &Server{Addr: freeAddr(t), t: t, bin: bin, dir: t.TempDir(), args: []string{
			"--node-id", fmt.Sprintf("n%d", i+1), "--raft-addr", raft[i],
			"--peers", strings.Join(peers, ","), "--groups", strconv.Itoa(groups),
		}}
		s.args = append(s.args, extra...)
		c.Nodes = append(c.Nodes, s)
	}
	// Each process answers PING before its peers are up, so they can be
	// started one after the other.
	for _, s := range c.Nodes {
		s.launch()
		t.Cleanup(s.shutdown)
	}
	c.WaitOK(readyTimeout)
	c.waitBalanced(readyTimeout)
	return c
}

// waitBalanced waits until every node's RL.CLUSTER GROUPS names the
// preferred leader of every group.
func (c *Cluster) waitBalanced(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last any
	for {
		balanced := true
		for _, s := range c.Nodes {
			v, err := do(s.Addr, "RL.CLUSTER", "GROUPS")
			last = v
			if err != nil {
				last, balanced = err, false
				break
			}
			// Lines: "<group> leader=<id> role=... slots=... ..."
			for _, line := range strings.Split(strings.TrimSpace(fmt.Sprint(v)), "\n") {
				f := strings.Fields(line)
				if len(f) < 2 {
					balanced = false
					continue
				}
				g, err := strconv.Atoi(f[0])
				if err != nil || f[1] != fmt.Sprintf("leader=n%d", (g-1)%len(c.Nodes)+1) {
					balanced = false
				}
			}
		}
		if balanced {
			c.WaitOK(timeout) // and every node's CLUSTER SLOTS says so
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("group leaders not balanced within %v: %v", timeout, last)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Addrs returns the nodes' client addresses.
func (c *Cluster) Addrs() []string {
	var out []string
	for _, s := range c.Nodes {
		out = append(out, s.Addr)
	}
	return out
}

// Live returns the nodes whose process runs.
func (c *Cluster) Live() []*Server {
	var out []*Server
	for _, s := range c.Nodes {
		if s.Alive() {
			out = append(out, s)
		}
	}
	return out
}

// Node returns the node listening on addr, or nil.
func (c *Cluster) Node(addr string) *Server {
	for _, s := range c.Nodes {
		if s.Addr == addr {
			return s
		}
	}
	return nil
}

// WaitOK waits until every live node answers CLUSTER INFO with
// cluster_state:ok and its CLUSTER SLOTS names only live nodes.
func (c *Cluster) WaitOK(timeout time.Duration) {
	c.t.Helper()
	deadline := time.Now().Add(timeout)
	var last error
	for {
		if last = c.ok(); last == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatalf("cluster not ok within %v: %v", timeout, last)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (c *Cluster) ok() error {
	for _, s := range c.Live() {
		info, err := do(s.Addr, "CLUSTER", "INFO")
		if err != nil {
			return fmt.Errorf("%s: %v", s.Addr, err)
		}
		if !strings.Contains(fmt.Sprint(info), "cluster_state:ok") {
			return fmt.Errorf("%s: %v", s.Addr, info)
		}
		slots, err := c.Slots(s.Addr)
		if err != nil {
			return err
		}
		for _, sl := range slots {
			if n := c.Node(sl.Addr); n == nil || !n.Alive() {
				return fmt.Errorf("%s lists slots %d-%d at %s, not a live node", s.Addr, sl.Start, sl.End, sl.Addr)
			}
		}
	}
	return nil
}

// SlotRange is a range of slots and the address of its group's leader.
type SlotRange struct {
	Start, End int
	Addr       string
}

// Slots is CLUSTER SLOTS as node addr answers it.
func (c *Cluster) Slots(addr string) ([]SlotRange, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("%s: CLUSTER SLOTS: %v", addr, err)
	}
	var out []SlotRange
	for _, s := range slots {
		if len(s.Nodes) == 0 {
			return nil, fmt.Errorf("%s: slots %d-%d without a node", addr, s.Start, s.End)
		}
		out = append(out, SlotRange{Start: s.Start, End: s.End, Addr: s.Nodes[0].Addr})
	}
	return out, nil
}

// LeaderOf returns the address of the leader of slot's group as the first
// live node sees it.
func (c *Cluster) LeaderOf(slot int) string {
	c.t.Helper()
	slots, err := c.Slots(c.Live()[0].Addr)
	if err != nil {
		c.t.Fatal(err)
	}
	for _, s := range slots {
		if s.Start <= slot && slot <= s.End {
			return s.Addr
		}
	}
	c.t.Fatalf("no node serves slot %d: %+v", slot, slots)
	return ""
}

var movedRe = regexp.MustCompile(`(?m)^cluster_moved_replies:(\d+)\r?$`)

// Moved sums INFO stats cluster_moved_replies over the live nodes: the
// -MOVED replies they sent since they started.
func (c *Cluster) Moved() int64 {
	c.t.Helper()
	var sum int64
	for _, s := range c.Live() {
		info, err := do(s.Addr, "INFO", "stats")
		if err != nil {
			c.t.Fatalf("%s: INFO stats: %v", s.Addr, err)
		}
		m := movedRe.FindStringSubmatch(fmt.Sprint(info))
		if m == nil {
			c.t.Fatalf("%s: no cluster_moved_replies in INFO stats", s.Addr)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		sum += n
	}
	return sum
}

// do sends one command to addr on a connection of its own.
func do(addr string, args ...any) (any, error) {
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1, DisableIdentity: true})
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	return rdb.Do(ctx, args...).Result()
}
