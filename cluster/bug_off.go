//go:build !rlserver_ackbeforecommit

package cluster

// ackBeforeCommit plants a bug for the linearizability tests; see plantedAck.
// Only the rlserver_ackbeforecommit build tag turns it on.
const ackBeforeCommit = false

// plantedAck is never called: the bug exists only in the
// rlserver_ackbeforecommit build (bug_on.go).
func (n *Node) plantedAck([]*call, int) {}
