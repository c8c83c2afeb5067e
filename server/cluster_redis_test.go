package server

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/status"
)

// TestClusterRepliesMatchRedis starts a real three-master Redis 7 cluster
// (Debian's redis-server) and an rlserver whose fake SlotRouter has the
// same nodes and slots, as node 1 sees them, then compares the replies of
// both, byte for byte where the cluster's state is the same, in RESP2 and
// RESP3. Slot 16383 is assigned to no one (the cluster runs with
// cluster-require-full-coverage no) so that CLUSTERDOWN can be compared.
func TestClusterRepliesMatchRedis(t *testing.T) {
	nodes := startRedisNodes(t, 3)
	ctx := context.Background()
	ranges := [][2]int{{0, 5460}, {5461, 10922}, {10923, 16382}}
	for i, n := range nodes {
		if err := n.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", ranges[i][0], ranges[i][1]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range nodes[1:] {
		host, port, _ := net.SplitHostPort(n.Options().Addr)
		bus, err := n.ConfigGet(ctx, "cluster-port").Result()
		if err != nil {
			t.Fatal(err)
		}
		if err := nodes[0].Do(ctx, "CLUSTER", "MEET", host, port, bus["cluster-port"]).Err(); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(10 * time.Second)
	for !clusterReady(ctx, nodes) {
		if time.Now().After(deadline) {
			t.Fatal("the Redis cluster did not converge within 10s")
		}
		time.Sleep(50 * time.Millisecond)
	}

	// The fake router's topology is node 1's CLUSTER NODES.
	text, err := nodes[0].ClusterNodes(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	topo := topologyFromNodes(t, text)
	mine := keyIn("mine", 0, 5460)
	if err := nodes[0].Set(ctx, mine, "1", 0).Err(); err != nil {
		t.Fatal(err)
	}
	b := newSlotBackend(t, topo)
	b.keys[slotOf(mine)] = []string{mine}
	addr, _ := serveBackend(t, b)

	x, y := keyIn("x", 0, 5460), keyIn("y", 0, 5460)
	for slotOf(y) == slotOf(x) {
		y += "y"
	}
	theirs := keyIn("theirs", 5461, 16382)
	unserved := keyIn("unserved", 16383, 16383)
	for _, proto := range []int{2, 3} {
		red := dialProto(t, nodes[0].Options().Addr, proto)
		rl := dialProto(t, addr, proto)
		same := func(redisCmd, rlCmd []string) (value, value) {
			t.Helper()
			rv, ov := red.do(redisCmd...), rl.do(rlCmd...)
			if rv.raw != ov.raw {
				t.Errorf("RESP%d: Redis %v = %q\nrlserver %v = %q", proto, redisCmd, rv.raw, rlCmd, ov.raw)
			}
			return rv, ov
		}
		for _, cmd := range []string{
			"CLUSTER SLOTS", "CLUSTER MYID", "CLUSTER KEYSLOT foo", "CLUSTER KEYSLOT {user1000}.following",
			"CLUSTER COUNTKEYSINSLOT " + itoa(slotOf(mine)), "CLUSTER GETKEYSINSLOT " + itoa(slotOf(mine)) + " 10",
			"CLUSTER COUNTKEYSINSLOT 1", "CLUSTER GETKEYSINSLOT 1 10",
			"CLUSTER COUNTKEYSINSLOT 16384", "CLUSTER COUNTKEYSINSLOT x", "CLUSTER GETKEYSINSLOT -1 1",
			"CLUSTER GETKEYSINSLOT 0 x", "CLUSTER KEYSLOT", "CLUSTER INFO x", "CLUSTER NOPE", "CLUSTER",
			"READONLY", "READWRITE", "ASKING", "READONLY x",
			"DEL " + x + " " + y, "EXISTS " + x + " " + y, "UNLINK " + x + " " + y,
		} {
			same(strings.Fields(cmd), strings.Fields(cmd))
		}
		// Redirections: the same text for a GET on Redis and a limiter
		// command here.
		same([]string{"GET", theirs}, []string{"RL.ALLOW", theirs, "1", "1"})
		same([]string{"GET", unserved}, []string{"RL.ALLOW", unserved, "1", "1"})
		same([]string{"MSET", x, "1", y, "2"}, []string{"RL.CHECK", "p", x, "p", y})

		// SHARDS: Redis lists its shards in no particular order.
		rv, ov := red.do("CLUSTER", "SHARDS"), rl.do("CLUSTER", "SHARDS")
		if rv.typ != ov.typ || !slices.Equal(sortedRaws(rv), sortedRaws(ov)) {
			t.Errorf("RESP%d CLUSTER SHARDS:\nRedis    %s\nrlserver %s", proto, rv, ov)
		}
		// NODES: the same lines but for the ping and pong times and the
		// config epochs (Redis's are per node).
		rv, ov = red.do("CLUSTER", "NODES"), rl.do("CLUSTER", "NODES")
		if rv.typ != ov.typ || !slices.Equal(maskedNodes(rv.text), maskedNodes(ov.text)) {
			t.Errorf("RESP%d CLUSTER NODES (type %c, %c):\nRedis\n%s\nrlserver\n%s", proto, rv.typ, ov.typ, rv.text, ov.text)
		}
		// INFO: Redis's fields (the per-type message counters Redis shows
		// only once nonzero aside), with the same values where the
		// cluster's state is the same; rlserver, like a Redis requiring
		// full coverage, is not ok with a slot unassigned.
		rv, ov = red.do("CLUSTER", "INFO"), rl.do("CLUSTER", "INFO")
		rf, of := infoFields(rv.text), infoFields(ov.text)
		for _, k := range sortedKeys(rf) {
			if _, ok := of[k]; !ok && !strings.HasPrefix(k, "cluster_stats_messages_") {
				t.Errorf("RESP%d CLUSTER INFO lacks Redis's %s", proto, k)
			}
		}
		for _, k := range sortedKeys(of) {
			if _, ok := rf[k]; !ok {
				t.Errorf("RESP%d CLUSTER INFO has %s, which Redis does not", proto, k)
			}
		}
		for _, k := range []string{"cluster_slots_assigned", "cluster_slots_ok", "cluster_slots_pfail", "cluster_slots_fail", "cluster_known_nodes", "cluster_size"} {
			if rf[k] != of[k] {
				t.Errorf("RESP%d CLUSTER INFO %s = %s, Redis says %s", proto, k, of[k], rf[k])
			}
		}
		if rv.typ != ov.typ || rf["cluster_state"] != "ok" || of["cluster_state"] != "fail" {
			t.Errorf("RESP%d CLUSTER INFO: types %c %c, cluster_state %s and %s, want ok (Redis, full coverage off) and fail", proto, rv.typ, ov.typ, rf["cluster_state"], of["cluster_state"])
		}
		// HELP: Redis's lines for the subcommands rlserver has.
		rv, ov = red.do("CLUSTER", "HELP"), rl.do("CLUSTER", "HELP")
		redisLines := map[string]bool{}
		for _, e := range rv.elems {
			redisLines[e.String()] = true
		}
		for _, e := range ov.elems {
			if !redisLines[e.String()] && !strings.Contains(e.text, "MYSHARDID") && !strings.Contains(e.text, "shard id") {
				t.Errorf("RESP%d CLUSTER HELP line %s is not Redis's", proto, e)
			}
		}
		// HELLO's mode and INFO's cluster section: Redis's lines, then
		// rlserver's group and slot-move fields (info.go's writeGroupInfo
		// and writeMoveInfo; the fake lists no groups and no move).
		moveFields := "cluster_groups:0\r\ncluster_led_groups:\r\ncluster_replica_groups:\r\n" +
			"cluster_moves_in_progress:0\r\ncluster_moves_finished:0\r\ncluster_rebalancing:0\r\n"
		if rv, ov := red.do("INFO", "cluster"), rl.do("INFO", "cluster"); rv.text+moveFields != ov.text {
			t.Errorf("RESP%d INFO cluster: Redis %q, rlserver %q, want Redis's followed by %q", proto, rv.text, ov.text, moveFields)
		}
		rm, om := red.do("HELLO", itoa(proto)), rl.do("HELLO", itoa(proto))
		if !strings.Contains(rm.String(), "$mode $cluster") || !strings.Contains(om.String(), "$mode $cluster") {
			t.Errorf("RESP%d HELLO: Redis %s, rlserver %s", proto, rm, om)
		}
	}
}

// clusterReady reports whether every node sees the cluster as ok, with
// all three nodes and the slots of all three.
func clusterReady(ctx context.Context, nodes []*redis.Client) bool {
	for _, n := range nodes {
		info, err := n.ClusterInfo(ctx).Result()
		if err != nil || !strings.Contains(info, "cluster_state:ok") || !strings.Contains(info, "cluster_known_nodes:3\r") {
			return false
		}
		s, err := n.ClusterSlots(ctx).Result()
		if err != nil || len(s) != 3 {
			return false
		}
	}
	return true
}

// topologyFromNodes builds the Topology a SlotRouter would give for the
// cluster a CLUSTER NODES text describes.
func topologyFromNodes(t *testing.T, text string) status.Topology {
	topo := status.Topology{Epoch: 3}
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		hostPort, cport, _ := strings.Cut(f[1], "@")
		host, _, _ := net.SplitHostPort(hostPort)
		n := status.TopologyNode{ID: f[0], Name: f[0][:8], Addr: hostPort, RaftAddr: net.JoinHostPort(host, cport),
			Myself: strings.Contains(f[2], "myself")}
		if n.Myself {
			topo.MyID = n.ID
		}
		topo.Nodes = append(topo.Nodes, n)
		for _, r := range f[8:] {
			lo, hi, found := strings.Cut(r, "-")
			if !found {
				hi = lo
			}
			start, err1 := strconv.Atoi(lo)
			end, err2 := strconv.Atoi(hi)
			if err1 != nil || err2 != nil {
				t.Fatalf("CLUSTER NODES range %q", r)
			}
			topo.Ranges = append(topo.Ranges, status.SlotRange{Start: start, End: end, Group: uint32(len(topo.Ranges) + 1), Leader: n.ID})
		}
	}
	sort.Slice(topo.Ranges, func(i, j int) bool { return topo.Ranges[i].Start < topo.Ranges[j].Start })
	return topo
}

func sortedRaws(v value) []string {
	var out []string
	for _, e := range v.elems {
		out = append(out, e.raw)
	}
	sort.Strings(out)
	return out
}

// maskedNodes returns CLUSTER NODES's lines, sorted, with the ping, pong
// and config epoch fields replaced by "N".
func maskedNodes(text string) []string {
	var out []string
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		f := strings.Split(line, " ")
		if len(f) >= 8 {
			f[4], f[5], f[6] = "N", "N", "N"
		}
		out = append(out, strings.Join(f, " "))
	}
	sort.Strings(out)
	return out
}

