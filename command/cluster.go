package command

import (
	"context"
	"net"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/status"
)

// The Redis Cluster protocol's replies (CLUSTER SLOTS, SHARDS, NODES,
// INFO, HELP) from the backend's topology; the edge asks the backend for
// it and writes what these return.

// clusterView is a Topology arranged for the CLUSTER replies: its nodes
// with their addresses split, and the runs of slots each one leads.
//
// A slot is served when its range has a leader that is a known node with
// a client address: only those appear in SLOTS, SHARDS and NODES and
// count as ok in INFO, since a client can reach no other.
type clusterView struct {
	t        status.Topology
	nodes    []*viewNode // the nodes with a client address, in Topology order
	noAddr   []*viewNode // the nodes without one yet
	runs     []slotRun   // served slots, in slot order, adjacent ranges of one leader merged
	assigned int         // slots in some range
	served   int         // slots in runs
}

type viewNode struct {
	status.TopologyNode
	host    string
	port    int
	cport   int       // the port of RaftAddr (the cluster bus of Redis's NODES)
	runs    []slotRun // the slots it leads
	applied uint64    // sum of this replica's applied index of the groups it leads
}

type slotRun struct {
	start, end int
	node       *viewNode
}

func newClusterView(t status.Topology) *clusterView {
	v := &clusterView{t: t}
	byID := make(map[string]*viewNode, len(t.Nodes))
	byName := make(map[string]*viewNode, len(t.Nodes))
	for _, tn := range t.Nodes {
		n := &viewNode{TopologyNode: tn}
		_, n.cport = splitPort(tn.RaftAddr)
		n.host, n.port = splitPort(tn.Addr)
		if tn.Addr == "" {
			v.noAddr = append(v.noAddr, n)
		} else {
			v.nodes = append(v.nodes, n)
		}
		byID[tn.ID] = n
		byName[tn.Name] = n
	}
	for _, r := range t.Ranges {
		v.assigned += r.End - r.Start + 1
		n := byID[r.Leader]
		if r.Leader == "" || n == nil || n.Addr == "" {
			continue
		}
		v.served += r.End - r.Start + 1
		if k := len(v.runs) - 1; k >= 0 && v.runs[k].node == n && v.runs[k].end+1 == r.Start {
			v.runs[k].end = r.End
		} else {
			v.runs = append(v.runs, slotRun{start: r.Start, end: r.End, node: n})
		}
	}
	for _, run := range v.runs {
		run.node.runs = append(run.node.runs, run)
	}
	for _, g := range t.Groups {
		if n := byName[g.Leader]; n != nil {
			n.applied += g.Applied
		}
	}
	return v
}

// splitPort splits host:port; a missing or malformed address is ("", 0).
func splitPort(addr string) (string, int) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0
	}
	p, _ := strconv.Atoi(port)
	return host, p
}

// nodesText is CLUSTER NODES: one line per node, Redis's layout
//
//	<id> <ip:port@cport> <flags> <master> <ping-sent> <pong-recv> <config-epoch> <link-state> <slot> ...
//
// Every node is a master (followers are not advertised as replicas), with
// the runs it leads ("start-end", or "slot" alone); a node that leads no
// group has none. A node whose client address is not known yet is
// ":0@cport" with the noaddr flag, as Redis shows one, and disconnected.
// Every node's config epoch is the slot directory's.
func (v *clusterView) nodesText() string {
	var b strings.Builder
	epoch := strconv.FormatUint(v.t.Epoch, 10)
	line := func(n *viewNode, hostPort, flags, link string) {
		b.WriteString(n.ID + " " + hostPort + "@" + strconv.Itoa(n.cport) + " ")
		if n.Myself {
			b.WriteString("myself,")
		}
		b.WriteString(flags + " - 0 0 " + epoch + " " + link)
		for _, run := range n.runs {
			b.WriteString(" " + strconv.Itoa(run.start))
			if run.end != run.start {
				b.WriteString("-" + strconv.Itoa(run.end))
			}
		}
		b.WriteString("\n")
	}
	for _, n := range v.nodes {
		line(n, n.host+":"+strconv.Itoa(n.port), "master", "connected")
	}
	for _, n := range v.noAddr {
		line(n, ":0", "master,noaddr", "disconnected")
	}
	return b.String()
}

