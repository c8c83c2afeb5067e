package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Forwarding: a follower sends the batches its clients give it to the leader
// over one persistent connection, multiplexed by request id, and relays the
// results. The leader puts forwarded batches into its own group commit.
//
// Frame: uint32 big-endian length of the rest, byte type, uint64 id, payload.
// Requests and replies share the connection; replies carry the request's id
// and may come in any order. A reply payload is a status byte and a body.
//
// Message types are append-only.
const (
	msgHello byte = 1 // body: node id, RESP address; reply: the same of the server, then known peers
	// msgBatchV1, from followers of older builds: body: uvarint count,
	// requests in the first encoding (entry.DecodeV1Requests); reply:
	// results. The leader re-encodes it; nothing sends it any more.
	msgBatchV1 byte = 2
	msgFlush   byte = 3 // body: empty; reply: empty
	msgLen     byte = 4 // body: empty; reply: uvarint n
	msgJoin    byte = 5 // body: node id, raft address[, joinNonvoter]; reply: empty
	msgRemove  byte = 6 // body: node id; reply: empty
	msgReply   byte = 7 // payload: status, body
	// msgBatchNoDeadline: body: uvarint count, requests
	// (entry.AppendRequests); reply: results (results.go). A batch
	// without a deadline: sent to leaders that do not know msgBatch
	// (deadline.go), and the inner message of msgBatch.
	msgBatchNoDeadline byte = 8
	// msgPolicy: body: a policy entry without its time
	// (entry.AppendPolicy); reply: a policyResult code (policy.go).
	msgPolicy byte = 9
	// msgBatch (10) and msgDeadline (11): a batch, and any other message
	// that appends, with its deadline (deadline.go).
	// msgRemoved, from the leader to a node it removed: body: the node's
	// id; reply: empty (removed.go).
	msgRemoved byte = 12
	// msgMeta: body: a directory op (ownership.InitOp, ...); reply: a
	// state op's (stateop.go).
	msgMeta byte = 13
	// msgSlots: body: a move step (ownership.ImportStep, ...); reply: a
	// state op's (stateop.go).
	msgSlots byte = 14
	// msgScan: body: uvarint cursor, uvarint count; reply: uvarint next
	// cursor, then per key a byte kind and the key (codec bytes). Served
	// by the group's leader from its replica (a follower answers
	// statusNotLeader), as SCAN through a node that holds no replica.
	msgScan byte = 15
	// msgMoveStatus: body: uvarint move id; reply: byte 1 and the move's
	// progress on the leader's replica (moveStatusBody), or byte 0 when
	// it has none. Served by the group's leader.
	msgMoveStatus byte = 16
	// msgExport: body: uvarint move id, uvarint start, uvarint end,
	// string after, uvarint byte budget; reply: varint export clock, byte
	// more, uvarint count, records (codec.AppendRecord) in key order.
	// Served by the source's leader once it has applied the move's freeze
	// (statusNotLeader before: the caller tries again).
	msgExport byte = 17
)

// maxScanCount bounds the keys one msgScan asks for.
const maxScanCount = 1 << 16

// Reply statuses. Append-only.
const (
	statusOK         byte = 0
	statusNotLeader  byte = 1 // certainly not appended: retry through the leader
	statusUnknown    byte = 2 // appended or maybe appended, outcome unknown
	statusMembership byte = 3 // membership change failed
	statusNoNode     byte = 4 // remove: no such node
	statusBadRequest byte = 5 // the message did not decode (not appended)
	// statusLate: deadline.go.
)

func appendFrame(dst []byte, typ byte, id uint64, payload []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(1+8+len(payload)))
	dst = append(dst, typ)
	dst = binary.BigEndian.AppendUint64(dst, id)
	return append(dst, payload...)
}

// reply is a decoded reply frame.
type reply struct {
	status byte
	body   []byte
}

