package main

import (
	"testing"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/groups"
	"github.com/rlserver/rlserver/metrics"
	"github.com/rlserver/rlserver/status"
	"github.com/rlserver/rlserver/statuspage"
)

// A sharded node gives the metrics and the page its groups; a one-group
// cluster node gives none.
var (
	_ clusterView       = (*groups.Host)(nil)
	_ groupsView        = (*groups.Host)(nil)
	_ metrics.Groups    = (*groups.Host)(nil)
	_ statuspage.Groups = (*groups.Host)(nil)
	_ clusterView       = (*cluster.Node)(nil)
)

func TestClusterNodeHasNoGroups(t *testing.T) {
	var v clusterView = (*cluster.Node)(nil)
	if _, ok := v.(groupsView); ok {
		t.Errorf("*cluster.Node is taken for a sharded node")
	}
}

// fakeView is a one-group cluster node, fakeSharded a sharded one.
type fakeView struct {
	leader  string
	removed bool
}

func (f fakeView) ClusterStatus() status.Cluster            { return status.Cluster{LeaderID: f.leader} }
func (f fakeView) RaftSnapshotStatus() status.RaftSnapshots { return status.RaftSnapshots{} }
func (f fakeView) Removed() bool                            { return f.removed }

type fakeSharded struct {
	fakeView
	topo status.Topology
}

func (f fakeSharded) Topology() status.Topology { return f.topo }

// TestNotReady: /readyz's answer standalone, in a one-group cluster, and on
// a sharded node, which is ready only while every data group it hosts
// knows a leader.
func TestNotReady(t *testing.T) {
	led := []status.Group{{ID: 1, Leader: "a", Role: "leader"}, {ID: 2, Leader: "b", Role: "follower"}}
	leaderless := []status.Group{{ID: 1, Leader: "a", Role: "leader"}, {ID: 2, Role: "candidate"}}
	notHosted := []status.Group{{ID: 1, Leader: "a", Role: "leader"}, {ID: 3}} // group 3 not opened here yet
	for _, c := range []struct {
		name string
		node clusterView
		want string
	}{
		{"standalone", nil, ""},
		{"one group, led", fakeView{leader: "a"}, ""},
		{"one group, no leader", fakeView{}, "no leader known"},
		{"removed", fakeView{leader: "a", removed: true}, "this node was removed from the cluster"},
		{"sharded, every group led", fakeSharded{fakeView{leader: "a"}, status.Topology{Groups: led}}, ""},
		{"sharded, a group without a leader", fakeSharded{fakeView{leader: "a"}, status.Topology{Groups: leaderless}}, "no leader known for group 2"},
		{"sharded, a group not hosted here", fakeSharded{fakeView{leader: "a"}, status.Topology{Groups: notHosted}}, ""},
		{"sharded, no meta leader", fakeSharded{fakeView{}, status.Topology{Groups: led}}, "no leader known"},
	} {
		if got := notReady(c.node); got != c.want {
			t.Errorf("%s: notReady = %q, want %q", c.name, got, c.want)
		}
	}
}
