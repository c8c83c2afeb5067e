package server

import (
	"context"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/status"
)

// The Redis Cluster protocol's commands: CLUSTER (SLOTS, SHARDS, NODES,
// INFO, MYID, MYSHARDID, KEYSLOT, COUNTKEYSINSLOT, GETKEYSINSLOT, HELP),
// READONLY, READWRITE and ASKING, in Redis 7's reply shapes. They need
// Config.Router; without one every one of them answers as a Redis without
// cluster support. The replies are built from the router's Topology
// (command/cluster.go); routing of keyed commands is in route.go.

// SlotRouter is what the Redis Cluster protocol needs from a backend whose
// keyspace is split into hash slots (cluster mode with --groups): the
// CLUSTER commands, MOVED, CROSSSLOT and CLUSTERDOWN. A server without
// Config.Router answers CLUSTER as a Redis without cluster support.
type SlotRouter interface {
	// Route says how this node handles a keyed command on slot: serve it
	// here through the Backend (this node leads the slot's group, or
	// forwards to its leader), or redirect the client to addr (MOVED),
	// or, with serve false and addr "", answer CLUSTERDOWN: no group owns
	// the slot, or its group has no leader this node knows of.
	Route(slot int) (serve bool, addr string)
	// Topology is the slot map with each range's owner.
	Topology() status.Topology
	// CountKeysInSlot and KeysInSlot answer CLUSTER COUNTKEYSINSLOT and
	// GETKEYSINSLOT from this node's replica of the slot's group.
	CountKeysInSlot(ctx context.Context, slot int) (int, error)
	KeysInSlot(ctx context.Context, slot int, count int) ([]string, error)
}

// Redis's texts for the CLUSTER commands.
const (
	errClusterDisabled = ErrTextNoCluster
	errInvalidSlot     = "ERR Invalid slot"
	errInvalidSlotKeys = "ERR Invalid slot or number of keys"
)

func init() {
	c := container("cluster", "A container for Redis Cluster commands.", "cluster",
		slotSub("slots", 2, []string{"loading", "stale"}, "3.0.0", "Returns the mapping of cluster slots to nodes.", cmdClusterSlots),
		slotSub("shards", 2, []string{"loading", "stale"}, "7.0.0", "Returns the mapping of cluster slots to shards.", cmdClusterShards),
		slotSub("nodes", 2, []string{"loading", "stale"}, "3.0.0", "Returns the cluster configuration for a node.", cmdClusterNodesRedis),
		slotSub("info", 2, []string{"loading", "stale"}, "3.0.0", "Returns information about the state of a node.", cmdClusterInfo),
		slotSub("myid", 2, []string{"loading", "stale"}, "3.0.0", "Returns the ID of a node.", cmdClusterMyID),
		slotSub("myshardid", 2, []string{"loading", "stale"}, "7.2.0", "Returns the shard ID of a node.", cmdClusterMyID),
		slotSub("keyslot", 3, []string{"stale"}, "3.0.0", "Returns the hash slot for a key.", cmdClusterKeySlot),
		slotSub("countkeysinslot", 3, []string{"stale"}, "3.0.0", "Returns the number of keys in a hash slot.", cmdClusterCountKeys),
		slotSub("getkeysinslot", 4, []string{"stale"}, "3.0.0", "Returns the key names in a hash slot.", cmdClusterGetKeys),
	)
	c.since = "3.0.0"
	inner := c.handler
	c.handler = func(s *Server, cl *client, args [][]byte) outcome {
		if equalFold(args[1], "help") {
			cmdClusterHelp(s, cl)
			return cmdOK
		}
		return inner(s, cl, args)
	}
	register(c,
		clusterModeCommand("readonly", []string{"loading", "stale", "fast"}, "Enables read-only queries for a connection to a Redis Cluster replica node."),
		clusterModeCommand("readwrite", []string{"loading", "stale", "fast"}, "Enables read-write queries for a connection to a Redis Cluster replica node."),
		clusterModeCommand("asking", []string{"fast"}, "Signals that a cluster client is following an -ASK redirect."),
	)
}