// errConnLost: the connection died with the request sent (outcome unknown).
var errConnLost = errors.New("connection to leader lost")

// peerConn is the client side of a forward connection to one peer.
type peerConn struct {
	addr raft.ServerAddress
	conn net.Conn

	wmu sync.Mutex // serializes frame writes

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]chan reply
	dead    bool
	closed  chan struct{}

	noDeadline atomic.Bool // the peer does not know msgBatch (deadline.go)
	noEnvelope atomic.Bool // the peer does not know msgDeadline (deadline.go)
}

func dialPeer(addr raft.ServerAddress, group uint32, timeout time.Duration, tlsCfg *tls.Config) (*peerConn, error) {
	c, err := dialProto(string(addr), timeout, preamble(group, protoForward), tlsCfg)
	if err != nil {
		return nil, err
	}
	p := &peerConn{addr: addr, conn: c, pending: make(map[uint64]chan reply), closed: make(chan struct{})}
	go p.readLoop()
	return p, nil
}

func (p *peerConn) readLoop() {
	fr := newFrameReader(p.conn, defaultFrameTimeout)
	for {
		typ, id, payload, err := fr.next()
		if err != nil || typ != msgReply || len(payload) < 1 {
			p.close()
			return
		}
		p.mu.Lock()
		ch := p.pending[id]
		delete(p.pending, id)
		p.mu.Unlock()
		if ch != nil {
			ch <- reply{status: payload[0], body: payload[1:]}
		}
	}
}

// close ends the connection; requests waiting for a reply see errConnLost.
func (p *peerConn) close() {
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return
	}
	p.dead = true
	close(p.closed)
	p.mu.Unlock()
	p.conn.Close()
}

func (p *peerConn) isDead() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.dead
}

// call sends one request and waits for its reply. An error before the whole
// frame was written is errNotLeader (not appended: the peer never saw a
// complete frame); after, errConnLost or the context's error (unknown).
func (p *peerConn) call(ctx context.Context, typ byte, payload []byte) (reply, error) {
	ch := make(chan reply, 1)
	p.mu.Lock()
	if p.dead {
		p.mu.Unlock()
		return reply{}, errNotLeader
	}
	p.nextID++
	id := p.nextID
	p.pending[id] = ch
	p.mu.Unlock()

	frame := appendFrame(make([]byte, 0, 13+len(payload)), typ, id, payload)
	p.wmu.Lock()
	if dl, ok := ctx.Deadline(); ok {
		p.conn.SetWriteDeadline(dl)
	} else {
		p.conn.SetWriteDeadline(time.Now().Add(5 * time.Second))
	}
	_, err := p.conn.Write(frame)
	p.wmu.Unlock()
	if err != nil {
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		p.close()
		return reply{}, errNotLeader
	}
	select {
	case r := <-ch:
		return r, nil
	case <-p.closed:
		// The reader may have delivered just before closing.
		select {
		case r := <-ch:
			return r, nil
		default:
		}
		return reply{}, errConnLost
	case <-ctx.Done():
		p.mu.Lock()
		delete(p.pending, id)
		p.mu.Unlock()
		return reply{}, ctx.Err()
	}
}

// forwardErr maps a reply status to an error (statusOK: nil).
func forwardErr(st byte) error {
	switch st {
	case statusOK:
		return nil
	case statusNotLeader, statusBadRequest, statusLate:
		return errNotLeader
	case statusMembership:
		return ErrMembership
	case statusNoNode:
		return ErrUnknownNode
	default:
		return ErrUnknownOutcome
	}
}

