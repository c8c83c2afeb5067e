package server

import (
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/status"
)

func TestClusterCommandsWithoutRouter(t *testing.T) {
	addr, _ := startServer(t, Config{})
	for _, proto := range []int{2, 3} {
		rc := dialProto(t, addr, proto)
		for _, cmd := range [][]string{
			{"CLUSTER", "SLOTS"}, {"CLUSTER", "SHARDS"}, {"CLUSTER", "NODES"}, {"CLUSTER", "INFO"},
			{"CLUSTER", "MYID"}, {"CLUSTER", "MYSHARDID"}, {"CLUSTER", "KEYSLOT", "k"}, {"CLUSTER", "COUNTKEYSINSLOT", "1"},
			{"CLUSTER", "GETKEYSINSLOT", "1", "1"}, {"CLUSTER", "HELP"}, {"cluster", "help"},
			{"READONLY"}, {"READWRITE"}, {"ASKING"},
		} {
			if v := rc.do(cmd...); v.String() != "-"+command.ErrTextNoCluster {
				t.Errorf("RESP%d %v = %s, want -%s", proto, cmd, v, command.ErrTextNoCluster)
			}
		}
		// Arity and unknown subcommands come first, as in Redis.
		for cmd, want := range map[string]string{
			"CLUSTER KEYSLOT": "ERR wrong number of arguments for 'cluster|keyslot' command",
			"CLUSTER NOPE":    "ERR unknown subcommand 'NOPE'. Try CLUSTER HELP.",
			"CLUSTER":         "ERR wrong number of arguments for 'cluster' command",
			"READONLY x":      "ERR wrong number of arguments for 'readonly' command",
		} {
			if v := rc.do(strings.Fields(cmd)...); v.String() != "-"+want {
				t.Errorf("RESP%d %s = %s, want -%s", proto, cmd, v, want)
			}
		}
		if m := infoFields(rc.do("INFO").text); m["cluster_enabled"] != "0" || m["redis_mode"] != "standalone" {
			t.Errorf("INFO: cluster_enabled %q redis_mode %q, want 0 and standalone", m["cluster_enabled"], m["redis_mode"])
		}
		if v := rc.do("HELLO", "3"); !strings.Contains(v.String(), "$mode $standalone") {
			t.Errorf("HELLO = %s, want mode standalone", v)
		}
	}
}

