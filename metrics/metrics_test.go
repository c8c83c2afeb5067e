package metrics

import (
	"context"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/memlimit"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/status"
)

func TestLabelSafe(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"user:42", "user:42"},
		{"caf\xc3\xa9", "café"},
		{"a\xffb", `a\xffb`},
		{strings.Repeat("k", 200), strings.Repeat("k", 200)[:128]},
	} {
		got := LabelSafe(c.in)
		if !strings.HasPrefix(got, c.want) || !utf8.ValidString(got) || len(got) > 132 {
			t.Errorf("LabelSafe(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// fakeServer stands in for the command layer.
type fakeServer struct {
	cmds []status.Command
	top  []status.TopKey
}

func (f *fakeServer) Counters() status.Counters {
	return status.Counters{ConnectionsReceived: 5, RejectedConnections: 1, AuthFailures: 2, ExpiredKeys: 9,
		ClusterMoved: 11, ClusterCrossSlot: 3, ClusterDown: 1}
}
func (f *fakeServer) CommandStats() []status.Command { return f.cmds }
func (f *fakeServer) BatchLatency() status.Histogram { return hist(4, 0.5) }
func (f *fakeServer) ErrorStats() map[string]int64   { return map[string]int64{"ERR": 3, "NOAUTH": 1} }
func (f *fakeServer) ConnectedClients() int          { return 6 }
func (f *fakeServer) MaxClients() int                { return 100 }
func (f *fakeServer) TopDenied(n int) []status.TopKey {
	return f.top[:min(n, len(f.top))]
}
func (f *fakeServer) PolicyStats() []policy.Stat {
	return []policy.Stat{{Name: "api", Allowed: 10, Denied: 4}}
}

// hist is n observations in the first bucket, summing to sum seconds.
func hist(n uint64, sum float64) status.Histogram {
	h := status.Histogram{Cumulative: make([]uint64, len(status.LatencyBuckets)), Count: n, SumSeconds: sum}
	for i := range h.Cumulative {
		h.Cumulative[i] = n
	}
	return h
}

type fakeMemory struct{}

func (fakeMemory) UsedMemory(context.Context) (int64, engine.Usage, bool) {
	return 1000, engine.Usage{}, true
}
func (fakeMemory) MaxMemory() (int64, memlimit.EvictionPolicy) { return 2000, memlimit.NoEviction }
func (fakeMemory) EvictedKeys() int64                          { return 7 }
func (fakeMemory) RefusingNewKeys() bool                       { return true }

type fakeKeys struct{}

func (fakeKeys) Usage(context.Context) (engine.Usage, error) {
	var u engine.Usage
	u.Keys[engine.KindGCRA] = 11
	return u, nil
}

type fakePersistence struct{}

func (fakePersistence) PersistenceStatus() status.Persistence {
	return status.Persistence{Saves: 3, Failures: 1, LastBytes: 512, LastKeys: 8, Changes: 2, LastOK: false, LastSave: time.Unix(1000, 0)}
}
func (fakePersistence) StopWrites() bool { return true }

type fakeCluster struct{}

func (fakeCluster) ClusterStatus() status.Cluster {
	return status.Cluster{NodeID: "a", Role: "follower", LeaderID: "b", Term: 4, CommitIndex: 20, AppliedIndex: 17,
		LeaderChanges: 2, LateForwards: 3, DiskFailed: true, DiskWriteErrors: 4, DiskStalls: 5, LogSyncs: 6, Nodes: []status.Node{{ID: "a"}, {ID: "b"}, {ID: "c"}}}
}
func (fakeCluster) RaftSnapshotStatus() status.RaftSnapshots {
	return status.RaftSnapshots{Taken: 5, Failures: 1, LastBytes: 64, LastDuration: -1, LastRestoreDuration: -1}
}

// gather collects src's metrics as "name{label=value,...}" -> value
// (histograms by their sample count).
func gather(t *testing.T, src Sources) map[string]float64 {
	t.Helper()
	reg := prometheus.NewRegistry()
	reg.MustRegister(New(src))
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var ls []string
			for _, l := range m.GetLabel() {
				ls = append(ls, l.GetName()+"="+l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(ls, ",") + "}"
			switch {
			case m.Gauge != nil:
				out[key] = m.Gauge.GetValue()
			case m.Counter != nil:
				out[key] = m.Counter.GetValue()
			case m.Histogram != nil:
				out[key] = float64(m.Histogram.GetSampleCount())
			}
		}
	}
	return out
}

// TestCollectStandalone reads every source through fakes: the series a
// standalone server exports, and none of a cluster's.
func TestCollectStandalone(t *testing.T) {
	srv := &fakeServer{
		cmds: []status.Command{
			{Name: "rl.allow", Calls: 10, Allowed: 6, Denied: 3, Failed: 1, Rejected: 2, Latency: hist(10, 0.01), Decides: true},
			{Name: "ping", Calls: 4},
		},
		top: []status.TopKey{{Key: "a\xffb", Denied: 5}, {Key: "a\xffb", Denied: 4}, {Key: "user:1", Denied: 2}},
	}
	got := gather(t, Sources{Server: srv, Memory: fakeMemory{}, Engine: fakeKeys{}, Persistence: fakePersistence{}, Version: "v9"})
	for key, want := range map[string]float64{
		"rlserver_commands_total{command=rl.allow,outcome=allowed}":  6,
		"rlserver_commands_total{command=rl.allow,outcome=denied}":   3,
		"rlserver_commands_total{command=rl.allow,outcome=ok}":       0,
		"rlserver_commands_total{command=rl.allow,outcome=error}":    3,
		"rlserver_commands_total{command=ping,outcome=ok}":           4,
		"rlserver_commands_total{command=ping,outcome=error}":        0,
		"rlserver_command_duration_seconds{command=rl.allow}":        10,
		"rlserver_pipeline_duration_seconds{}":                       4,
		"rlserver_error_replies_total{code=ERR}":                     3,
		"rlserver_connected_clients{}":                               6,
		"rlserver_max_clients{}":                                     100,
		"rlserver_connections_received_total{}":                      5,
		"rlserver_connections_rejected_total{}":                      1,
		"rlserver_auth_failures_total{}":                             2,
		"rlserver_expired_keys_total{}":                              9,
		"rlserver_keys{kind=gcra}":                                   11,
		`rlserver_top_denied_keys{key=a\xffb}`:                       5,
		"rlserver_top_denied_keys{key=user:1}":                       2,
		"rlserver_policy_decisions_total{outcome=denied,policy=api}": 4,
		"rlserver_snapshot_saves_total{result=ok}":                   3,
		"rlserver_snapshot_saves_total{result=failed}":               1,
		"rlserver_snapshot_last_size_bytes{}":                        512,
		"rlserver_snapshot_last_success_timestamp_seconds{}":         1000,
		"rlserver_snapshot_last_save_ok{}":                           0,
		"rlserver_snapshot_refusing_writes{}":                        1,
		"rlserver_used_memory_bytes{}":                               1000,
		"rlserver_maxmemory_bytes{}":                                 2000,
		"rlserver_evicted_keys_total{}":                              7,
		"rlserver_maxmemory_refusing_new_keys{}":                     1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "rlserver_raft_") || strings.Contains(key, "command=ping,outcome=allowed") {
			t.Errorf("standalone exports %s", key)
		}
	}
	if got["rlserver_build_info{go_version="+runtime.Version()+",version=v9}"] != 1 {
		t.Errorf("build_info missing")
	}
}

// TestCollectCluster reads a Raft node's status through a fake: the raft
// series, and no snapshot-file series.
func TestCollectCluster(t *testing.T) {
	got := gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Cluster: fakeCluster{}, TopKeys: -1})
	for key, want := range map[string]float64{
		"rlserver_raft_state{state=follower}":            1,
		"rlserver_raft_state{state=leader}":              0,
		"rlserver_raft_term{}":                           4,
		"rlserver_raft_apply_lag{}":                      3,
		"rlserver_raft_has_leader{}":                     1,
		"rlserver_raft_peers{}":                          3,
		"rlserver_raft_leader_changes_total{}":           2,
		"rlserver_raft_late_forwards_total{}":            3,
		"rlserver_raft_disk_failed{}":                    1,
		"rlserver_raft_disk_write_errors_total{}":        4,
		"rlserver_raft_disk_stalls_total{}":              5,
		"rlserver_raft_log_fsyncs_total{}":               6,
		"rlserver_raft_snapshots_taken_total{result=ok}": 5,
		"rlserver_raft_snapshot_last_duration_seconds{}": 0,
		"rlserver_raft_snapshot_last_size_bytes{}":       64,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for key := range got {
		if strings.HasPrefix(key, "rlserver_snapshot_") || strings.HasPrefix(key, "rlserver_keys") ||
			strings.HasPrefix(key, "rlserver_raft_snapshot_last_restore") {
			t.Errorf("cluster node without those sources exports %s", key)
		}
	}
}

type fakeGroups struct{ t status.Topology }

func (f fakeGroups) Topology() status.Topology { return f.t }

// TestCollectGroups reads a sharded node's topology through a fake: one
// series per data group, labelled by its id, the replica series only for
// the groups this node hosts, and the directory's totals.
func TestCollectGroups(t *testing.T) {
	topo := status.Topology{
		Epoch:  7,
		Ranges: []status.SlotRange{{Start: 0, End: 5460, Group: 1}, {Start: 5461, End: 10922, Group: 2}, {Start: 12000, End: 12009, Group: 1}},
		Groups: []status.Group{
			{ID: 1, Leader: "n1", Role: "leader", Slots: 5471, Applied: 40, Commit: 42, LastLog: 43, Keys: 12, Lag: 3},
			{ID: 2, Leader: "", Role: "follower", Slots: 5462, Applied: 9, Commit: 9, LastLog: 9, Keys: 1},
			{ID: 3, Slots: 0}, // in the directory, not opened here yet
		},
	}
	got := gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Cluster: fakeCluster{}, Groups: fakeGroups{topo}, TopKeys: -1})
	for key, want := range map[string]float64{
		"rlserver_cluster_slots_assigned{}":                   5461 + 5462 + 10,
		"rlserver_cluster_epoch{}":                            7,
		"rlserver_group_leader{group=1}":                      1,
		"rlserver_group_leader{group=2}":                      0,
		"rlserver_group_leader{group=3}":                      0,
		"rlserver_group_slots{group=1}":                       5471,
		"rlserver_group_slots{group=2}":                       5462,
		"rlserver_group_slots{group=3}":                       0,
		"rlserver_group_keys{group=1}":                        12,
		"rlserver_group_keys{group=2}":                        1,
		"rlserver_group_applied_index{group=1}":               40,
		"rlserver_group_commit_index{group=1}":                42,
		"rlserver_group_lag_entries{group=1}":                 3,
		"rlserver_group_lag_entries{group=2}":                 0,
		"rlserver_group_applied_index{group=2}":               9,
		"rlserver_raft_state{state=follower}":                 1, // the meta group, through Cluster
		"rlserver_cluster_redirects_total{reply=moved}":       11,
		"rlserver_cluster_redirects_total{reply=crossslot}":   3,
		"rlserver_cluster_redirects_total{reply=clusterdown}": 1,
	} {
		if v, ok := got[key]; !ok || v != want {
			t.Errorf("%s = %v (present %v), want %v", key, v, ok, want)
		}
	}
	for _, name := range []string{"keys", "applied_index", "commit_index", "lag_entries"} {
		if _, ok := got["rlserver_group_"+name+"{group=3}"]; ok {
			t.Errorf("rlserver_group_%s exported for a group this node does not host", name)
		}
	}

	// A node that is not sharded exports no group series.
	for key := range gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Cluster: fakeCluster{}, TopKeys: -1}) {
		if strings.HasPrefix(key, "rlserver_group_") || strings.HasPrefix(key, "rlserver_cluster_slots") ||
			strings.HasPrefix(key, "rlserver_cluster_epoch") || strings.HasPrefix(key, "rlserver_cluster_redirects") {
			t.Errorf("a one-group cluster node exports %s", key)
		}
	}
}

