package server

import (
	"context"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/status"
)

// Cluster commands: RL.CLUSTER, ROLE and INFO's replication section. They
// reach the cluster through Config.Cluster, which cmd/rlserver sets to a
// replicated backend; without it they answer as Redis does without
// cluster support.

// Cluster is what the cluster commands need from a replicated backend.
type Cluster interface {
	// ClusterStatus is this node's view of the cluster.
	ClusterStatus() status.Cluster
	// Join adds a voting member with its Raft address.
	Join(ctx context.Context, id, raftAddr string) error
	// Remove removes a member.
	Remove(ctx context.Context, id string) error
	// Digest hashes the replicated state at the last applied entry; nodes
	// that applied the same index report the same digest.
	Digest(ctx context.Context) (appliedIndex uint64, digest string, err error)
}

func init() {
	register(
		container("rl.cluster", "A container for Raft cluster commands.", "cluster",
			clusterSub("nodes", 2, "Lists the members: id raft_addr resp_addr flags, one per line.", cmdClusterNodes),
			clusterSub("leader", 2, "Returns the leader's [id, raft_addr, resp_addr], or null while none is known.", cmdClusterLeader),
			dangerous(clusterSub("join", 4, "Adds a voting member: RL.CLUSTER JOIN node-id raft-host:port.", cmdClusterJoin)),
			dangerous(clusterSub("remove", 3, "Removes a member: RL.CLUSTER REMOVE node-id.", cmdClusterRemove)),
			clusterSub("digest", 2, "Returns [applied_index, state_digest] of this replica.", cmdClusterDigest),
			clusterSub("groups", 2, "Lists the Raft groups of a sharded cluster: id leader role slots keys applied lag, one per line.", cmdClusterGroups),
			dangerous(clusterSub("addgroup", 2, "Adds a Raft group with no slots to a sharded cluster; returns its id.", cmdClusterAddGroup)),
			dangerous(clusterSub("move", 5, "Moves slots to a group online: RL.CLUSTER MOVE first-slot last-slot group; returns the move's id.", cmdClusterMove)),
			dangerous(clusterSub("rebalance", 2, "Moves slots, one range at a time, until every group owns as many as the others (within one); runs in the background.", cmdClusterRebalance)),
			clusterSub("moves", 2, "Lists the slot moves: the one in progress and the last finished ones.", cmdClusterMoves),
		),
		&entry{name: "role", arity: 1, flags: []string{"noscript", "loading", "stale", "fast"}, acl: []string{"@admin", "@fast", "@dangerous"},
			summary: "Returns the replication role.", group: "server", since: "2.8.12", handler: cmdRole},
	)
}

// dangerous adds @dangerous to c's ACL categories: membership changes
// can take the cluster down.
func dangerous(c *entry) *entry {
	c.acl = append(c.acl[:len(c.acl):len(c.acl)], "@dangerous")
	return c
}

func clusterSub(name string, arity int, summary string, h func(*Server, *client, Cluster, [][]byte) outcome) *entry {
	return &entry{name: "rl.cluster|" + name, arity: arity, flags: []string{"admin", "stale"}, acl: []string{"@admin", "@slow"},
		summary: summary, group: "cluster", since: "0.4.0",
		handler: func(s *Server, c *client, args [][]byte) outcome {
			cl := s.cluster()
			if cl == nil {
				c.rep.error(ErrTextNoCluster)
				return cmdOK
			}
			return h(s, c, cl, args)
		}}
}

// cluster returns Config.Cluster: the backend's cluster view, or nil when
// standalone.
func (s *Server) cluster() Cluster {
	return s.cfg.Cluster
}

func cmdClusterNodes(_ *Server, c *client, cl Cluster, _ [][]byte) outcome {
	c.rep.verbatim(command.RaftNodes(cl.ClusterStatus()))
	return cmdOK
}

func cmdClusterLeader(_ *Server, c *client, cl Cluster, _ [][]byte) outcome {
	w := kv.Writer{RESP3: c.rep.resp3()}
	command.RaftLeader(&w, cl.ClusterStatus())
	c.rep.conn.WriteRaw(w.B)
	return cmdOK
}