func TestClusterCommandsWithRouter(t *testing.T) {
	b := newSlotBackend(t, threeNodes())
	b.keys[5] = []string{"a", "b", "c"}
	addr, _ := serveBackend(t, b)
	for _, proto := range []int{2, 3} {
		rc := dialProto(t, addr, proto)
		for _, c := range []struct{ cmd, want string }{
			{"READONLY", "+OK"}, {"READWRITE", "+OK"}, {"ASKING", "+OK"},
			{"CLUSTER KEYSLOT foo", ":12182"},
			{"CLUSTER KEYSLOT {user1000}.following", ":3443"},
			{"CLUSTER MYID", "$" + strings.Repeat("a", 40)},
			{"CLUSTER MYSHARDID", "$" + strings.Repeat("a", 40)},
			{"CLUSTER COUNTKEYSINSLOT 5", ":3"},
			{"CLUSTER COUNTKEYSINSLOT 6", ":0"},
			{"CLUSTER GETKEYSINSLOT 5 2", "*[$a $b]"},
			{"CLUSTER GETKEYSINSLOT 5 0", "*[]"},
			{"CLUSTER COUNTKEYSINSLOT 16384", "-ERR Invalid slot"},
			{"CLUSTER COUNTKEYSINSLOT -1", "-ERR Invalid slot"},
			{"CLUSTER COUNTKEYSINSLOT x", "-ERR value is not an integer or out of range"},
			{"CLUSTER GETKEYSINSLOT 16384 1", "-ERR Invalid slot or number of keys"},
			{"CLUSTER GETKEYSINSLOT 0 -1", "-ERR Invalid slot or number of keys"},
			{"CLUSTER GETKEYSINSLOT 0 x", "-ERR value is not an integer or out of range"},
			{"CLUSTER KEYSLOT a b", "-ERR wrong number of arguments for 'cluster|keyslot' command"},
			{"CLUSTER INFO x", "-ERR wrong number of arguments for 'cluster|info' command"},
			{"CLUSTER SLOTS", "*[*[:0 :5460 *[$127.0.0.1 :7001 $" + strings.Repeat("a", 40) + " " + emptyMap(proto) + "]] " +
				"*[:5461 :10922 *[$127.0.0.1 :7002 $" + strings.Repeat("b", 40) + " " + emptyMap(proto) + "]] " +
				"*[:10923 :16383 *[$127.0.0.1 :7003 $" + strings.Repeat("c", 40) + " " + emptyMap(proto) + "]]]"},
		} {
			if got := rc.do(strings.Fields(c.cmd)...).String(); got != c.want {
				t.Errorf("RESP%d %s = %s, want %s", proto, c.cmd, got, c.want)
			}
		}
		if v := rc.do("CLUSTER", "HELP"); v.typ != '*' || len(v.elems) != len(command.ClusterHelp) || v.elems[1].String() != "+COUNTKEYSINSLOT <slot>" {
			t.Errorf("RESP%d CLUSTER HELP = %s", proto, v)
		}
		m := infoFields(rc.do("INFO").text)
		if m["cluster_enabled"] != "1" || m["redis_mode"] != "cluster" {
			t.Errorf("INFO: cluster_enabled %q redis_mode %q, want 1 and cluster", m["cluster_enabled"], m["redis_mode"])
		}
		if v := rc.do("HELLO", "3"); !strings.Contains(v.String(), "$mode $cluster") {
			t.Errorf("HELLO = %s, want mode cluster", v)
		}
		rc.do("HELLO", itoa(proto))
	}
}

func emptyMap(proto int) string {
	if proto == 3 {
		return "%[]"
	}
	return "*[]"
}

