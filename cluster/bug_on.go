//go:build rlserver_ackbeforecommit

package cluster

import (
	"time"

	"github.com/rlserver/rlserver/cluster/entry"
)

// ackBeforeCommit plants a bug for the linearizability tests; see plantedAck.
// This build is for tests only: it loses the guarantees of the cluster.
const ackBeforeCommit = true

// plantedAck is the bug the rlserver_ackbeforecommit build tag plants, to
// show that the linearizability tests catch it: a follower decides the batch
// on its own engine and answers without replicating it.
func (n *Node) plantedAck(calls []*call, reqs int) {
	defer func() { <-n.sem }()
	var e entry.Decoded
	for _, c := range calls {
		r, names, err := entry.DecodeRequests(c.chunk, uint64(c.n), nil)
		if err != nil {
			fail(calls, ErrUnknownOutcome)
			return
		}
		if names != nil && e.Names == nil {
			e.Names = make([][]byte, len(e.Reqs), reqs)
		}
		if e.Names != nil {
			if names == nil {
				names = make([][]byte, len(r))
			}
			e.Names = append(e.Names, names...)
		}
		e.Reqs = append(e.Reqs, r...)
	}
	res, err := n.fsm.applyBatch(time.Now().UnixNano(), &e)
	if err != nil {
		fail(calls, ErrUnknownOutcome)
		return
	}
	deliver(calls, res)
}