// serveForward answers forwarded requests on one connection. Each request
// runs on its own goroutine, so a batch waiting for commit does not hold up
// the others; replies are written as they complete.
func (n *Node) serveForward(c net.Conn) {
	// The group's connections are routed here from the moment it is
	// registered on the Transport, before Open has started Raft: a
	// message arriving in between waits (a process restarted while its
	// peers still send it a group's work).
	select {
	case <-n.ready:
	case <-n.closing:
		c.Close()
		return
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	n.trackConn(c, true)
	defer n.trackConn(c, false)
	defer c.Close()
	fr := newFrameReader(c, n.cfg.FrameTimeout)
	var wmu sync.Mutex
	send := func(id uint64, status byte, body []byte) {
		payload := append(make([]byte, 0, 1+len(body)), status)
		payload = append(payload, body...)
		frame := appendFrame(make([]byte, 0, 13+len(payload)), msgReply, id, payload)
		wmu.Lock()
		c.SetWriteDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(frame); err != nil {
			c.Close()
		}
		wmu.Unlock()
	}
	for {
		typ, id, payload, err := fr.next()
		if err != nil {
			return
		}
		go func() {
			status, body := n.handleForward(typ, payload)
			send(id, status, body)
		}()
	}
}

func statusOf(err error) byte {
	switch {
	case err == nil:
		return statusOK
	case errors.Is(err, errLate):
		return statusLate
	case retryable(err), errors.Is(err, ErrRemoved):
		return statusNotLeader
	case errors.Is(err, ErrMembership):
		return statusMembership
	case errors.Is(err, ErrUnknownNode):
		return statusNoNode
	default:
		return statusUnknown
	}
}

func (n *Node) handleForward(typ byte, payload []byte) (byte, []byte) {
	ctx, cancel := context.WithTimeout(context.Background(), n.cfg.CommitTimeout)
	defer cancel()
	return n.handleForwardMsg(ctx, typ, payload)
}

// handleForwardMsg answers one forwarded message. ctx carries the
// leader's deadline when the message came in msgBatch or msgDeadline
// (deadline.go).
func (n *Node) handleForwardMsg(ctx context.Context, typ byte, payload []byte) (byte, []byte) {
	d := codec.Reader{B: payload}
	switch typ {
	case msgHello:
		id, resp := string(d.Bytes()), string(d.Bytes())
		if d.Err != nil {
			return statusBadRequest, nil
		}
		n.learnRESP(id, resp)
		return statusOK, n.helloBody()
	case msgFlush:
		_, err := n.applySimple(ctx, entry.Flush, true)
		return statusOf(err), nil
	case msgScan:
		cursor, count := d.Uvarint(), d.Uvarint()
		if d.Err != nil {
			return statusBadRequest, nil
		}
		if !n.IsLeader() {
			return statusNotLeader, nil
		}
		var keys []byte
		next, err := n.Scan(ctx, cursor, int(min(max(count, 1), maxScanCount)), func(key []byte, k engine.Kind) {
			keys = codec.AppendString(append(keys, byte(k)), string(key))
		})
		if err != nil {
			return statusOf(err), nil
		}
		return statusOK, append(binary.AppendUvarint(nil, next), keys...)
	case msgMoveStatus:
		id := d.Uvarint()
		if d.Err != nil {
			return statusBadRequest, nil
		}
		if !n.IsLeader() {
			return statusNotLeader, nil
		}
		p, ok := n.Move(id)
		if !ok {
			return statusOK, []byte{0}
		}
		return statusOK, appendProgress([]byte{1}, p)
	case msgExport:
		id, start, end, after, budget := d.Uvarint(), d.Uvarint(), d.Uvarint(), string(d.Bytes()), d.Uvarint()
		if d.Err != nil || start > end || end >= slots.Count {
			return statusBadRequest, nil
		}
		if _, frozen := n.Move(id); !n.IsLeader() || !frozen {
			return statusNotLeader, nil
		}
		recs, clock, err := n.ExportSlots(ctx, int(start), int(end), after)
		if err != nil {
			return statusOf(err), nil
		}
		more, size := byte(0), 0
		for i, r := range recs {
			if size += len(r.Key) + 10*len(r.Fields) + 16; size > int(min(budget, maxFrame/2)) && i > 0 {
				recs, more = recs[:i], 1
				break
			}
		}
		body := append(binary.AppendVarint(nil, clock), more)
		body = binary.AppendUvarint(body, uint64(len(recs)))
		for i := range recs {
			body = codec.AppendRecord(body, &recs[i])
		}
		return statusOK, body
	case msgLen:
		v, err := n.applySimple(ctx, entry.Len, true)
		if err != nil {
			return statusOf(err), nil
		}
		return statusOK, binary.AppendUvarint(nil, uint64(v))
	case msgJoin:
		id, addr := string(d.Bytes()), string(d.Bytes())
		if d.Err != nil {
			return statusBadRequest, nil
		}
		if len(d.B) > 0 && d.B[0] == joinNonvoter {
			return statusOf(n.changeMembershipAs(ctx, id, addr, true, true)), nil
		}
		return statusOf(n.changeMembership(ctx, id, addr, true)), nil
	case msgRemove:
		id := string(d.Bytes())
		if d.Err != nil {
			return statusBadRequest, nil
		}
		return statusOf(n.changeMembership(ctx, id, "", true)), nil
	case msgBatch, msgDeadline:
		return n.handleDeadline(ctx, payload, typ == msgDeadline)
	case msgMeta:
		return metaOps.handle(ctx, n, payload) // directory.go, stateop.go
	case msgSlots:
		return slotsOps.handle(ctx, n, payload) // slotmove.go, stateop.go
	case msgRemoved:
		id := string(d.Bytes())
		if d.Err != nil {
			return statusBadRequest, nil
		}
		return n.handleRemoved(id), nil
	case msgBatchV1:
		// A follower of an older build: re-encode its batch.
		count := d.Uvarint()
		if d.Err != nil {
			return statusBadRequest, nil
		}
		reqs, err := entry.DecodeV1Requests(d.B, count)
		if err != nil {
			return statusBadRequest, nil
		}
		return n.serveBatch(ctx, entry.AppendRequests(nil, reqs, nil), int(count))
	case msgBatchNoDeadline:
		count := d.Uvarint()
		if d.Err != nil {
			return statusBadRequest, nil
		}
		// Validate before it can reach the log: an entry that does not
		// decode would halt every replica.
		if !validBatch(d.B, count) {
			return statusBadRequest, nil
		}
		return n.serveBatch(ctx, d.B, int(count)) // batch.go
	case msgPolicy:
		if _, _, err := entry.DecodePolicy(payload); err != nil {
			return statusBadRequest, nil
		}
		code, err := n.applyPolicy(ctx, payload, true) // policy.go
		if err != nil {
			return statusOf(err), nil
		}
		return statusOK, []byte{code}
	}
	return statusBadRequest, nil
}

func (n *Node) helloBody() []byte {
	b := codec.AppendString(nil, n.cfg.NodeID)
	b = codec.AppendString(b, n.cfg.RESPAddr)
	n.mu.Lock()
	defer n.mu.Unlock()
	for id, addr := range n.resp {
		b = codec.AppendString(b, id)
		b = codec.AppendString(b, addr)
	}
	return b
}

func (n *Node) learnRESP(id, addr string) {
	if id == "" || addr == "" || id == n.cfg.NodeID {
		return
	}
	n.mu.Lock()
	n.resp[id] = addr
	n.mu.Unlock()
}

// leaderConn returns the forward connection to the current leader, dialing
// (and saying hello) when the leader changed. Errors are retryable.
func (n *Node) leaderConn() (*peerConn, error) {
	addr, id := n.raft.LeaderWithID()
	if addr == "" {
		return nil, ErrNoLeader
	}
	if string(id) == n.cfg.NodeID {
		return nil, errNotLeader
	}
	n.fwdMu.Lock()
	defer n.fwdMu.Unlock()
	if p := n.fwd; p != nil && p.addr == addr && !p.isDead() {
		return p, nil
	}
	if n.fwd != nil {
		n.fwd.close()
		n.fwd = nil
	}
	hello := codec.AppendString(codec.AppendString(nil, n.cfg.NodeID), n.cfg.RESPAddr)
	p, body, err := dialHello(addr, n.cfg.Group, n.dialTimeout(), n.cfg.DialTLS, hello)
	if err != nil {
		return nil, err
	}
	d := codec.Reader{B: body}
	for len(d.B) > 0 && d.Err == nil {
		pid, paddr := string(d.Bytes()), string(d.Bytes())
		if d.Err == nil {
			n.learnRESP(pid, paddr)
		}
	}
	n.fwd = p
	return p, nil
}

// dialHello opens a forward connection to group on the peer at addr and
// says hello (msgHello's body), within timeout, returning the peer's
// answer. A peer that does not host the group closes the connection at
// once, before reading anything, so a batch sent without this exchange
// could meet a closed connection and get an unknown outcome for nothing;
// after it, the peer's forward server is known to read the connection.
// Errors are errNotLeader: nothing was sent that appends.
func dialHello(addr raft.ServerAddress, group uint32, timeout time.Duration, tlsCfg *tls.Config, hello []byte) (*peerConn, []byte, error) {
	p, err := dialPeer(addr, group, timeout, tlsCfg)
	if err != nil {
		return nil, nil, errNotLeader
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	r, err := p.call(ctx, msgHello, hello)
	if err != nil || r.status != statusOK {
		p.close()
		return nil, nil, errNotLeader
	}
	return p, r.body, nil
}

// dropLeaderConn closes the forward connection unless it goes to addr.
// Requests still waiting on it get an unknown outcome: the old leader may
// have appended them.
func (n *Node) dropLeaderConn(addr raft.ServerAddress) {
	n.fwdMu.Lock()
	defer n.fwdMu.Unlock()
	if n.fwd != nil && n.fwd.addr != addr {
		n.fwd.close()
		n.fwd = nil
	}
}

// forward sends a message to the leader, with ctx's deadline
// (callDeadline), and returns the reply body.
func (n *Node) forward(ctx context.Context, typ byte, payload []byte) ([]byte, error) {
	p, err := n.leaderConn()
	if err != nil {
		return nil, err
	}
	return n.callDeadline(ctx, p, typ, payload)
}

// forwardReply maps the outcome of a forwarded call to the reply body or
// an error.
func forwardReply(r reply, err error) ([]byte, error) {
	if err != nil {
		if errors.Is(err, errNotLeader) {
			return nil, err
		}
		return nil, ErrUnknownOutcome
	}
	if err := forwardErr(r.status); err != nil {
		return nil, err
	}
	return r.body, nil
}

// appendProgress encodes a move's progress for msgMoveStatus.
func appendProgress(dst []byte, p ownership.Progress) []byte {
	dst = binary.AppendUvarint(dst, p.ID)
	dst = binary.AppendUvarint(binary.AppendUvarint(dst, uint64(p.Start)), uint64(p.End))
	dst = append(dst, b2byte(p.Target), b2byte(p.Done))
	dst = binary.AppendVarint(dst, p.ExportClock)
	dst = codec.AppendString(dst, p.LastKey)
	return binary.AppendUvarint(dst, uint64(p.Keys))
}

// readProgress decodes appendProgress.
func readProgress(d *codec.Reader) ownership.Progress {
	var p ownership.Progress
	p.ID = d.Uvarint()
	p.Start, p.End = int(d.Uvarint()), int(d.Uvarint())
	p.Target, p.Done = d.Byte() == 1, d.Byte() == 1
	p.ExportClock = d.Varint()
	p.LastKey = string(d.Bytes())
	p.Keys = int(d.Uvarint())
	return p
}

func b2byte(b bool) byte {
	if b {
		return 1
	}
	return 0
}
