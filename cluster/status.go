package cluster

import (
	"context"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/status"
)

// ClusterStatus is this node's view of the cluster (RL.CLUSTER, ROLE, INFO).
func (n *Node) ClusterStatus() status.Cluster {
	st := status.Cluster{
		NodeID:       n.cfg.NodeID,
		Role:         strings.ToLower(n.raft.State().String()),
		Term:         n.raft.CurrentTerm(),
		CommitIndex:  n.raft.CommitIndex(),
		AppliedIndex: n.raft.AppliedIndex(),
		LastLogIndex: n.raft.LastIndex(),

		LeaderChanges: uint64(n.leaderChanges.Load()),
		LateForwards:  uint64(n.lateForwards.Load()),
		Removed:       n.removed.Load(),

		DiskFailed:      n.disk.failed.Load(),
		DiskWriteErrors: uint64(n.disk.writeErrors.Load()),
		DiskStalls:      uint64(n.disk.stalls.Load()),
	}
	ls := n.wal.Stats()
	st.LogWrites, st.LogSyncs = ls.Writes, ls.Syncs
	if st.Removed {
		return st // Raft is shut down: its last leader and configuration are stale
	}
	if v, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.SnapshotIndex = v
	}
	if _, id := n.raft.LeaderWithID(); id != "" {
		st.LeaderID = string(id)
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return st
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, s := range f.Configuration().Servers {
		cn := status.Node{ID: string(s.ID), RaftAddr: string(s.Address), RESPAddr: n.resp[string(s.ID)], Voter: s.Suffrage == raft.Voter}
		if cn.ID == n.cfg.NodeID {
			cn.RESPAddr = n.cfg.RESPAddr
		}
		st.Nodes = append(st.Nodes, cn)
	}
	return st
}

// RaftSnapshotStatus describes this node's Raft snapshots (metrics, INFO
// persistence).
func (n *Node) RaftSnapshotStatus() status.RaftSnapshots {
	st := n.snapStats.status()
	if v, err := strconv.ParseUint(n.raft.Stats()["last_snapshot_index"], 10, 64); err == nil {
		st.LastIndex = v
	}
	return st
}

// ExpiredKeys counts the keys the background sweep has dropped.
func (n *Node) ExpiredKeys() int64 { return n.expired.Load() }

// Digest hashes this replica's state at its last applied entry.
func (n *Node) Digest(ctx context.Context) (uint64, string, error) {
	return n.fsm.Digest(ctx)
}
