//go:build !rlserver_ackbeforecommit

package cluster

// ackBeforeCommit plants a bug for the linearizability tests; see plantedAck.
// Only the rlserver_ackbeforecommit build tag turns it on.
const ackBeforeCommit = false
