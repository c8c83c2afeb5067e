// Package status holds the plain values that describe a running rlserver:
// its cluster and members, its Raft snapshots, its standalone snapshots,
// its counters, latency histograms, per-command counters and the keys
// denied most. The packages that know these things (server, cluster,
// cmd/rlserver's snapshots) fill them; the command layer's INFO and ROLE,
// the metrics and the status page read them. It imports nothing of
// rlserver's, so every side can depend on it without depending on the
// others.
package status

import "time"

// Cluster is one node's view of its Raft cluster.
type Cluster struct {
	NodeID        string
	Role          string // "leader", "follower", "candidate" or "shutdown"
	LeaderID      string // "" while no leader is known
	Term          uint64
	CommitIndex   uint64
	AppliedIndex  uint64 // Raft's applied index
	LastLogIndex  uint64
	SnapshotIndex uint64
	Nodes         []Node // the configuration, in its order
	LeaderChanges uint64 // leaders observed since start (elections, hand-offs, losses)
	Removed       bool   // this node was removed from the configuration and refuses commands
	// LateForwards counts the forwarded requests this node refused, as
	// leader, because they reached it after their deadline.
	LateForwards uint64

	DiskFailed      bool   // a Raft log write failed and no disk probe has succeeded since (cluster/disk.go)
	DiskWriteErrors uint64 // failed Raft log and stable store writes since start
	DiskStalls      uint64 // Raft log and stable store writes seen in progress past the stall timeout

	// The process's Raft log, shared by every group it hosts: writes to
	// its files and their fdatasyncs since start.
	LogWrites uint64
	LogSyncs  uint64
}

// Node is one member of the configuration.
type Node struct {
	ID       string
	RaftAddr string
	RESPAddr string // "" when this node has not learned it
	Voter    bool
	PlacedNode
}

// Leader returns the leader's entry in Nodes, or nil while no leader is
// known or the leader is not in the configuration.
func (c *Cluster) Leader() *Node {
	if c.LeaderID == "" {
		return nil
	}
	for i := range c.Nodes {
		if c.Nodes[i].ID == c.LeaderID {
			return &c.Nodes[i]
		}
	}
	return nil
}

// RaftSnapshots describes a cluster node's Raft snapshots since it
// started.
type RaftSnapshots struct {
	Taken               int64         // snapshots this node wrote
	Failures            int64         // snapshots that failed to capture or write
	Restored            int64         // snapshots restored: at start-up, or sent by the leader
	LastSnapshot        time.Time     // when the last one was written; the start-up time before the first
	LastDuration        time.Duration // capture and write of the last one; -1 before the first
	LastBytes           int64         // its size
	LastIndex           uint64        // the log index it covers (Raft's last snapshot, taken or restored)
	LastRestoreDuration time.Duration // of the last restore; -1 before the first
}

// Persistence describes a standalone server's snapshot file and saves
// (INFO persistence, the snapshot metrics).
type Persistence struct {
	File           string        // the snapshot file's path
	Interval       time.Duration // between periodic saves; 0: off
	Changes        uint64        // writes since the last successful save started
	InProgress     bool          // a background save (BGSAVE or periodic) is running
	BgStarted      time.Time     // when it started
	LastSave       time.Time     // last successful save (start-up time before the first)
	LastOK         bool          // the last save of any kind succeeded
	LastBgDuration time.Duration // of the last background save; -1 before the first
	LastDuration   time.Duration // of the last successful save
	LastBytes      int64         // its file size
	LastKeys       int           // its records
	Saves          int64         // successful saves since start
	Failures       int64         // failed saves since start
	LoadedKeys     int           // records loaded at start-up
}

// Counters are the server's counters since start, read one after the
// other (not one atomic snapshot). They only grow: CONFIG RESETSTAT
// changes what INFO shows, not these.
type Counters struct {
	ConnectionsReceived int64 // client connections accepted
	RejectedConnections int64 // refused: maxclients, protected mode
	CommandsProcessed   int64
	ErrorReplies        int64
	Allowed             int64 // limiter decisions that allowed
	Denied              int64 // limiter decisions that denied
	AuthFailures        int64 // failed AUTH and HELLO ... AUTH
	ExpiredKeys         int64 // keys the background sweep dropped

	// Cluster mode with --groups: keyed commands refused by slot routing
	// since start.
	ClusterMoved     int64 // -MOVED
	ClusterCrossSlot int64 // -CROSSSLOT
	ClusterDown      int64 // -CLUSTERDOWN Hash slot not served
}