func TestClusterTopologyReplies(t *testing.T) {
	a, bID, c := strings.Repeat("a", 40), strings.Repeat("b", 40), strings.Repeat("c", 40)
	d := strings.Repeat("d", 40)
	topo := threeNodes()
	// c's group has no leader; d leads nothing and e has no address yet.
	topo.Ranges[3].Leader = ""
	topo.Nodes = append(topo.Nodes,
		status.TopologyNode{ID: d, Name: "d", Addr: "127.0.0.1:7004", RaftAddr: "127.0.0.1:17004"},
		status.TopologyNode{ID: strings.Repeat("e", 40), Name: "e", RaftAddr: "127.0.0.1:17005"})
	topo.Groups = []status.Group{{ID: 1, Leader: "a", Applied: 40}, {ID: 2, Leader: "b", Applied: 2}, {ID: 3, Leader: "b", Applied: 3}}
	addr, _ := serveBackend(t, newSlotBackend(t, topo))
	rc := dialProto(t, addr, 2)

	wantSlots := "*[*[:0 :5460 *[$127.0.0.1 :7001 $" + a + " *[]]] *[:5461 :10922 *[$127.0.0.1 :7002 $" + bID + " *[]]]]"
	if got := rc.do("CLUSTER", "SLOTS").String(); got != wantSlots {
		t.Errorf("CLUSTER SLOTS = %s\nwant %s", got, wantSlots)
	}
	node := func(id string, port, offset int) string {
		return "*[*[$id $" + id + " $port :" + itoa(port) + " $ip $127.0.0.1 $endpoint $127.0.0.1 $role $master $replication-offset :" + itoa(offset) + " $health $online]]"
	}
	wantShards := "*[" +
		"*[$slots *[:0 :5460] $nodes " + node(a, 7001, 40) + "] " +
		"*[$slots *[:5461 :10922] $nodes " + node(bID, 7002, 5) + "] " +
		"*[$slots *[] $nodes " + node(c, 7003, 0) + "] " +
		"*[$slots *[] $nodes " + node(d, 7004, 0) + "]]"
	if got := rc.do("CLUSTER", "SHARDS").String(); got != wantShards {
		t.Errorf("CLUSTER SHARDS = %s\nwant %s", got, wantShards)
	}
	wantNodes := a + " 127.0.0.1:7001@17001 myself,master - 0 0 7 connected 0-5460\n" +
		bID + " 127.0.0.1:7002@17002 master - 0 0 7 connected 5461-10922\n" +
		c + " 127.0.0.1:7003@17003 master - 0 0 7 connected\n" +
		d + " 127.0.0.1:7004@17004 master - 0 0 7 connected\n" +
		strings.Repeat("e", 40) + " :0@17005 master,noaddr - 0 0 7 disconnected\n"
	if got := rc.do("CLUSTER", "NODES").text; got != wantNodes {
		t.Errorf("CLUSTER NODES =\n%s\nwant\n%s", got, wantNodes)
	}
	info := infoFields(rc.do("CLUSTER", "INFO").text)
	for k, want := range map[string]string{
		"cluster_state": "fail", "cluster_slots_assigned": "16384", "cluster_slots_ok": "10923",
		"cluster_slots_fail": "5461", "cluster_known_nodes": "5", "cluster_size": "2",
		"cluster_current_epoch": "7", "cluster_my_epoch": "7",
	} {
		if info[k] != want {
			t.Errorf("CLUSTER INFO %s = %q, want %q", k, info[k], want)
		}
	}
	// One slot a single range of: "slot" alone in NODES.
	topo.Ranges = []status.SlotRange{{Start: 0, End: 0, Leader: a}, {Start: 1, End: 16383, Leader: bID}}
	addr, _ = serveBackend(t, newSlotBackend(t, topo))
	rc = dialProto(t, addr, 3)
	if got := rc.do("CLUSTER", "NODES").text; !strings.Contains(got, "myself,master - 0 0 7 connected 0\n") {
		t.Errorf("CLUSTER NODES =\n%s\nwant a's line to end in ' 0'", got)
	}
	if info := infoFields(rc.do("CLUSTER", "INFO").text); info["cluster_state"] != "ok" || info["cluster_size"] != "2" {
		t.Errorf("CLUSTER INFO = %v, want state ok, size 2", info)
	}
}

// TestCommandKeysForClusterClients: cluster clients hash the key COMMAND
// says; RL.CHECK's keys move with COST, so it is movablekeys with an
// incomplete key spec, and COMMAND GETKEYS finds its real keys.
func TestCommandKeysForClusterClients(t *testing.T) {
	addr, _ := startServer(t, Config{})
	rc := dialProto(t, addr, 2)
	for _, c := range []struct{ cmd, want string }{
		{"COMMAND GETKEYS RL.CHECK COST 3 p1 k1 p2 k2", "*[$k1 $k2]"},
		{"COMMAND GETKEYS RL.CHECK p1 k1 p2 k2", "*[$k1 $k2]"},
		{"COMMAND GETKEYS RL.ALLOW k 1 1", "*[$k]"},
		{"COMMAND GETKEYS DEL a b", "*[$a $b]"},
		{"COMMAND GETKEYS RL.CHECK COST 3", "-ERR Invalid arguments specified for command"},
		{"COMMAND GETKEYS PING a b", "-ERR The command has no key arguments"},
	} {
		if got := rc.do(strings.Fields(c.cmd)...).String(); got != c.want {
			t.Errorf("%s = %s, want %s", c.cmd, got, c.want)
		}
	}
	info := rc.do("COMMAND", "INFO", "rl.check", "del", "exists", "rl.allow").String()
	for _, want := range []string{
		"+movablekeys] :2 :-1 :2",
		"*[$flags *[+RW +update +incomplete] $begin_search",
		"*[$flags *[+RM +delete] $begin_search",
		"*[$flags *[+RO +access] $begin_search",
		"*[$flags *[+RW +update] $begin_search",
	} {
		if !strings.Contains(info, want) {
			t.Errorf("COMMAND INFO rl.check del exists rl.allow = %s\nwant it to contain %s", info, want)
		}
	}
}