// infoText is CLUSTER INFO with Redis's fields: the state is ok only when
// every slot is assigned and served; slots assigned but not served count
// as failed (pfail, a suspicion Redis's gossip keeps, does not exist
// here); the size is the number of nodes leading at least one slot; both
// epochs are the slot directory's. rlserver has no gossip bus, so its
// message counters are 0.
func (v *clusterView) infoText() string {
	state := "fail"
	if v.assigned == slots.Count && v.served == slots.Count {
		state = "ok"
	}
	size := 0
	for _, n := range v.nodes {
		if len(n.runs) > 0 {
			size++
		}
	}
	var b strings.Builder
	kv := func(k string, val any) {
		b.WriteString(k + ":")
		switch x := val.(type) {
		case string:
			b.WriteString(x)
		case int:
			b.WriteString(strconv.Itoa(x))
		case uint64:
			b.WriteString(strconv.FormatUint(x, 10))
		}
		b.WriteString("\r\n")
	}
	kv("cluster_state", state)
	kv("cluster_slots_assigned", v.assigned)
	kv("cluster_slots_ok", v.served)
	kv("cluster_slots_pfail", 0)
	kv("cluster_slots_fail", v.assigned-v.served)
	kv("cluster_known_nodes", len(v.t.Nodes))
	kv("cluster_size", size)
	kv("cluster_current_epoch", v.t.Epoch)
	kv("cluster_my_epoch", v.t.Epoch)
	kv("cluster_stats_messages_sent", 0)
	kv("cluster_stats_messages_received", 0)
	kv("total_cluster_links_buffer_limit_exceeded", 0)
	return b.String()
}

// ClusterHelp is CLUSTER HELP's text: Redis's lines for the subcommands
// rlserver has.
var ClusterHelp = []string{
	"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
	"COUNTKEYSINSLOT <slot>",
	"    Return the number of keys in <slot>.",
	"GETKEYSINSLOT <slot> <count>",
	"    Return key names stored by current node in a slot.",
	"INFO",
	"    Return information about the cluster.",
	"KEYSLOT <key>",
	"    Return the hash slot for <key>.",
	"MYID",
	"    Return the node id.",
	"MYSHARDID",
	"    Return the node's shard id.",
	"NODES",
	"    Return cluster configuration seen by node. Output format:",
	"    <id> <ip:port> <flags> <master> <pings> <pongs> <epoch> <link> <slot> ...",
	"SLOTS",
	"    Return information about slots range mappings. Each range is made of:",
	"    start, end, master and replicas IP addresses, ports and ids",
	"SHARDS",
	"    Return information about slot range mappings and the nodes associated with them.",
	"HELP",
	"    Prints this help.",
}

// ClusterSlots writes CLUSTER SLOTS: one entry per run of slots whose
// leader is known, [start, end, [host, port, id, {}]], the leader only
// (followers are not advertised as replicas). The fourth element of the node is Redis 7's
// map of extra networking metadata, empty.
func ClusterSlots(w *kv.Writer, t status.Topology) {
	v := newClusterView(t)
	w.Array(len(v.runs))
	for _, run := range v.runs {
		w.Array(3)
		w.Int(int64(run.start))
		w.Int(int64(run.end))
		w.Array(4)
		w.BulkString(run.node.host)
		w.Int(int64(run.node.port))
		w.BulkString(run.node.ID)
		w.Map(0)
	}
}

// ClusterShards writes CLUSTER SHARDS: one shard per node with an
// address, as Redis lists every master: its slots as a flat list of start, end pairs (empty for a
// node that leads no group) and its one node, the leader. Groups led by
// one process are one shard, because clients (rueidis) key shards by the
// master's address.
func ClusterShards(w *kv.Writer, t status.Topology) {
	v := newClusterView(t)
	w.Array(len(v.nodes))
	for _, n := range v.nodes {
		w.Map(2)
		w.BulkString("slots")
		w.Array(2 * len(n.runs))
		for _, run := range n.runs {
			w.Int(int64(run.start))
			w.Int(int64(run.end))
		}
		w.BulkString("nodes")
		w.Array(1)
		w.Map(7)
		w.BulkString("id")
		w.BulkString(n.ID)
		w.BulkString("port")
		w.Int(int64(n.port))
		w.BulkString("ip")
		w.BulkString(n.host)
		w.BulkString("endpoint")
		w.BulkString(n.host)
		w.BulkString("role")
		w.BulkString("master")
		w.BulkString("replication-offset")
		w.Int(int64(n.applied))
		w.BulkString("health")
		w.BulkString("online")
	}
}

// ClusterNodes is CLUSTER NODES's text (nodesText).
func ClusterNodes(t status.Topology) string { return newClusterView(t).nodesText() }

// ClusterInfo is CLUSTER INFO's text (infoText).
func ClusterInfo(t status.Topology) string { return newClusterView(t).infoText() }

