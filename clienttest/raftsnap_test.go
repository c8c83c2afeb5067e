package clienttest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestRaftSnapshotMetrics (issue 8): a cluster with a low snapshot
// threshold takes Raft snapshots as traffic comes; every node's
// /metrics and INFO persistence show their count, size, duration and age
// moving, and a restarted node counts the snapshot it restored. Scraping
// replicas while they apply must not make them diverge.
func TestRaftSnapshotMetrics(t *testing.T) {
	c := &pcluster{t: t, bin: serverBin}
	var peers []string
	metrics := map[string]string{}
	for i := range 3 {
		n := &cnode{
			id:       fmt.Sprintf("n%d", i+1),
			respAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			raftAddr: net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))),
			dir:      t.TempDir(),
		}
		metrics[n.id] = net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
		c.nodes = append(c.nodes, n)
		peers = append(peers, n.id+"="+n.raftAddr)
	}
	c.peers = strings.Join(peers, ",")
	t.Cleanup(c.cleanup)
	base := []string{"--snapshot-threshold", "40", "--snapshot-interval", "100ms"}
	launch := func(n *cnode) {
		c.extra = append(base[:len(base):len(base)], "--metrics-addr", metrics[n.id])
		c.launch(n)
	}
	for _, n := range c.nodes {
		launch(n)
	}
	leader := c.waitLeader(20 * time.Second)
	url := func(n *cnode) string { return "http://" + metrics[n.id] }
	value := func(n *cnode, name string, labels ...string) float64 {
		t.Helper()
		v, ok := metricValue(scrape(t, url(n)), name, labels...)
		if !ok {
			t.Fatalf("%s: %s%v missing from /metrics", n.id, name, labels)
		}
		return v
	}
	const taken = "rlserver_raft_snapshots_taken_total"
	for _, n := range c.nodes {
		if v := value(n, taken, "result", "ok"); v != 0 {
			t.Fatalf("%s: %v snapshots before any traffic", n.id, v)
		}
		if v := value(n, "rlserver_raft_snapshot_last_size_bytes"); v != 0 {
			t.Fatalf("%s: snapshot size %v before the first", n.id, v)
		}
	}

	// Traffic: each command is a log entry, past the threshold.
	lc := clusterClient(t, leader.respAddr)
	ctx := context.Background()
	traffic := func(prefix string, keys int) {
		for i := range keys {
			if _, _, err := allowOnce(ctx, lc, fmt.Sprintf("%s%d", prefix, i), 10, 1); err != nil {
				t.Fatal(err)
			}
		}
	}
	traffic("a", 100)
	type snap struct{ count, size, duration, stamp, index float64 }
	read := func(n *cnode) snap {
		fams := scrape(t, url(n))
		var s snap
		s.count, _ = metricValue(fams, taken, "result", "ok")
		s.size, _ = metricValue(fams, "rlserver_raft_snapshot_last_size_bytes")
		s.duration, _ = metricValue(fams, "rlserver_raft_snapshot_last_duration_seconds")
		s.stamp, _ = metricValue(fams, "rlserver_raft_snapshot_last_success_timestamp_seconds")
		s.index, _ = metricValue(fams, "rlserver_raft_last_snapshot_index")
		return s
	}
	first := map[string]snap{}
	for _, n := range c.nodes {
		pollUntil(t, 15*time.Second, n.id+" to take a snapshot", func() bool { return read(n).count >= 1 })
		s := read(n)
		// Raft snapshots once its log has 40 entries past the last
		// snapshot, but the snapshot holds the state machine as applied
		// so far, which may trail the log by a few entries (index 39
		// was seen): the index is positive, not necessarily >= 40.
		if s.size <= 0 || s.duration <= 0 || s.index < 1 || time.Since(time.Unix(int64(s.stamp), 0)) > time.Minute {
			t.Errorf("%s after its first snapshot: %+v", n.id, s)
		}
		first[n.id] = s
		t.Logf("%s: snapshot %v of %v bytes at index %v in %.1f ms", n.id, s.count, s.size, s.index, s.duration*1000)

		// INFO persistence says the same.
		info, err := clusterClient(t, n.respAddr).Info(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"rl_raft_snapshots_taken:", "rl_raft_last_snapshot_bytes:", "rl_raft_last_snapshot_duration_us:", "rl_raft_last_snapshot_age_sec:", "rl_raft_snapshots_restored:0\r\n"} {
			if !strings.Contains(info, want) {
				t.Errorf("%s: INFO persistence lacks %q:\n%s", n.id, want, info)
			}
		}
		if strings.Contains(info, "rl_raft_snapshots_taken:0\r\n") || strings.Contains(info, "rl_raft_last_snapshot_bytes:0\r\n") {
			t.Errorf("%s: INFO persistence shows no snapshot:\n%s", n.id, info)
		}
	}

	// The age grows while nothing happens.
	n1 := c.nodes[0]
	age0 := value(n1, "rlserver_raft_snapshot_age_seconds")
	pollUntil(t, 10*time.Second, "the snapshot age to grow", func() bool {
		return value(n1, "rlserver_raft_snapshot_age_seconds") >= age0+1
	})

	// More keys: more snapshots, each larger, and the age back near 0.
	traffic("b", 200)
	for _, n := range c.nodes {
		pollUntil(t, 15*time.Second, n.id+" to take another snapshot", func() bool {
			s := read(n)
			return s.count > first[n.id].count && s.size > first[n.id].size
		})
	}
	if age := value(n1, "rlserver_raft_snapshot_age_seconds"); age >= age0+1 {
		t.Errorf("snapshot age %v after a new snapshot, was %v before", age, age0)
	}
	// The scrapes above ran while the followers applied the traffic: a
	// scrape used to count keys at the wall clock, moving a follower's
	// shards ahead of the log, and the replicas diverged. They must agree.
	c.converge(20 * time.Second)

	// A restarted follower restores its latest snapshot at start-up.
	var follower *cnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	c.stop(follower)
	launch(follower)
	if v := value(follower, "rlserver_raft_snapshots_restored_total"); v != 1 {
		t.Errorf("%s restored %v snapshots at start-up, want 1", follower.id, v)
	}
	if v := value(follower, "rlserver_raft_snapshot_last_restore_duration_seconds"); v <= 0 {
		t.Errorf("%s: restore duration %v", follower.id, v)
	}
	info, err := clusterClient(t, follower.respAddr).Info(ctx, "persistence").Result()
	if err != nil || !strings.Contains(info, "rl_raft_snapshots_restored:1\r\n") {
		t.Errorf("%s: INFO persistence after the restart (%v):\n%s", follower.id, err, info)
	}
	c.converge(20 * time.Second)
}