// startRedisNodes runs n redis-servers in cluster mode with no slots, each
// on free loopback ports (client and bus) in its own temp dir, until the
// test ends, and returns a client of each.
func startRedisNodes(t *testing.T, n int) []*redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		// make test does not install it (Debian's package starts a Redis
		// on port 6379, where make run listens): CI does and requires it.
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is required (Debian's redis-server package): ", err)
		}
		t.Skip("redis-server not found (Debian's redis-server package): ", err)
	}
	var clients []*redis.Client
	for range n {
		port, busPort := freePort(t), freePort(t)
		dir := t.TempDir()
		cmd := exec.Command(bin, "--port", itoa(port), "--cluster-port", itoa(busPort), "--bind", "127.0.0.1",
			"--cluster-enabled", "yes", "--cluster-config-file", filepath.Join(dir, "nodes.conf"),
			"--cluster-require-full-coverage", "no", "--cluster-node-timeout", "2000",
			"--dir", dir, "--save", "", "--appendonly", "no", "--logfile", filepath.Join(dir, "redis.log"))
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			cmd.Process.Kill()
			cmd.Wait()
		})
		c := redis.NewClient(&redis.Options{Addr: "127.0.0.1:" + itoa(port), MaxRetries: -1})
		t.Cleanup(func() { c.Close() })
		clients = append(clients, c)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, c := range clients {
		for c.Ping(context.Background()).Err() != nil {
			if time.Now().After(deadline) {
				t.Fatal("redis-server did not answer PING within 10s")
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return clients
}

func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}