// CLUSTER, READONLY, READWRITE and ASKING, in Redis 7's reply shapes. They
// need Env.Slots; without it every one of them answers as a Redis without
// cluster support. Routing keyed commands by slot is the edge's.
func init() {
	c := container("cluster", "A container for Redis Cluster commands.", "cluster",
		slotSub("slots", 2, []string{"loading", "stale"}, "3.0.0", "Returns the mapping of cluster slots to nodes.",
			func(x *Call, s Slots, _ [][]byte) { ClusterSlots(&x.W, s.Topology()) }),
		slotSub("shards", 2, []string{"loading", "stale"}, "7.0.0", "Returns the mapping of cluster slots to shards.",
			func(x *Call, s Slots, _ [][]byte) { ClusterShards(&x.W, s.Topology()) }),
		slotSub("nodes", 2, []string{"loading", "stale"}, "3.0.0", "Returns the cluster configuration for a node.",
			func(x *Call, s Slots, _ [][]byte) { verbatim(&x.W, ClusterNodes(s.Topology())) }),
		slotSub("info", 2, []string{"loading", "stale"}, "3.0.0", "Returns information about the state of a node.",
			func(x *Call, s Slots, _ [][]byte) { verbatim(&x.W, ClusterInfo(s.Topology())) }),
		slotSub("myid", 2, []string{"loading", "stale"}, "3.0.0", "Returns the ID of a node.", clusterMyID),
		slotSub("myshardid", 2, []string{"loading", "stale"}, "7.2.0", "Returns the shard ID of a node.", clusterMyID),
		slotSub("keyslot", 3, []string{"stale"}, "3.0.0", "Returns the hash slot for a key.",
			func(x *Call, _ Slots, args [][]byte) { x.W.Int(int64(slots.Of(args[2]))) }),
		slotSub("countkeysinslot", 3, []string{"stale"}, "3.0.0", "Returns the number of keys in a hash slot.", clusterCountKeys),
		slotSub("getkeysinslot", 4, []string{"stale"}, "3.0.0", "Returns the key names in a hash slot.", clusterGetKeys),
	)
	c.Since = "3.0.0"
	c.Run = func(x *Call, _ [][]byte) { // HELP: Redis's own lines
		if x.Env.Slots == nil {
			x.fail(ErrTextNoCluster)
			return
		}
		x.W.Array(len(ClusterHelp))
		for _, l := range ClusterHelp {
			x.W.Status(l)
		}
	}
	register(c,
		clusterMode("readonly", []string{"loading", "stale", "fast"}, "Enables read-only queries for a connection to a Redis Cluster replica node."),
		clusterMode("readwrite", []string{"loading", "stale", "fast"}, "Enables read-write queries for a connection to a Redis Cluster replica node."),
		clusterMode("asking", []string{"fast"}, "Signals that a cluster client is following an -ASK redirect."),
	)
}

// slotSub makes a CLUSTER subcommand that answers only with Env.Slots.
func slotSub(name string, arity int, flags []string, since, summary string, run func(*Call, Slots, [][]byte)) *Cmd {
	return &Cmd{Name: "cluster|" + name, Arity: arity, Flags: flags, ACL: []string{"@slow"},
		Summary: summary, Group: "cluster", Since: since,
		Run: func(x *Call, args [][]byte) {
			if x.Env.Slots == nil {
				x.fail(ErrTextNoCluster)
				return
			}
			run(x, x.Env.Slots, args)
		}}
}

// clusterMode makes READONLY, READWRITE or ASKING: +OK with slots (every
// slot this node routes is served by a leader, so there is no replica
// mode and no ASK state to keep), else Redis's refusal.
func clusterMode(name string, flags []string, summary string) *Cmd {
	return &Cmd{Name: name, Arity: 1, Flags: flags, ACL: []string{"@fast", "@connection"},
		Summary: summary, Group: "cluster", Since: "3.0.0",
		Run: func(x *Call, _ [][]byte) {
			if x.Env.Slots == nil {
				x.fail(ErrTextNoCluster)
				return
			}
			x.W.OK()
		}}
}

// clusterMyID answers MYID and MYSHARDID: every process is its own shard
// (the one it leads), so its shard id is its node id.
func clusterMyID(x *Call, s Slots, _ [][]byte) { x.W.BulkString(s.Topology().MyID) }

func clusterCountKeys(x *Call, s Slots, args [][]byte) {
	slot, ok := ParseInt(args[2])
	switch {
	case !ok:
		x.fail(ErrNotInteger)
		return
	case slot < 0 || slot >= slots.Count:
		x.fail(errInvalidSlot)
		return
	}
	n, err := s.CountKeysInSlot(context.Background(), int(slot))
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Int(int64(n))
}

func clusterGetKeys(x *Call, s Slots, args [][]byte) {
	slot, ok1 := ParseInt(args[2])
	count, ok2 := ParseInt(args[3])
	switch {
	case !ok1 || !ok2:
		x.fail(ErrNotInteger)
		return
	case slot < 0 || slot >= slots.Count || count < 0:
		x.fail(errInvalidSlotKeys)
		return
	}
	// A count beyond any slot's keys is as good as unlimited, and keeps
	// int conversions safe.
	count = min(count, 1<<31-1)
	keys, err := s.KeysInSlot(context.Background(), int(slot), int(count))
	if err != nil {
		x.fail(Text(err))
		return
	}
	x.W.Array(len(keys))
	for _, k := range keys {
		x.W.BulkString(k)
	}
}
