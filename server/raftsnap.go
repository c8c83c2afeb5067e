package server

import (
	"time"

	"github.com/rlserver/rlserver/status"
)

// Raft snapshots in INFO persistence. A cluster node's state lives in
// Raft's snapshots and log rather than in the standalone snapshot file;
// cmd/rlserver sets Config.RaftSnapshots on a node that takes Raft
// snapshots, and INFO persistence adds their rl_raft_* fields.

// RaftSnapshots is what INFO persistence reads from a replicated backend.
type RaftSnapshots interface {
	RaftSnapshotStatus() status.RaftSnapshots
}

// writeRaftSnapshotInfo adds the Raft snapshot fields to INFO persistence
// on a cluster node.
func (s *Server) writeRaftSnapshotInfo(kv func(k string, v any)) {
	rs := s.cfg.RaftSnapshots
	if rs == nil {
		return
	}
	st := rs.RaftSnapshotStatus()
	us := func(d time.Duration) int64 {
		if d < 0 {
			return -1
		}
		return d.Microseconds()
	}
	kv("rl_raft_snapshots_taken", st.Taken)
	kv("rl_raft_snapshots_failed", st.Failures)
	kv("rl_raft_snapshots_restored", st.Restored)
	kv("rl_raft_last_snapshot_time", st.LastSnapshot.Unix())
	kv("rl_raft_last_snapshot_age_sec", int64(time.Since(st.LastSnapshot)/time.Second))
	kv("rl_raft_last_snapshot_duration_us", us(st.LastDuration))
	kv("rl_raft_last_snapshot_bytes", st.LastBytes)
	kv("rl_raft_last_snapshot_index", st.LastIndex)
	kv("rl_raft_last_restore_duration_us", us(st.LastRestoreDuration))
}
