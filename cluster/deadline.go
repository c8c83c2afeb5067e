package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"
)

// Forward deadlines. A follower answers UNKNOWN when its client's wait
// ends with a batch still out at the leader; without a deadline the bytes
// of that batch could sit in a socket (a cut link, TCP retransmission) and
// be appended seconds later. So a follower sends each batch as msgBatch3:
// its own clock at sending and the time left until the last of the batch's
// callers stops waiting (ttl). The leader refuses the batch, certainly
// without appending it, unless it hands it to Raft before
//
//	min(sent + ttl + forwardClockSkew, received + ttl)
//
// by its own clock: the first term bounds delivery delay (it needs the
// node clocks to agree within forwardClockSkew), the second the wait in the
// leader's own queue whatever the clocks say. The entry is stamped with the
// leader's clock at that moment, so the decision is taken as of a time
// before the deadline. The check is the last step before raft.Apply; from
// there Raft's leader loop appends the entry at once (its apply channel
// holds at most a few batches).
//
// A client that got UNKNOWN through a follower therefore knows the command
// was decided before the UNKNOWN reached it (plus forwardClockSkew and how
// far the leader's clock runs behind the follower's) or never.
const (
	msgBatch3 byte = 10 // body: varint sent (unix ns), uvarint ttl (ns), then a msgBatch2 body; reply: results

	statusLate byte = 6 // msgBatch3 past its deadline: certainly not appended
)

// forwardClockSkew is how far apart node clocks may be before a late batch
// gets through (the leader's clock behind) or a timely one is refused (the
// leader's clock ahead by more than the batch's ttl plus this).
const forwardClockSkew = 500 * time.Millisecond

// maxForwardTTL caps a received ttl, so the deadline arithmetic cannot
// overflow.
const maxForwardTTL = time.Hour

// errLate: a forwarded batch reached raft.Apply after its deadline and was
// refused (not appended). It wraps errNotLeader, so it is retryable.
var errLate = fmt.Errorf("forwarded batch past its deadline: %w", errNotLeader)

// appendBatchDeadline starts a msgBatch3 body.
func appendBatchDeadline(dst []byte, sent time.Time, ttl time.Duration) []byte {
	dst = binary.AppendVarint(dst, sent.UnixNano())
	return binary.AppendUvarint(dst, uint64(ttl))
}

// forwardDeadline is the leader's deadline (by its clock) for a batch sent
// at sentNanos (the follower's clock) with ttl, received at recv.
func forwardDeadline(sentNanos int64, ttl time.Duration, recv time.Time) time.Time {
	ttl = min(max(ttl, 0), maxForwardTTL)
	byClock := time.Unix(0, sentNanos).Add(ttl + forwardClockSkew)
	byQueue := recv.Add(ttl)
	if byClock.Before(byQueue) {
		return byClock
	}
	return byQueue
}

// handleBatch3 serves a msgBatch3 on the leader.
func (n *Node) handleBatch3(ctx context.Context, payload []byte) (byte, []byte) {
	recv := time.Now()
	d := decoder{b: payload}
	sent := d.varint()
	ttl := d.uvarint()
	count := d.uvarint()
	if d.err != nil || ttl > uint64(maxForwardTTL) {
		return statusBadRequest, nil
	}
	// Validate before it can reach the log: an entry that does not decode
	// would halt every replica.
	if _, _, err := decodeRequests2(d.b, count); err != nil {
		return statusBadRequest, nil
	}
	dl := forwardDeadline(sent, time.Duration(ttl), recv)
	if !recv.Before(dl) {
		n.refuseLate(recv.Sub(dl))
		return statusLate, nil
	}
	res, off, err := n.submitBy(ctx, d.b, int(count), true, dl)
	switch {
	case errors.Is(err, errLate):
		return statusLate, nil
	case err != nil:
		return statusOf(err), nil
	}
	return statusOK, appendResults(nil, res[off:off+int(count)])
}

// refuseLate counts and logs a forwarded batch refused for its deadline.
func (n *Node) refuseLate(late time.Duration) {
	n.lateForwards.Add(1)
	n.log.Warn("refused a forwarded batch past its deadline", "late", late)
}

// LateForwards counts the forwarded batches this node refused, as leader,
// because they arrived or waited past their deadline.
func (n *Node) LateForwards() int64 { return n.lateForwards.Load() }

// dropLate fails, with errLate, the forwarded calls (localOnly) whose
// deadline is not after now, and returns the others with their request
// count and size. This node's own clients' calls are kept: a caller whose
// wait ended meanwhile gets the result within its grace or UNKNOWN.
func (n *Node) dropLate(calls []*call, reqs, size int, now time.Time) ([]*call, int, int) {
	kept := calls[:0]
	for _, c := range calls {
		if c.localOnly && !c.deadline.IsZero() && !now.Before(c.deadline) {
			n.refuseLate(now.Sub(c.deadline))
			c.done <- callResult{err: errLate}
			reqs -= c.n
			size -= len(c.chunk)
			continue
		}
		kept = append(kept, c)
	}
	return kept, reqs, size
}

// forwardBatch sends a batch to the leader as msgBatch3 (body[hdr:] is the
// msgBatch2 body) and returns the reply body. A leader of an older build
// answers statusBadRequest to msgBatch3 (not appended); the connection then
// sends msgBatch2, without a deadline, from then on.
func (n *Node) forwardBatch(ctx context.Context, body []byte, hdr int) ([]byte, error) {
	p, err := n.leaderConn()
	if err != nil {
		return nil, err
	}
	return n.callBatch(ctx, p, body, hdr)
}

func (n *Node) callBatch(ctx context.Context, p *peerConn, body []byte, hdr int) ([]byte, error) {
	if !p.noDeadline.Load() {
		r, err := p.call(ctx, msgBatch3, body)
		if err != nil || r.status != statusBadRequest {
			return forwardReply(r, err)
		}
		p.noDeadline.Store(true)
		n.log.Warn("the leader does not take forward deadlines (an older build): forwarding without them", "leader", string(p.addr))
	}
	return forwardReply(p.call(ctx, msgBatch2, body[hdr:]))
}
