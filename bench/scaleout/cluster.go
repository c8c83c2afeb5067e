package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/clusterload"
	"github.com/rlserver/rlserver/cluster/ownership"
)

// node is one rlserver process of a cluster this benchmark started.
type node struct {
	id    string // n1, n2, ...
	addr  string // client address
	cmd   *exec.Cmd
	quota *benchproc.CPUQuota // nil without a quota
	admin *redis.Client
	done  chan struct{} // closed once the process has exited
}

// cluster is n processes on loopback sharing one --peers list (every node
// in it: a placed cluster keeps R meta voters and demotes the others to
// non-voters), each with a data folder under dir and, with a quota, a
// cgroup of its own.
type cluster struct {
	dir   string
	nodes []*node
}

// startCluster starts n processes with --groups groups --replicas 3.
// quota > 0 holds each to that share of one core (the load generator
// stays outside). extra flags go to every process.
func startCluster(bin, dir string, n, groups int, quota float64, extra []string) (*cluster, error) {
	ports, err := benchproc.FreePorts(2 * n)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir}
	var peers []string
	for i := range n {
		peers = append(peers, fmt.Sprintf("n%d=127.0.0.1:%d", i+1, ports[n+i]))
	}
	for i := range n {
		id := fmt.Sprintf("n%d", i+1)
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		ndir := filepath.Join(dir, id)
		if err := os.MkdirAll(ndir, 0o755); err != nil {
			c.stop()
			return nil, err
		}
		args := append([]string{"--node-id", id, "--addr", addr,
			"--raft-addr", fmt.Sprintf("127.0.0.1:%d", ports[n+i]), "--peers", strings.Join(peers, ","),
			"--groups", strconv.Itoa(groups), "--replicas", "3", "--dir", ndir, "--log-level", "info"}, extra...)
		nd := &node{id: id, addr: addr, done: make(chan struct{})}
		if quota > 0 {
			q, err := benchproc.NewCPUQuota(fmt.Sprintf("rl-scaleout-%d-%s", os.Getpid(), id), quota)
			if err != nil {
				c.stop()
				return nil, err
			}
			nd.quota = q
			nd.cmd = q.Command(bin, args...)
		} else {
			nd.cmd = exec.Command(bin, args...)
		}
		logf, err := os.Create(filepath.Join(dir, id+".log"))
		if err != nil {
			c.stop()
			return nil, err
		}
		nd.cmd.Stdout, nd.cmd.Stderr = logf, logf
		nd.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := nd.cmd.Start(); err != nil {
			logf.Close()
			if nd.quota != nil {
				nd.quota.Remove()
			}
			c.stop()
			return nil, err
		}
		logf.Close()
		go func() { nd.cmd.Wait(); close(nd.done) }()
		nd.admin = redis.NewClient(&redis.Options{Addr: addr, ReadTimeout: 30 * time.Second, PoolSize: 2})
		c.nodes = append(c.nodes, nd)
	}
	return c, nil
}

func (nd *node) alive() bool {
	select {
	case <-nd.done:
		return false
	default:
		return true
	}
}

// kill sends SIGKILL to the node (kill -9) and waits for its exit.
func (nd *node) kill() {
	nd.cmd.Process.Kill()
	<-nd.done
}