// slotSub makes a CLUSTER subcommand that answers only with a SlotRouter.
func slotSub(name string, arity int, flags []string, since, summary string, h func(*Server, *client, SlotRouter, [][]byte) outcome) *entry {
	return &entry{name: "cluster|" + name, arity: arity, flags: flags, acl: []string{"@slow"},
		summary: summary, group: "cluster", since: since,
		handler: func(s *Server, c *client, args [][]byte) outcome {
			if s.router == nil {
				c.rep.error(errClusterDisabled)
				return cmdOK
			}
			return h(s, c, s.router, args)
		}}
}

// clusterModeCommand makes READONLY, READWRITE or ASKING: +OK with a
// router (every slot this node routes is served by a leader, so there is
// no replica mode and no ASK state to keep), else Redis's refusal.
func clusterModeCommand(name string, flags []string, summary string) *entry {
	return &entry{name: name, arity: 1, flags: flags, acl: []string{"@fast", "@connection"},
		summary: summary, group: "cluster", since: "3.0.0",
		handler: func(s *Server, c *client, _ [][]byte) outcome {
			if s.router == nil {
				c.rep.error(errClusterDisabled)
				return cmdOK
			}
			c.rep.conn.WriteString("OK")
			return cmdOK
		}}
}

func cmdClusterHelp(s *Server, c *client) {
	if s.router == nil {
		c.rep.error(errClusterDisabled)
		return
	}
	c.rep.conn.WriteArray(len(command.ClusterHelp))
	for _, l := range command.ClusterHelp {
		c.rep.conn.WriteString(l)
	}
}

func cmdClusterSlots(_ *Server, c *client, r SlotRouter, _ [][]byte) outcome {
	w := kv.Writer{RESP3: c.rep.resp3()}
	command.ClusterSlots(&w, r.Topology())
	c.rep.conn.WriteRaw(w.B)
	return cmdOK
}

func cmdClusterShards(_ *Server, c *client, r SlotRouter, _ [][]byte) outcome {
	w := kv.Writer{RESP3: c.rep.resp3()}
	command.ClusterShards(&w, r.Topology())
	c.rep.conn.WriteRaw(w.B)
	return cmdOK
}

func cmdClusterNodesRedis(_ *Server, c *client, r SlotRouter, _ [][]byte) outcome {
	c.rep.verbatim(command.ClusterNodes(r.Topology()))
	return cmdOK
}

func cmdClusterInfo(_ *Server, c *client, r SlotRouter, _ [][]byte) outcome {
	c.rep.verbatim(command.ClusterInfo(r.Topology()))
	return cmdOK
}

// cmdClusterMyID answers MYID and MYSHARDID: every process is its own
// shard (the one it leads), so its shard id is its node id.
func cmdClusterMyID(_ *Server, c *client, r SlotRouter, _ [][]byte) outcome {
	c.rep.conn.WriteBulkString(r.Topology().MyID)
	return cmdOK
}

func cmdClusterKeySlot(_ *Server, c *client, _ SlotRouter, args [][]byte) outcome {
	c.rep.conn.WriteInt(slots.Of(args[2]))
	return cmdOK
}

func cmdClusterCountKeys(_ *Server, c *client, r SlotRouter, args [][]byte) outcome {
	slot, ok := parseInt(args[2])
	switch {
	case !ok:
		c.rep.error(errNotInteger)
		return cmdOK
	case slot < 0 || slot >= slots.Count:
		c.rep.error(errInvalidSlot)
		return cmdOK
	}
	n, err := r.CountKeysInSlot(context.Background(), int(slot))
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteInt(n)
	return cmdOK
}

func cmdClusterGetKeys(_ *Server, c *client, r SlotRouter, args [][]byte) outcome {
	slot, ok1 := parseInt(args[2])
	count, ok2 := parseInt(args[3])
	switch {
	case !ok1 || !ok2:
		c.rep.error(errNotInteger)
		return cmdOK
	case slot < 0 || slot >= slots.Count || count < 0:
		c.rep.error(errInvalidSlotKeys)
		return cmdOK
	}
	// A count beyond any slot's keys is as good as unlimited, and keeps
	// int conversions safe.
	count = min(count, 1<<31-1)
	keys, err := r.KeysInSlot(context.Background(), int(slot), int(count))
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteArray(len(keys))
	for _, k := range keys {
		c.rep.conn.WriteBulkString(k)
	}
	return cmdOK
}
