package clienttest

import (
	"context"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestClusterRemovedNodeRefuses pins issue 23's bug 6: a node removed with
// RL.CLUSTER REMOVE kept serving (it forwarded to the leader). Now it
// refuses every replicated command with the REMOVED error (a code clients
// do not retry), says so at WARN once, reports rl_cluster_removed:1 in INFO
// and rlserver_cluster_removed 1 in the metrics, is not ready, and stops
// cleanly on SIGTERM; the two remaining nodes keep serving.
func TestClusterRemovedNodeRefuses(t *testing.T) {
	c := startCluster(t, serverBin)
	leader := c.waitLeader(10 * time.Second)
	var victim, other *cnode
	for _, n := range c.nodes {
		switch {
		case n == leader:
		case victim == nil:
			victim = n
		default:
			other = n
		}
	}
	// Restart the victim with a metrics address, for /readyz and /metrics.
	c.stop(victim)
	ops := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	victim.args = []string{"--metrics-addr", ops}
	c.launch(victim)
	pollUntil(t, 15*time.Second, "the restarted node to see the leader", func() bool { return c.leaderOf(victim) != "" })
	pollUntil(t, 10*time.Second, "the node to be ready", func() bool {
		code, _ := httpGet(t, "http://"+ops+"/readyz")
		return code == 200
	})
	if v, err := rawDo(victim.respAddr, 5*time.Second, "RL.ALLOW", "before", "5", "0.000001"); err != nil || len(v.elems) != 4 {
		t.Fatalf("RL.ALLOW on the node before its removal: %v %v", v, err)
	}

	lc := clusterClient(t, c.node(c.waitLeader(10*time.Second).id).respAddr)
	ctx := context.Background()
	if err := lc.Do(ctx, "RL.CLUSTER", "REMOVE", victim.id).Err(); err != nil {
		t.Fatalf("RL.CLUSTER REMOVE %s: %v", victim.id, err)
	}

	const refused = "REMOVED this node was removed from the cluster; send commands to another member"
	var last string
	if !pollFor(10*time.Second, func() bool {
		v, err := rawDo(victim.respAddr, 5*time.Second, "RL.ALLOW", "after", "5", "0.000001")
		last = v.String()
		if err != nil {
			last = err.Error()
		}
		return v.kind == '-' && v.str == refused
	}) {
		t.Fatalf("the removed node still answers RL.ALLOW: %s", last)
	}
	// go-redis gets the error at once: the code is not one it retries.
	vc := clusterClient(t, victim.respAddr)
	start := time.Now()
	if err := vc.Do(ctx, allowArgs("after", 5, 1)...).Err(); err == nil || err.Error() != refused {
		t.Fatalf("go-redis on the removed node: %v", err)
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("go-redis took %v for the REMOVED error: it retried", d)
	}
	info, err := vc.Info(ctx, "replication").Result()
	if err != nil || !strings.Contains(info, "rl_cluster_removed:1\r\n") {
		t.Fatalf("INFO replication on the removed node: %v\n%s", err, info)
	}
	if code, body := httpGet(t, "http://"+ops+"/readyz"); code != 503 || !strings.Contains(body, "removed from the cluster") {
		t.Fatalf("/readyz on the removed node: %d %q", code, body)
	}
	if _, body := httpGet(t, "http://"+ops+"/metrics"); !strings.Contains(body, "\nrlserver_cluster_removed 1\n") {
		t.Fatalf("/metrics on the removed node lacks rlserver_cluster_removed 1")
	}
	if n := strings.Count(victim.logs[len(victim.logs)-1].String(), "this node was removed from the cluster"); n != 1 {
		t.Fatalf("the removal was logged %d times; want once:\n%s", n, victim.logs[len(victim.logs)-1])
	}

	// The other two serve, and count two members.
	for _, n := range []*cnode{leader, other} {
		cl := clusterClient(t, n.respAddr)
		if ok, _, err := allowOnce(ctx, cl, "rest-"+n.id, 3, 1); err != nil || !ok {
			t.Fatalf("RL.ALLOW on %s after the removal: %v %v", n.id, ok, err)
		}
		info, err := cl.Info(ctx, "replication").Result()
		if err != nil || !strings.Contains(info, "rl_cluster_removed:0\r\n") || !strings.Contains(info, "raft_peers:2\r\n") {
			t.Fatalf("INFO replication on %s: %v\n%s", n.id, err, info)
		}
	}
	c.stop(victim) // a clean exit on SIGTERM
}
