package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/cluster/internal/codec"
)

// Forward deadlines. A follower answers UNKNOWN when its client's wait
// ends with a request still out at the leader; without a deadline the bytes
// of that request could sit in a socket (a cut link, TCP retransmission)
// and be appended seconds later. So every forwarded request that leads to
// a log append carries its follower's clock at sending and the time left
// until its callers stop waiting (ttl): batches as msgBatch, every other
// kind (FLUSHALL, DBSIZE, policy changes, join, remove) wrapped in
// msgDeadline. The leader refuses the request, certainly without
// appending it, unless it hands it to Raft (raft.Apply, or for join and
// remove raft.AddVoter and raft.RemoveServer) before
//
//	min(sent + ttl + forwardClockSkew, received + ttl)
//
// by its own clock: the first term bounds delivery delay (it needs the
// node clocks to agree within forwardClockSkew), the second the wait in the
// leader's own queue whatever the clocks say. An entry is stamped with the
// leader's clock at that moment, so the decision is taken as of a time
// before the deadline. The check is the last step before Raft is called;
// from there Raft's leader loop appends the entry at once (its apply and
// configuration channels hold at most a few requests).
//
// A client that got UNKNOWN through a follower therefore knows the command
// was decided before the UNKNOWN reached it (plus forwardClockSkew and how
// far the leader's clock runs behind the follower's) or never.
//
// msgHello, the only forwarded message that appends nothing, carries no
// deadline.
const (
	msgBatch    byte = 10 // body: varint sent (unix ns), uvarint ttl (ns), then a msgBatchNoDeadline body; reply: results
	msgDeadline byte = 11 // body: varint sent (unix ns), uvarint ttl (ns), byte inner type, inner body; reply: the inner message's

	statusLate byte = 6 // msgBatch or msgDeadline past its deadline: certainly not appended
)

// forwardClockSkew is how far apart node clocks may be before a late batch
// gets through (the leader's clock behind) or a timely one is refused (the
// leader's clock ahead by more than the batch's ttl plus this).
const forwardClockSkew = 500 * time.Millisecond

// maxForwardTTL caps a received ttl, so the deadline arithmetic cannot
// overflow.
const maxForwardTTL = time.Hour

// errLate: a forwarded request reached Raft after its deadline and was
// refused (not appended). It wraps errNotLeader, so it is retryable.
var errLate = fmt.Errorf("forwarded request past its deadline: %w", errNotLeader)

// appendBatchDeadline starts a msgBatch or msgDeadline body.
func appendBatchDeadline(dst []byte, sent time.Time, ttl time.Duration) []byte {
	dst = binary.AppendVarint(dst, sent.UnixNano())
	return binary.AppendUvarint(dst, uint64(ttl))
}

// forwardDeadline is the leader's deadline (by its clock) for a request
// sent at sentNanos (the follower's clock) with ttl, received at recv.
func forwardDeadline(sentNanos int64, ttl time.Duration, recv time.Time) time.Time {
	ttl = min(max(ttl, 0), maxForwardTTL)
	byClock := time.Unix(0, sentNanos).Add(ttl + forwardClockSkew)
	byQueue := recv.Add(ttl)
	if byClock.Before(byQueue) {
		return byClock
	}
	return byQueue
}

// deadlineKey carries, in the context of a forwarded request, the
// leader's deadline for handing it to Raft (a time.Time).
type deadlineKey struct{}

// leaderDeadline is the deadline a forwarded request's context carries
// (zero: none, as for a follower of an older build).
func leaderDeadline(ctx context.Context) time.Time {
	dl, _ := ctx.Value(deadlineKey{}).(time.Time)
	return dl
}

// checkDeadline is the last step before a forwarded request is handed to
// Raft at now: errLate (counted and logged) if ctx's deadline is not after
// now.
func (n *Node) checkDeadline(ctx context.Context, now time.Time) error {
	if dl := leaderDeadline(ctx); !dl.IsZero() && !now.Before(dl) {
		n.refuseLate(now.Sub(dl))
		return errLate
	}
	return nil
}

