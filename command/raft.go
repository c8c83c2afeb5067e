package command

import (
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/status"
)

// The replies of the Raft cluster's commands (RL.CLUSTER NODES, LEADER,
// GROUPS, MOVES, MOVE's arguments), ROLE and INFO's replication section,
// from the backend's status values.

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// RaftNodes is RL.CLUSTER NODES's text: id raft_addr resp_addr flags,
// one member per line; in a cluster with a replication factor each line
// ends with " replicas=N leads=M" (groups the node holds a replica of,
// and leads), and the flags include dead and draining when they apply.
func RaftNodes(st status.Cluster) string {
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
		if n.Dead {
			flags = append(flags, "dead")
		}
		if n.Draining {
			flags = append(flags, "draining")
		}
		b.WriteString(n.ID + " " + n.RaftAddr + " " + orDash(n.RESPAddr) + " " + strings.Join(flags, ","))
		if n.Placed {
			b.WriteString(" replicas=" + strconv.Itoa(n.Replicas) + " leads=" + strconv.Itoa(n.Leads))
		}
		b.WriteString("\n")
	}
	return b.String()
}

// RaftLeader writes RL.CLUSTER LEADER's reply: the leader's [id,
// raft_addr, resp_addr], or null while none is known.
func RaftLeader(w *kv.Writer, st status.Cluster) {
	l := st.Leader()
	if l == nil {
		w.Nil()
		return
	}
	w.Array(3)
	w.BulkString(l.ID)
	w.BulkString(l.RaftAddr)
	w.BulkString(l.RESPAddr)
}

// Groups is RL.CLUSTER GROUPS's text: one Raft group per line.
func Groups(t status.Topology) string {
	var b strings.Builder
	for _, g := range t.Groups {
		var ranges []string
		for _, sr := range g.Ranges {
			if sr.Start == sr.End {
				ranges = append(ranges, strconv.Itoa(sr.Start))
			} else {
				ranges = append(ranges, strconv.Itoa(sr.Start)+"-"+strconv.Itoa(sr.End))
			}
		}
		fmt.Fprintf(&b, "%d leader=%s role=%s slots=%s keys=%d applied=%d lag=%d",
			g.ID, orDash(g.Leader), orDash(g.Role), orDash(strings.Join(ranges, ",")), g.Keys, g.Applied, g.Lag)
		if len(g.Replicas) > 0 {
			// A placed cluster (--replicas): where the group's voters are.
			fmt.Fprintf(&b, " replicas=%s learner=%s", strings.Join(g.Replicas, ","), orDash(g.Learner))
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// Moves is RL.CLUSTER MOVES's text: the move in progress and the last
// finished ones, one per line.
func Moves(t status.Topology) string {
	var b strings.Builder
	for _, m := range t.Moves {
		took := "-"
		if m.Ended > 0 {
			took = strconv.FormatInt((m.Ended-m.Began)/1e6, 10) + "ms"
		}
		fmt.Fprintf(&b, "%d slots=%d-%d from=%d to=%d state=%s keys=%d took=%s\n", m.ID, m.Start, m.End, m.Source, m.Target, m.State, m.Keys, took)
	}
	return b.String()
}

// ParseMove parses RL.CLUSTER MOVE first-slot last-slot group, or
// returns the error text.
func ParseMove(args [][]byte) (start, end int, group uint32, errText string) {
	start, err1 := strconv.Atoi(string(args[2]))
	end, err2 := strconv.Atoi(string(args[3]))
	if err1 != nil || err2 != nil || start < 0 || end < start || end >= 16384 {
		return 0, 0, 0, "ERR Invalid or out of range slot"
	}
	g, err := strconv.ParseUint(string(args[4]), 10, 32)
	if err != nil || g == 0 {
		return 0, 0, 0, "ERR invalid group id"
	}
	return start, end, uint32(g), ""
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

// Role writes ROLE's reply as Redis does: st nil (alone, or sharded, where
// every node is a master as in CLUSTER NODES) a master without replicas;
// a leader a master with its replicas, a follower a slave of the leader
// (state "connected" while a leader is known). Offsets are Raft applied
// indexes.
func Role(w *kv.Writer, st *status.Cluster) {
	if st == nil {
		w.Array(3)
		w.BulkString("master")
		w.Int(0)
		w.Array(0)
		return
	}
	if st.Role == "leader" {
		w.Array(3)
		w.BulkString("master")
		w.Int(int64(st.AppliedIndex))
		var others []status.Node
		for _, n := range st.Nodes {
			if n.ID != st.NodeID {
				others = append(others, n)
			}
		}
		w.Array(len(others))
		for _, n := range others {
			host, port := splitHostPort(n.RESPAddr)
			w.Array(3)
			w.BulkString(host)
			w.BulkString(strconv.FormatInt(port, 10))
			w.BulkString("0")
		}
		return
	}
	host, port, state := "?", int64(0), "connect"
	if l := st.Leader(); l != nil {
		host, port = splitHostPort(l.RESPAddr)
		state = "connected"
	}
	w.Array(5)
	w.BulkString("slave")
	w.BulkString(host)
	w.Int(port)
	w.BulkString(state)
	w.Int(int64(st.AppliedIndex))
}

func b01(b bool) int {
	if b {
		return 1
	}
	return 0
}

// ReplicationInfo writes INFO's replication section through kv: Redis's
// role fields, then the Raft view. st is nil on a server alone; sharded,
// every node is a master of the slots it leads (the raft_* fields are
// the meta group's).
func ReplicationInfo(st *status.Cluster, sharded bool, kv func(k string, v any)) {
	if st == nil {
		kv("role", "master")
		kv("connected_slaves", 0)
		return
	}
	l := st.Leader()
	switch {
	case sharded:
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
	kv("raft_log_writes", st.LogWrites)
	kv("raft_log_fsyncs", st.LogSyncs)
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
