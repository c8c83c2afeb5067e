//go:build rlserver_ackbeforecommit

package cluster

import "time"

// ackBeforeCommit plants a bug for the linearizability tests; see plantedAck.
// This build is for tests only: it loses the guarantees of the cluster.
const ackBeforeCommit = true

// plantedAck is the bug the rlserver_ackbeforecommit build tag plants, to
// show that the linearizability tests catch it: a follower decides the batch
// on its own engine and answers without replicating it.
func (n *Node) plantedAck(calls []*call, reqs int) {
	defer func() { <-n.sem }()
	var e entry
	for _, c := range calls {
		r, names, err := decodeRequests2(c.chunk, uint64(c.n))
		if err != nil {
			fail(calls, ErrUnknownOutcome)
			return
		}
		if names != nil && e.names == nil {
			e.names = make([][]byte, len(e.reqs), reqs)
		}
		if e.names != nil {
			if names == nil {
				names = make([][]byte, len(r))
			}
			e.names = append(e.names, names...)
		}
		e.reqs = append(e.reqs, r...)
	}
	res, err := n.fsm.applyBatch2(time.Now().UnixNano(), &e)
	if err != nil {
		fail(calls, ErrUnknownOutcome)
		return
	}
	deliver(calls, res)
}
