// Package cluster replicates the limiter engine with Raft (hashicorp/raft,
// a group of raftlog's shared log for the log and stable store, whose
// fdatasyncs every group of the process shares, file snapshots) so that a
// cluster of three nodes keeps serving when one dies and never forgets a
// decision it acknowledged. A data folder from a version that kept them
// in a per-group raftlog store or raft-boltdb's raft.db is converted on
// the first start (logstore.go).
//
// A Node is the server.Backend in cluster mode. Every batch of requests (a
// connection's pipeline) is encoded once and joins the group commit: one
// goroutine gathers the batches waiting and submits them together, on the
// leader as one log entry stamped with the leader's clock, on a follower as
// one message forwarded to the leader over a persistent, multiplexed
// connection. A caller gets its results only after its entry is committed
// and applied. Reads take the same path, so they are linearizable too.
//
// The FSM decodes each entry and applies it to the engine at the entry's
// time, clamped so it never goes backwards across leader changes; it reads
// no clock. An entry that does not decode panics: a replica that cannot
// follow the log halts rather than diverge.
//
// Errors: ErrNoLeader (CLUSTERDOWN) and ErrNotAppended (TRYAGAIN) guarantee
// the command was not appended and may be retried; ErrUnknownOutcome
// (UNKNOWN) means it may have been applied. See DESIGN.md.
//
// Its parts with one job each are packages of their own: cluster/entry
// is the codec of the log's entries (what the leader writes and every
// replica decodes), cluster/ownership the slot directory and a data
// group's slot-move state (what the meta group and slot moves decide);
// this package proposes, forwards and applies them.
//
// # Usage
//
//	n, err := cluster.Open(cluster.Config{NodeID: "a", RaftAddr: "127.0.0.1:7000", Dir: dir, Peers: peers}, eng)
//	defer n.Close()
//	err = n.Do(ctx, reqs, res) // on any node: appended, committed and applied, or an error above
package cluster