// TestInfoClusterMoves: INFO's cluster section reports the slot move in
// progress (found by its state, wherever the topology lists it), how many
// finished moves the directory lists, and a rebalance running here; the
// move's own fields are absent while none is in progress.
func TestInfoClusterMoves(t *testing.T) {
	finished := []status.Move{
		{ID: 3, Start: 0, End: 99, Source: 1, Target: 2, State: "released", Keys: 40, Began: 1e9, Ended: 3e9},
		{ID: 4, Start: 100, End: 100, Source: 2, Target: 1, State: "released", Keys: 1, Began: 4e9, Ended: 5e9},
	}
	begun := status.Move{ID: 5, Start: 200, End: 299, Source: 1, Target: 3, State: "begun", Keys: 17, Began: 6e9}
	committed := begun
	committed.State, committed.Keys = "committed", 52
	for _, c := range []struct {
		name        string
		moves       []status.Move
		rebalancing bool
		want        map[string]string
	}{
		{"none", nil, false, map[string]string{
			"cluster_moves_in_progress": "0", "cluster_moves_finished": "0", "cluster_rebalancing": "0"}},
		{"finished only", finished, false, map[string]string{
			"cluster_moves_in_progress": "0", "cluster_moves_finished": "2", "cluster_rebalancing": "0"}},
		{"in progress last", append(slices.Clone(finished), committed), true, map[string]string{
			"cluster_moves_in_progress": "1", "cluster_move_id": "5", "cluster_move_slots": "200-299",
			"cluster_move_from": "1", "cluster_move_to": "3", "cluster_move_state": "committed", "cluster_move_keys": "52",
			"cluster_moves_finished": "2", "cluster_rebalancing": "1"}},
		{"in progress first", append([]status.Move{begun}, finished...), false, map[string]string{
			"cluster_moves_in_progress": "1", "cluster_move_id": "5", "cluster_move_slots": "200-299",
			"cluster_move_from": "1", "cluster_move_to": "3", "cluster_move_state": "begun", "cluster_move_keys": "17",
			"cluster_moves_finished": "2", "cluster_rebalancing": "0"}},
		{"one slot, nothing imported", []status.Move{{ID: 1, Start: 7, End: 7, Source: 2, Target: 1, State: "begun"}}, false, map[string]string{
			"cluster_moves_in_progress": "1", "cluster_move_id": "1", "cluster_move_slots": "7-7",
			"cluster_move_from": "2", "cluster_move_to": "1", "cluster_move_state": "begun", "cluster_move_keys": "0",
			"cluster_moves_finished": "0", "cluster_rebalancing": "0"}},
	} {
		topo := threeNodes()
		topo.Moves, topo.Rebalancing = c.moves, c.rebalancing
		addr, _ := serveBackend(t, newSlotBackend(t, topo))
		rc := dialProto(t, addr, 2)
		text := rc.do("INFO", "cluster").text
		got := map[string]string{}
		for k, v := range infoFields(text) {
			if strings.HasPrefix(k, "cluster_move") || k == "cluster_rebalancing" {
				got[k] = v
			}
		}
		if !maps.Equal(got, c.want) {
			t.Errorf("%s: INFO cluster move fields %v\nwant %v", c.name, got, c.want)
		}
		if !strings.HasPrefix(text, "# Cluster\r\ncluster_enabled:1\r\ncluster_groups:") || !strings.Contains(text, "\r\ncluster_moves_in_progress:") ||
			!strings.HasSuffix(text, "cluster_rebalancing:"+map[bool]string{false: "0", true: "1"}[c.rebalancing]+"\r\n") {
			t.Errorf("%s: INFO cluster = %q, want cluster_enabled, the move fields, cluster_rebalancing last", c.name, text)
		}
	}

	// Without a router there are no move fields.
	addr, _ := startServer(t, Config{})
	if text := dialProto(t, addr, 2).do("INFO", "cluster").text; text != "# Cluster\r\ncluster_enabled:0\r\n" {
		t.Errorf("standalone INFO cluster = %q", text)
	}
}