// stop kills the processes this cluster started (SIGTERM, SIGKILL after
// 10 s), waits for them and removes their cgroups.
func (c *cluster) stop() {
	for _, nd := range c.nodes {
		nd.admin.Close()
		if nd.alive() {
			nd.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, nd := range c.nodes {
		select {
		case <-nd.done:
		case <-time.After(10 * time.Second):
			nd.cmd.Process.Kill()
			<-nd.done
		}
		if nd.quota != nil {
			nd.quota.Remove()
		}
	}
	c.nodes = nil
}

func (c *cluster) addrs() []string {
	var a []string
	for _, nd := range c.nodes {
		if nd.alive() {
			a = append(a, nd.addr)
		}
	}
	return a
}

func (c *cluster) node(id string) *node {
	for _, nd := range c.nodes {
		if nd.id == id {
			return nd
		}
	}
	return nil
}

// do sends one command to the first live node (other than skip) that
// answers it without a connection error.
func (c *cluster) do(skip string, args ...any) (any, error) {
	var err error
	for _, nd := range c.nodes {
		if nd.id == skip || !nd.alive() {
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		var v any
		v, err = nd.admin.Do(ctx, args...).Result()
		cancel()
		if err == nil || strings.HasPrefix(err.Error(), "ERR") {
			return v, err
		}
	}
	return nil, err
}

// groupInfo is one line of RL.CLUSTER GROUPS.
type groupInfo struct {
	id       int
	leader   string
	slots    string // "0-99,200" or "-"
	keys     int
	replicas []string
	learner  string
}

func (c *cluster) groups(via string) ([]groupInfo, error) {
	v, err := c.do(via, "RL.CLUSTER", "GROUPS")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	var out []groupInfo
	for _, g := range clusterload.ParseGroups(s) {
		out = append(out, groupInfo{id: g.ID, leader: g.Leader, slots: g.Slots, keys: g.Keys, replicas: g.Replicas, learner: g.Learner})
	}
	return out, nil
}

// groupKeys is the most keys any live node's replica of group id holds
// (RL.CLUSTER GROUPS shows a node's own replica: 0 on a node without one).
func (c *cluster) groupKeys(id int) int {
	most := 0
	for _, nd := range c.nodes {
		if !nd.alive() {
			continue
		}
		v, err := nd.admin.Do(context.Background(), "RL.CLUSTER", "GROUPS").Result()
		if err != nil {
			continue
		}
		s, _ := v.(string)
		for _, g := range clusterload.ParseGroups(s) {
			if g.ID == id {
				most = max(most, g.Keys)
			}
		}
	}
	return most
}

// nodeInfo is one line of RL.CLUSTER NODES.
type nodeInfo struct {
	id       string
	flags    []string
	replicas int
	leads    int
}

func (c *cluster) nodesInfo(via string) ([]nodeInfo, error) {
	v, err := c.do(via, "RL.CLUSTER", "NODES")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	var out []nodeInfo
	for _, line := range strings.Split(strings.TrimSpace(s), "\n") {
		f := strings.Fields(line)
		if len(f) < 4 {
			continue
		}
		n := nodeInfo{id: f[0], flags: strings.Split(f[3], ","), replicas: -1}
		for _, kv := range f[4:] {
			k, val, _ := strings.Cut(kv, "=")
			switch k {
			case "replicas":
				n.replicas, _ = strconv.Atoi(val)
			case "leads":
				n.leads, _ = strconv.Atoi(val)
			}
		}
		out = append(out, n)
	}
	return out, nil
}

// placed reports whether every one of groups groups has a leader, three
// replicas, none on a node of exclude, and no learner.
func placed(gs []groupInfo, groups int, exclude string) bool {
	if len(gs) != groups {
		return false
	}
	for _, g := range gs {
		if g.leader == "-" || g.leader == "" || len(g.replicas) != 3 || g.learner != "-" || slices.Contains(g.replicas, exclude) {
			return false
		}
	}
	return true
}

// preferredLed reports whether every group is led by its preferred
// leader, as the servers compute it from the directory
// (ownership.Directory.PreferredLeaders, groups/membership.go balance):
// where the leaders settle, no node leading more than its share.
func preferredLed(gs []groupInfo) bool {
	d := &ownership.Directory{Replicas: 3}
	for _, g := range gs {
		r := slices.Clone(g.replicas)
		slices.Sort(r)
		d.Groups = append(d.Groups, ownership.Group{ID: uint32(g.id), Replicas: r})
	}
	want := d.PreferredLeaders()
	for _, g := range gs {
		if g.leader != want[uint32(g.id)] {
			return false
		}
	}
	return true
}

// leads is RL.CLUSTER NODES's "id:replicas/leads" per node.
func leads(ns []nodeInfo) string {
	var parts []string
	for _, n := range ns {
		parts = append(parts, fmt.Sprintf("%s:%d/%d", n.id, n.replicas, n.leads))
	}
	return strings.Join(parts, " ")
}

// waitPlaced waits until the cluster serves every slot, every group has
// three voters, no learner and its preferred leader; it returns RL.CLUSTER
// NODES's replicas/leads per node. The leaders are where the server puts
// them (no node leads more than its share where the placement allows it),
// and the table shows how many each leads.
func (c *cluster) waitPlaced(groups int, timeout time.Duration) (string, error) {
	deadline := time.Now().Add(timeout)
	var last []groupInfo
	for time.Now().Before(deadline) {
		time.Sleep(200 * time.Millisecond)
		v, err := c.do("", "CLUSTER", "INFO")
		if s, _ := v.(string); err != nil || !strings.Contains(s, "cluster_state:ok") {
			continue
		}
		gs, err := c.groups("")
		if err != nil {
			continue
		}
		last = gs
		if !placed(gs, groups, "") || !preferredLed(gs) {
			continue
		}
		ns, err := c.nodesInfo("")
		if err != nil || len(ns) != len(c.nodes) {
			continue
		}
		return leads(ns), nil
	}
	return "", fmt.Errorf("not placed with the preferred leaders in %v (groups %+v); logs in %s", timeout, last, c.dir)
}

// cpu is every process's CPU time (user+system, /proc/<pid>/stat).
func (c *cluster) cpu() []time.Duration {
	var out []time.Duration
	for _, nd := range c.nodes {
		out = append(out, benchproc.CPUTime(nd.cmd.Process.Pid))
	}
	return out
}

// throttled sums cpu.stat over the nodes' cgroups.
func (c *cluster) throttled() (periods, throttled int64) {
	for _, nd := range c.nodes {
		if nd.quota != nil {
			p, t, _ := nd.quota.Throttled()
			periods += p
			throttled += t
		}
	}
	return periods, throttled
}
