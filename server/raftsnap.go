package server

import "time"

// Raft snapshots in INFO persistence. A cluster node's state lives in
// Raft's snapshots and log rather than in the standalone snapshot file;
// a Backend that takes Raft snapshots implements RaftSnapshots, and INFO
// persistence adds their rl_raft_* fields.

// RaftSnapshots is what INFO persistence reads from a replicated backend.
type RaftSnapshots interface {
	RaftSnapshotStatus() RaftSnapshotStatus
}

// RaftSnapshotStatus describes this node's Raft snapshots since it started.
type RaftSnapshotStatus struct {
	Taken               int64         // snapshots this node wrote
	Failures            int64         // snapshots that failed to capture or write
	Restored            int64         // snapshots restored: at start-up, or sent by the leader
	LastSnapshot        time.Time     // when the last one was written; the start-up time before the first
	LastDuration        time.Duration // capture and write of the last one; -1 before the first
	LastBytes           int64         // its size
	LastIndex           uint64        // the log index it covers (Raft's last snapshot, taken or restored)
	LastRestoreDuration time.Duration // of the last restore; -1 before the first
}

// writeRaftSnapshotInfo adds the Raft snapshot fields to INFO persistence
// on a cluster node.
func (s *Server) writeRaftSnapshotInfo(kv func(k string, v any)) {
	rs, ok := s.backend.(RaftSnapshots)
	if !ok {
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