func cmdClusterJoin(_ *Server, c *client, cl Cluster, args [][]byte) outcome {
	if err := cl.Join(context.Background(), string(args[2]), string(args[3])); err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdClusterRemove(_ *Server, c *client, cl Cluster, args [][]byte) outcome {
	if err := cl.Remove(context.Background(), string(args[2])); err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdClusterDigest(_ *Server, c *client, cl Cluster, _ [][]byte) outcome {
	idx, digest, err := cl.Digest(context.Background())
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteArray(2)
	c.rep.conn.WriteInt64(int64(idx))
	c.rep.conn.WriteBulkString(digest)
	return cmdOK
}

// GroupAdder is what RL.CLUSTER ADDGROUP needs from a sharded backend.
type GroupAdder interface {
	AddGroup(ctx context.Context) (uint32, error)
}

// ErrTextNotSharded answers the group commands on a cluster without
// --groups.
const ErrTextNotSharded = "ERR this node is not sharded: start the cluster with --groups to use Raft groups"

func cmdClusterGroups(s *Server, c *client, _ Cluster, _ [][]byte) outcome {
	r := s.router
	if r == nil {
		c.rep.error(ErrTextNotSharded)
		return cmdOK
	}
	c.rep.verbatim(command.Groups(r.Topology()))
	return cmdOK
}

func cmdClusterAddGroup(s *Server, c *client, _ Cluster, _ [][]byte) outcome {
	ga := s.cfg.GroupAdder
	if ga == nil {
		c.rep.error(ErrTextNotSharded)
		return cmdOK
	}
	g, err := ga.AddGroup(context.Background())
	if err != nil && g == 0 {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	if err != nil {
		c.rep.error("ERR " + err.Error())
		return cmdOK
	}
	c.rep.conn.WriteInt64(int64(g))
	return cmdOK
}

// SlotMover is what RL.CLUSTER MOVE and REBALANCE need from a sharded
// backend.
type SlotMover interface {
	MoveSlots(ctx context.Context, start, end int, target uint32) (uint64, error)
	// StartRebalance starts moving slots in the background until the
	// groups are balanced; false when a rebalance already runs here.
	StartRebalance() bool
}

func cmdClusterMove(s *Server, c *client, _ Cluster, args [][]byte) outcome {
	mv := s.cfg.SlotMover
	if mv == nil {
		c.rep.error(ErrTextNotSharded)
		return cmdOK
	}
	start, end, g, text := command.ParseMove(args)
	if text != "" {
		c.rep.error(text)
		return cmdOK
	}
	id, err := mv.MoveSlots(context.Background(), start, end, g)
	if err != nil {
		c.rep.error(engineErrorText(err))
		return cmdOK
	}
	c.rep.conn.WriteInt64(int64(id))
	return cmdOK
}

func cmdClusterRebalance(s *Server, c *client, _ Cluster, _ [][]byte) outcome {
	mv := s.cfg.SlotMover
	if mv == nil {
		c.rep.error(ErrTextNotSharded)
		return cmdOK
	}
	if !mv.StartRebalance() {
		c.rep.error("ERR a rebalance is already running on this node")
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdClusterMoves(s *Server, c *client, _ Cluster, _ [][]byte) outcome {
	r := s.router
	if r == nil {
		c.rep.error(ErrTextNotSharded)
		return cmdOK
	}
	c.rep.verbatim(command.Moves(r.Topology()))
	return cmdOK
}

// cmdRole answers as Redis does (command.Role): alone or sharded, a
// master; in one Raft group, the leader a master, a follower a slave.
func cmdRole(s *Server, c *client, _ [][]byte) outcome {
	w := kv.Writer{RESP3: c.rep.resp3()}
	if cl := s.cluster(); cl == nil || s.router != nil {
		command.Role(&w, nil)
	} else {
		st := cl.ClusterStatus()
		command.Role(&w, &st)
	}
	c.rep.conn.WriteRaw(w.B)
	return cmdOK
}

// writeReplicationInfo writes INFO's replication section
// (command.ReplicationInfo).
func (s *Server) writeReplicationInfo(kv func(k string, v any)) {
	cl := s.cluster()
	if cl == nil {
		command.ReplicationInfo(nil, false, kv)
		return
	}
	st := cl.ClusterStatus()
	command.ReplicationInfo(&st, s.router != nil, kv)
}