// TestCollectGroupsBounded: a topology listing more than MaxGroups groups
// exports MaxGroups label values, no more.
func TestCollectGroupsBounded(t *testing.T) {
	var topo status.Topology
	for i := range MaxGroups + 5 {
		topo.Groups = append(topo.Groups, status.Group{ID: uint32(i + 1), Role: "follower"})
	}
	n := 0
	for key := range gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Groups: fakeGroups{topo}, TopKeys: -1}) {
		if strings.HasPrefix(key, "rlserver_group_leader{") {
			n++
		}
	}
	if n != MaxGroups {
		t.Errorf("%d group label values, want %d", n, MaxGroups)
	}
}

// TestCollectMoves reads the slot moves of a sharded node's topology
// through a fake: the move in progress (found by its state, wherever the
// topology lists it), the finished ones listed, the last one's duration
// (by end time), and a rebalance running here.
func TestCollectMoves(t *testing.T) {
	finished := []status.Move{
		{ID: 4, Start: 100, End: 100, Source: 2, Target: 1, State: "released", Keys: 1, Began: 4e9, Ended: 4_250_000_000},
		{ID: 3, Start: 0, End: 99, Source: 1, Target: 2, State: "released", Keys: 40, Began: 1e9, Ended: 3e9},
	}
	running := status.Move{ID: 5, Start: 200, End: 299, Source: 1, Target: 3, State: "committed", Keys: 52, Began: 6e9}
	for _, c := range []struct {
		name        string
		moves       []status.Move
		rebalancing bool
		want        map[string]float64 // absent: -1
	}{
		{"none", nil, false, map[string]float64{
			"in_progress": 0, "keys": 0, "slots": 0, "finished": 0, "last_duration": -1, "rebalancing": 0}},
		{"finished only", finished, false, map[string]float64{
			"in_progress": 0, "keys": 0, "slots": 0, "finished": 2, "last_duration": 0.25, "rebalancing": 0}},
		{"in progress last", append(slices.Clone(finished), running), true, map[string]float64{
			"in_progress": 1, "keys": 52, "slots": 100, "finished": 2, "last_duration": 0.25, "rebalancing": 1}},
		{"in progress first", append([]status.Move{running}, finished...), false, map[string]float64{
			"in_progress": 1, "keys": 52, "slots": 100, "finished": 2, "last_duration": 0.25, "rebalancing": 0}},
		{"first move, one slot", []status.Move{{ID: 1, Start: 7, End: 7, Source: 2, Target: 1, State: "begun", Began: 1e9}}, true, map[string]float64{
			"in_progress": 1, "keys": 0, "slots": 1, "finished": 0, "last_duration": -1, "rebalancing": 1}},
	} {
		topo := status.Topology{Moves: c.moves, Rebalancing: c.rebalancing}
		got := gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Groups: fakeGroups{topo}, TopKeys: -1})
		for short, key := range map[string]string{
			"in_progress":   "rlserver_cluster_move_in_progress{}",
			"keys":          "rlserver_cluster_move_keys{}",
			"slots":         "rlserver_cluster_move_slots{}",
			"finished":      "rlserver_cluster_moves_finished{}",
			"last_duration": "rlserver_cluster_last_move_duration_seconds{}",
			"rebalancing":   "rlserver_cluster_rebalancing{}",
		} {
			want := c.want[short]
			if v, ok := got[key]; want < 0 && ok {
				t.Errorf("%s: %s = %v, want absent", c.name, key, v)
			} else if want >= 0 && (!ok || v != want) {
				t.Errorf("%s: %s = %v (present %v), want %v", c.name, key, v, ok, want)
			}
		}
	}

	// A node that is not sharded exports no move series.
	for key := range gather(t, Sources{Server: &fakeServer{}, Memory: fakeMemory{}, Cluster: fakeCluster{}, TopKeys: -1}) {
		if strings.HasPrefix(key, "rlserver_cluster_move") || strings.HasPrefix(key, "rlserver_cluster_last_move") ||
			strings.HasPrefix(key, "rlserver_cluster_rebalancing") {
			t.Errorf("a one-group cluster node exports %s", key)
		}
	}
}
