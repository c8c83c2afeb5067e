//go:build rlserver_ackbeforecommit

package cluster

// ackBeforeCommit plants a bug for the linearizability tests; see plantedAck.
// This build is for tests only: it loses the guarantees of the cluster.
const ackBeforeCommit = true
