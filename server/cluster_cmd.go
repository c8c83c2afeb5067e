package server

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"

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

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func cmdClusterNodes(_ *Server, c *client, cl Cluster, _ [][]byte) outcome {
	st := cl.ClusterStatus()
	var b strings.Builder
	for _, n := range st.Nodes {
		var flags []string
		if n.ID == st.NodeID {
			flags = append(flags, "myself")
		}
		if n.ID == st.LeaderID {
			flags = append(flags, "leader")
		} else {
			flags = append(flags, "follower")
		}
		if !n.Voter {
			flags = append(flags, "nonvoter")
		}
		b.WriteString(n.ID + " " + n.RaftAddr + " " + orDash(n.RESPAddr) + " " + strings.Join(flags, ",") + "\n")
	}
	c.rep.verbatim(b.String())
	return cmdOK
}

func cmdClusterLeader(_ *Server, c *client, cl Cluster, _ [][]byte) outcome {
	st := cl.ClusterStatus()
	l := st.Leader()
	if l == nil {
		c.rep.null()
		return cmdOK
	}
	c.rep.conn.WriteArray(3)
	c.rep.conn.WriteBulkString(l.ID)
	c.rep.conn.WriteBulkString(l.RaftAddr)
	c.rep.conn.WriteBulkString(l.RESPAddr)
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
	var b strings.Builder
	for _, g := range r.Topology().Groups {
		var ranges []string
		for _, sr := range g.Ranges {
			if sr.Start == sr.End {
				ranges = append(ranges, strconv.Itoa(sr.Start))
			} else {
				ranges = append(ranges, strconv.Itoa(sr.Start)+"-"+strconv.Itoa(sr.End))
			}
		}
		fmt.Fprintf(&b, "%d leader=%s role=%s slots=%s keys=%d applied=%d lag=%d\n",
			g.ID, orDash(g.Leader), orDash(g.Role), orDash(strings.Join(ranges, ",")), g.Keys, g.Applied, g.Lag)
	}
	c.rep.verbatim(b.String())
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
	start, err1 := strconv.Atoi(string(args[2]))
	end, err2 := strconv.Atoi(string(args[3]))
	if err1 != nil || err2 != nil || start < 0 || end < start || end >= 16384 {
		c.rep.error("ERR Invalid or out of range slot")
		return cmdOK
	}
	g, err := strconv.ParseUint(string(args[4]), 10, 32)
	if err != nil || g == 0 {
		c.rep.error("ERR invalid group id")
		return cmdOK
	}
	id, err := mv.MoveSlots(context.Background(), start, end, uint32(g))
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
	var b strings.Builder
	for _, m := range r.Topology().Moves {
		took := "-"
		if m.Ended > 0 {
			took = strconv.FormatInt((m.Ended-m.Began)/1e6, 10) + "ms"
		}
		fmt.Fprintf(&b, "%d slots=%d-%d from=%d to=%d state=%s keys=%d took=%s\n", m.ID, m.Start, m.End, m.Source, m.Target, m.State, m.Keys, took)
	}
	c.rep.verbatim(b.String())
	return cmdOK
}

// splitHostPort splits a RESP address for ROLE; an unknown one is ("?", 0).
func splitHostPort(addr string) (string, int64) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "?", 0
	}
	p, _ := strconv.ParseInt(port, 10, 64)
	return host, p
}

// cmdRole answers as Redis does: a leader is a master with its replicas, a
// follower a slave of the leader (state "connected" while a leader is known).
// Offsets are Raft applied indexes.
func cmdRole(s *Server, c *client, _ [][]byte) outcome {
	cl := s.cluster()
	// A sharded node is a master, as every node of CLUSTER NODES is.
	if cl == nil || s.router != nil {
		c.rep.conn.WriteArray(3)
		c.rep.conn.WriteBulkString("master")
		c.rep.conn.WriteInt64(0)
		c.rep.conn.WriteArray(0)
		return cmdOK
	}
	st := cl.ClusterStatus()
	if st.Role == "leader" {
		c.rep.conn.WriteArray(3)
		c.rep.conn.WriteBulkString("master")
		c.rep.conn.WriteInt64(int64(st.AppliedIndex))
		var others []status.Node
		for _, n := range st.Nodes {
			if n.ID != st.NodeID {
				others = append(others, n)
			}
		}
		c.rep.conn.WriteArray(len(others))
		for _, n := range others {
			host, port := splitHostPort(n.RESPAddr)
			c.rep.conn.WriteArray(3)
			c.rep.conn.WriteBulkString(host)
			c.rep.conn.WriteBulkString(strconv.FormatInt(port, 10))
			c.rep.conn.WriteBulkString("0")
		}
		return cmdOK
	}
	host, port, state := "?", int64(0), "connect"
	if l := st.Leader(); l != nil {
		host, port = splitHostPort(l.RESPAddr)
		state = "connected"
	}
	c.rep.conn.WriteArray(5)
	c.rep.conn.WriteBulkString("slave")
	c.rep.conn.WriteBulkString(host)
	c.rep.conn.WriteInt64(port)
	c.rep.conn.WriteBulkString(state)
	c.rep.conn.WriteInt64(int64(st.AppliedIndex))
	return cmdOK
}

// writeReplicationInfo writes INFO's replication section: Redis's role
// fields, then the Raft view.
func (s *Server) writeReplicationInfo(kv func(k string, v any)) {
	cl := s.cluster()
	if cl == nil {
		kv("role", "master")
		kv("connected_slaves", 0)
		return
	}
	st := cl.ClusterStatus()
	l := st.Leader()
	switch {
	case s.router != nil:
		// Sharded: every node is a master of the slots it leads (the
		// raft_* fields below are the meta group's).
		kv("role", "master")
		kv("connected_slaves", 0)
	case st.Role == "leader":
		kv("role", "master")
		kv("connected_slaves", max(len(st.Nodes)-1, 0))
	default:
		kv("role", "slave")
		if l != nil {
			host, port := splitHostPort(l.RESPAddr)
			kv("master_host", host)
			kv("master_port", port)
			kv("master_link_status", "up")
		} else {
			kv("master_link_status", "down")
		}
	}
	kv("raft_node_id", st.NodeID)
	kv("raft_state", st.Role)
	if l != nil {
		kv("raft_leader_id", l.ID)
		kv("raft_leader_addr", l.RaftAddr)
		kv("raft_leader_resp_addr", orDash(l.RESPAddr))
	} else {
		kv("raft_leader_id", "-")
		kv("raft_leader_addr", "-")
		kv("raft_leader_resp_addr", "-")
	}
	kv("raft_term", st.Term)
	kv("raft_commit_index", st.CommitIndex)
	kv("raft_applied_index", st.AppliedIndex)
	kv("raft_last_log_index", st.LastLogIndex)
	kv("raft_last_snapshot_index", st.SnapshotIndex)
	kv("raft_leader_changes", st.LeaderChanges)
	kv("raft_late_forwards", st.LateForwards)
	kv("raft_disk_failed", b01(st.DiskFailed))
	kv("raft_disk_write_errors", st.DiskWriteErrors)
	kv("raft_disk_stalls", st.DiskStalls)
	kv("raft_peers", len(st.Nodes))
	kv("rl_cluster_removed", b01(st.Removed))
	for i, n := range st.Nodes {
		suffrage := "voter"
		if !n.Voter {
			suffrage = "nonvoter"
		}
		kv("peer"+strconv.Itoa(i), "id="+n.ID+",raft_addr="+n.RaftAddr+",resp_addr="+orDash(n.RESPAddr)+",suffrage="+suffrage)
	}
}