// handleDeadline serves a msgBatch or msgDeadline on the leader: the
// inner message (typ, payload), sent at sent with ttl, unless it is
// already late; its handler checks the deadline again before Raft.
func (n *Node) handleDeadline(ctx context.Context, payload []byte, inner bool) (byte, []byte) {
	recv := time.Now()
	d := codec.Reader{B: payload}
	sent := d.Varint()
	ttl := d.Uvarint()
	typ := msgBatchNoDeadline
	if inner {
		typ = d.Byte()
	}
	if d.Err != nil || ttl > uint64(maxForwardTTL) {
		return statusBadRequest, nil
	}
	switch typ {
	case msgBatchNoDeadline, msgFlush, msgLen, msgJoin, msgRemove, msgPolicy, msgMeta, msgSlots, msgScan, msgMoveStatus, msgExport:
	default:
		return statusBadRequest, nil
	}
	ctx = context.WithValue(ctx, deadlineKey{}, forwardDeadline(sent, time.Duration(ttl), recv))
	if err := n.checkDeadline(ctx, recv); err != nil {
		return statusLate, nil
	}
	return n.handleForwardMsg(ctx, typ, d.B)
}

// refuseLate counts and logs a forwarded request refused for its deadline.
func (n *Node) refuseLate(late time.Duration) {
	n.lateForwards.Add(1)
	n.log.Warn("refused a forwarded request past its deadline", "late", late)
}

// LateForwards counts the forwarded requests this node refused, as leader,
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

// forwardBatch sends a batch to the leader as msgBatch (body[hdr:] is the
// msgBatchNoDeadline body) and returns the reply body. A leader of an older build
// answers statusBadRequest to msgBatch (not appended); the connection then
// sends msgBatchNoDeadline, without a deadline, from then on.
func (n *Node) forwardBatch(ctx context.Context, body []byte, hdr int) ([]byte, error) {
	p, err := n.leaderConn()
	if err != nil {
		return nil, err
	}
	return n.callBatch(ctx, p, body, hdr)
}

func (n *Node) callBatch(ctx context.Context, p *peerConn, body []byte, hdr int) ([]byte, error) {
	return callBatch(ctx, n.log, p, body, hdr)
}

// callBatch sends a batch as msgBatch (body[hdr:] is the
// msgBatchNoDeadline body) over p and returns the reply body.
func callBatch(ctx context.Context, log *slog.Logger, p *peerConn, body []byte, hdr int) ([]byte, error) {
	return callOrOlder(ctx, log, p, &p.noDeadline, msgBatch, body, msgBatchNoDeadline, body[hdr:])
}

// callDeadline sends a message other than a batch (typ, payload) wrapped
// in msgDeadline, with ctx's deadline as the time its caller stops
// waiting (ttl), and returns the reply body. With no time left it sends
// nothing (errNotLeader). A leader of an older build answers
// statusBadRequest to msgDeadline (not appended); the connection then
// sends the bare message, without a deadline, from then on.
func (n *Node) callDeadline(ctx context.Context, p *peerConn, typ byte, payload []byte) ([]byte, error) {
	return callDeadline(ctx, n.log, p, typ, payload, n.cfg.CommitTimeout)
}

// callDeadline is Node.callDeadline; wait is the ttl when ctx has no
// deadline.
func callDeadline(ctx context.Context, log *slog.Logger, p *peerConn, typ byte, payload []byte, wait time.Duration) ([]byte, error) {
	now := time.Now()
	dl, ok := ctx.Deadline()
	if !ok {
		dl = now.Add(wait)
	}
	if !now.Before(dl) {
		return nil, errNotLeader
	}
	body := appendBatchDeadline(make([]byte, 0, 21+len(payload)), now, dl.Sub(now))
	body = append(body, typ)
	return callOrOlder(ctx, log, p, &p.noEnvelope, msgDeadline, append(body, payload...), typ, payload)
}

// callOrOlder sends typ with body, or, once the peer answered
// statusBadRequest to typ (it does not know it: an older build; nothing
// appended) and so set *older, oldTyp with oldBody.
func callOrOlder(ctx context.Context, log *slog.Logger, p *peerConn, older *atomic.Bool, typ byte, body []byte, oldTyp byte, oldBody []byte) ([]byte, error) {
	if !older.Load() {
		r, err := p.call(ctx, typ, body)
		if err != nil || r.status != statusBadRequest {
			return forwardReply(r, err)
		}
		older.Store(true)
		log.Warn("the leader does not take forward deadlines (an older build): forwarding without them", "leader", string(p.addr), "msg", typ)
	}
	return forwardReply(p.call(ctx, oldTyp, oldBody))
}
