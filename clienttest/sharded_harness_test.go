package clienttest

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A sharded cluster: three processes, each a replica of the meta group and
// of every data group (--groups), on the cluster harness.

// startSharded starts three nodes with groups data groups and waits until
// every node sees a leader in every group.
func startSharded(t *testing.T, groups int, extra ...string) *pcluster {
	t.Helper()
	return startShardedEnv(t, groups, nil, extra...)
}

// startShardedEnv starts three nodes, each process with env in its
// environment, with groups data groups, and waits until every node sees a
// leader in every group.
func startShardedEnv(t *testing.T, groups int, env []string, extra ...string) *pcluster {
	t.Helper()
	nodes := threeNodes(t)
	for _, n := range nodes {
		n.env = env
	}
	c := startClusterOf(t, serverBin, nodes, append([]string{"--groups", strconv.Itoa(groups)}, extra...)...)
	c.waitGroups(groups, 20*time.Second)
	return c
}

// groupLine is one line of RL.CLUSTER GROUPS.
type groupLine struct {
	id      int
	leader  string
	role    string
	slots   string
	keys    int
	applied int
	// replicas and learner: a placed cluster's (--replicas) voters and
	// the node being added ("" for none); nil and "" without.
	replicas []string
	learner  string
}

// groupsOf asks n for RL.CLUSTER GROUPS; nil on error.
func groupsOf(n *cnode) []groupLine {
	v, err := rawDo(n.respAddr, 2*time.Second, "RL.CLUSTER", "GROUPS")
	if err != nil || v.kind == '-' {
		return nil
	}
	var out []groupLine
	for _, line := range strings.Split(strings.TrimSpace(v.str), "\n") {
		f := strings.Fields(line)
		if len(f) < 7 { // a placed cluster adds replicas= and learner=
			return nil
		}
		g := groupLine{}
		g.id, _ = strconv.Atoi(f[0])
		kv := map[string]string{}
		for _, p := range f[1:] {
			k, val, _ := strings.Cut(p, "=")
			kv[k] = val
		}
		g.leader, g.role, g.slots = kv["leader"], kv["role"], kv["slots"]
		g.keys, _ = strconv.Atoi(kv["keys"])
		g.applied, _ = strconv.Atoi(kv["applied"])
		if r := kv["replicas"]; r != "" {
			g.replicas = strings.Split(r, ",")
		}
		if l := kv["learner"]; l != "-" {
			g.learner = l
		}
		out = append(out, g)
	}
	return out
}

// waitGroups waits until every live node lists want groups, each with a
// leader that is a live node.
func (c *pcluster) waitGroups(want int, timeout time.Duration) {
	c.t.Helper()
	var last []groupLine
	ok := pollFor(timeout, func() bool {
		for _, n := range c.live() {
			gs := groupsOf(n)
			last = gs
			if len(gs) != want {
				return false
			}
			for _, g := range gs {
				l := c.node(g.leader)
				if l == nil || l.srv == nil || l.paused {
					return false
				}
			}
		}
		return true
	})
	if !ok {
		c.t.Fatalf("groups did not all get a live leader within %v: last seen %+v", timeout, last)
	}
}

// groupLeaders maps group id to its leader as node n sees it.
func groupLeaders(n *cnode) map[int]string {
	out := map[int]string{}
	for _, g := range groupsOf(n) {
		out[g.id] = g.leader
	}
	return out
}

// nodeInfoInt reads an integer field of n's INFO; -1 when it cannot.
func nodeInfoInt(n *cnode, field string) int {
	i, err := strconv.Atoi(nodeInfo(n, field))
	if err != nil {
		return -1
	}
	return i
}

// nodeInfo reads a field of n's INFO; "" when it cannot.
func nodeInfo(n *cnode, field string) string {
	v, err := rawDo(n.respAddr, 2*time.Second, "INFO", "everything")
	if err != nil {
		return ""
	}
	for _, line := range strings.Split(v.str, "\r\n") {
		if k, val, ok := strings.Cut(line, ":"); ok && k == field {
			return strings.TrimSpace(val)
		}
	}
	return ""
}
