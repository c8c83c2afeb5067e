package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Remote sends one group's work to that group's leader from a process
// that holds no replica of the group (a placed cluster under
// --cluster-redirect forward). It speaks the forward protocol a follower
// uses (forward.go): batches go as msgBatch with the caller's deadline
// (deadline.go) into the leader's group commit, other appends wrapped in
// msgDeadline, so a Remote's outcomes mean what a follower's do: an error
// other than ErrUnknownOutcome guarantees nothing was appended.
//
// The leader is looked for among Addrs (the group's replicas, the likeliest
// leader first): the replica that last served a call is tried first, and a
// replica that is not the leader (statusNotLeader, statusLate) or cannot
// be reached is left for the next. A call that was sent and got no answer
// (the connection lost, the wait over) is never sent again: its outcome
// is unknown.
type Remote struct {
	cfg RemoteConfig
	log *slog.Logger

	mu       sync.Mutex
	conns    map[string]*peerConn // by Raft address; a dead one is dialled again
	dialing  map[string]bool      // addresses being dialled (outside mu)
	leader   string               // the address that last served a call
	closed   bool
	inflight int // calls running (Close waits for them to close the connections)
}

// RemoteConfig configures a Remote.
type RemoteConfig struct {
	Group   uint32
	DialTLS *tls.Config // nil: plain TCP
	// CommitTimeout bounds each call, as Config.CommitTimeout does a
	// node's (0: 2 s).
	CommitTimeout time.Duration
	// Addrs lists the Raft addresses of the group's replicas, the
	// likeliest leader first; it is asked again on every round of tries.
	Addrs  func() []string
	Logger *slog.Logger
}

// NewRemote returns a Remote for cfg.Group; it dials nothing until used.
func NewRemote(cfg RemoteConfig) *Remote {
	if cfg.CommitTimeout <= 0 {
		cfg.CommitTimeout = 2 * time.Second
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Remote{cfg: cfg, log: log.With("group", cfg.Group), conns: map[string]*peerConn{}, dialing: map[string]bool{}}
}

// Close makes later calls fail with ErrNotAppended (nothing sent: the
// caller retries, through the replica of the group this process now
// holds, or another process when it shuts down) and closes
// the Remote's connections once the calls in flight have ended (each
// within its commit timeout): closing them under a call would turn its
// outcome unknown.
func (r *Remote) Close() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.closed = true
	r.closeIdle()
}

// closeIdle closes the connections of a closed Remote with no call in
// flight. r.mu is held.
func (r *Remote) closeIdle() {
	if !r.closed || r.inflight > 0 {
		return
	}
	for _, p := range r.conns {
		p.close()
	}
	clear(r.conns)
}

// Do applies reqs in the group, through its leader, and fills res.
func (r *Remote) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return r.DoPolicies(ctx, reqs, nil, res)
}

// DoPolicies is Do for a batch whose requests may name policies
// (Node.DoPolicies): the group's leader resolves them.
func (r *Remote) DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	if len(reqs) == 0 {
		return nil
	}
	// The msgBatch body after its deadline header: count, requests.
	reqBody := binary.AppendUvarint(nil, uint64(len(reqs)))
	reqBody = entry.AppendRequests(reqBody, reqs, names)
	body, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		now := time.Now()
		dl, _ := ctx.Deadline() // call sets one
		if !now.Before(dl) {
			return nil, errNotLeader
		}
		buf := appendBatchDeadline(make([]byte, 0, 20+len(reqBody)), now, dl.Sub(now))
		hdr := len(buf)
		return callBatch(ctx, r.log, p, append(buf, reqBody...), hdr)
	})
	if err != nil {
		return err
	}
	all, err := decodeResults(body)
	if err != nil || len(all) != len(reqs) {
		return ErrUnknownOutcome
	}
	copy(res[:len(reqs)], all)
	resultPool.put(all)
	return nil
}

// Len counts the group's live keys (DBSIZE), through its leader.
func (r *Remote) Len(ctx context.Context) (int, error) {
	body, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgLen, nil, r.cfg.CommitTimeout)
	})
	if err != nil {
		return 0, err
	}
	v, k := binary.Uvarint(body)
	if k <= 0 {
		return 0, ErrUnknownOutcome
	}
	return int(v), nil
}

// Scan continues a walk of the group's keys from cursor on its leader's
// replica (engine cursors) and gives fn each key and its kind; the next
// cursor is 0 when the walk is done.
func (r *Remote) Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error) {
	payload := binary.AppendUvarint(binary.AppendUvarint(nil, cursor), uint64(max(count, 1)))
	body, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgScan, payload, r.cfg.CommitTimeout)
	})
	if err != nil {
		return 0, err
	}
	d := codec.Reader{B: body}
	next := d.Uvarint()
	for d.Err == nil && len(d.B) > 0 {
		k := engine.Kind(d.Byte())
		key := d.Bytes()
		if d.Err == nil {
			fn(key, k)
		}
	}
	if d.Err != nil {
		return 0, fmt.Errorf("cluster: a malformed scan reply from group %d", r.cfg.Group)
	}
	return next, nil
}

// The steps of a slot move, sent to the group's leader as a replica of it
// would forward them (msgSlots): a driver that holds no replica of a
// move's source or target reaches it so. Each is the cluster.Node method
// of the same name.

// ImportSlots opens move id's range on the target.
func (r *Remote) ImportSlots(ctx context.Context, id uint64, start, end int) error {
	_, err := r.slotsStep(ctx, ownership.ImportStep(id, start, end))
	return err
}

// FreezeSlots freezes move id's range on the source and returns the
// export clock.
func (r *Remote) FreezeSlots(ctx context.Context, id uint64, start, end int) (int64, error) {
	return r.slotsStep(ctx, ownership.FreezeStep(id, start, end))
}

// ImportChunk adds records to move id's target.
func (r *Remote) ImportChunk(ctx context.Context, id uint64, clock int64, recs []engine.Record) error {
	_, err := r.slotsStep(ctx, ownership.ChunkStep(id, clock, recs))
	return err
}

// CommitImport makes the target own move id's range.
func (r *Remote) CommitImport(ctx context.Context, id uint64, clock int64) error {
	_, err := r.slotsStep(ctx, ownership.CommitStep(id, clock))
	return err
}

// ReleaseSlots drops move id's range at the source.
func (r *Remote) ReleaseSlots(ctx context.Context, id uint64) (int, error) {
	v, err := r.slotsStep(ctx, ownership.ReleaseStep(id))
	return int(v), err
}

// slotsStep sends a move step and reads the leader's answer (stateOp's
// forwarded reply: a value, or a refusal by the group's state).
func (r *Remote) slotsStep(ctx context.Context, op []byte) (int64, error) {
	reply, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgSlots, op, r.cfg.CommitTimeout)
	})
	if err != nil {
		return 0, err
	}
	return slotsOps.reply(reply)
}

// MoveStatus reports move id as the group's leader has applied it.
func (r *Remote) MoveStatus(ctx context.Context, id uint64) (ownership.Progress, bool, error) {
	reply, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgMoveStatus, binary.AppendUvarint(nil, id), r.cfg.CommitTimeout)
	})
	if err != nil {
		return ownership.Progress{}, false, err
	}
	d := codec.Reader{B: reply}
	if d.Byte() != 1 {
		return ownership.Progress{}, false, d.Err
	}
	p := readProgress(&d)
	return p, true, d.Err
}

// ExportPage reads, from the source's leader once it has applied move
// id's freeze, the records of slots [start, end] after the key after, in
// key order, up to about budget bytes; more reports that the page was
// cut there.
func (r *Remote) ExportPage(ctx context.Context, id uint64, start, end int, after string, budget int) (recs []engine.Record, clock int64, more bool, err error) {
	body := binary.AppendUvarint(nil, id)
	body = binary.AppendUvarint(binary.AppendUvarint(body, uint64(start)), uint64(end))
	body = binary.AppendUvarint(codec.AppendString(body, after), uint64(budget))
	reply, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgExport, body, r.cfg.CommitTimeout)
	})
	if err != nil {
		return nil, 0, false, err
	}
	d := codec.Reader{B: reply}
	clock = d.Varint()
	more = d.Byte() == 1
	recs = d.Records()
	if d.Err != nil {
		return nil, 0, false, fmt.Errorf("cluster: a malformed export from group %d", r.cfg.Group)
	}
	return recs, clock, more, nil
}

// Flush removes every key of the group (FLUSHALL), through its leader.
func (r *Remote) Flush(ctx context.Context) error {
	_, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgFlush, nil, r.cfg.CommitTimeout)
	})
	return err
}

// SetPolicy defines or redefines p in the group, through its leader.
func (r *Remote) SetPolicy(ctx context.Context, p *policy.Policy) error {
	code, err := r.policy(ctx, entry.AppendPolicy(entry.PolicySet, [][]string{p.Words()}))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// DelPolicy deletes a policy in the group, through its leader, and
// reports whether it existed.
func (r *Remote) DelPolicy(ctx context.Context, name string) (bool, error) {
	code, err := r.policy(ctx, entry.AppendPolicy(entry.PolicyDel, [][]string{{name}}))
	return code == policyExisted, err
}

// ReplacePolicies makes ps the group's whole policy table, through its
// leader.
func (r *Remote) ReplacePolicies(ctx context.Context, ps []*policy.Policy) error {
	defs := make([][]string, len(ps))
	for i, p := range ps {
		defs[i] = p.Words()
	}
	code, err := r.policy(ctx, entry.AppendPolicy(entry.PolicyReplace, defs))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// policy sends a policy entry's body as msgPolicy and returns its code.
func (r *Remote) policy(ctx context.Context, body []byte) (byte, error) {
	reply, err := r.call(ctx, func(ctx context.Context, p *peerConn) ([]byte, error) {
		return callDeadline(ctx, r.log, p, msgPolicy, body, r.cfg.CommitTimeout)
	})
	if err != nil {
		return 0, err
	}
	if len(reply) != 1 {
		return 0, ErrUnknownOutcome
	}
	return reply[0], nil
}

// errRemoteClosed: the Remote was closed; nothing was sent.
var errRemoteClosed = errors.New("remote closed")

// call runs send against the group's leader: each listed replica in turn
// (the last leader first) while they answer not-leader or cannot be
// reached, round after round, until ctx or the commit timeout ends. send
// gets a context with a deadline and returns the reply body, or
// errNotLeader when certainly nothing was appended.
func (r *Remote) call(ctx context.Context, send func(context.Context, *peerConn) ([]byte, error)) ([]byte, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, ErrNotAppended
	}
	r.inflight++
	r.mu.Unlock()
	defer func() {
		r.mu.Lock()
		r.inflight--
		r.closeIdle()
		r.mu.Unlock()
	}()
	ctx, cancel := context.WithTimeout(ctx, r.cfg.CommitTimeout)
	defer cancel()
	reached := false // a replica answered, so the group is up but not led there
	for {
		for _, addr := range r.order() {
			p, err := r.conn(addr)
			if errors.Is(err, errRemoteClosed) {
				return nil, ErrNotAppended
			}
			if err != nil {
				continue
			}
			reached = true
			body, err := send(ctx, p)
			if err == nil {
				r.mu.Lock()
				r.leader = addr
				r.mu.Unlock()
				return body, nil
			}
			if !errors.Is(err, errNotLeader) {
				// Sent and not answered, or refused for a reason a retry
				// does not change: never sent again.
				return nil, err
			}
		}
		t := time.NewTimer(retryPause)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			if reached {
				return nil, ErrNotAppended
			}
			return nil, ErrNoLeader
		}
	}
}

// order is the addresses to try: the last leader first, then Addrs'.
func (r *Remote) order() []string {
	addrs := r.cfg.Addrs()
	r.mu.Lock()
	last := r.leader
	r.mu.Unlock()
	out := make([]string, 0, len(addrs))
	for _, a := range addrs {
		if a == last {
			out = append(out, a)
		}
	}
	for _, a := range addrs {
		if a != last && a != "" {
			out = append(out, a)
		}
	}
	return out
}

// conn returns a live connection to addr, dialling it (and saying
// hello: dialHello) when there is none. The dial runs outside r.mu, so
// calls to the other replicas go on while one is unreachable (a dial may
// take up to a second); a call that finds addr being dialled by another
// leaves it for the next (errDialing). Its errors mean nothing was sent.
func (r *Remote) conn(addr string) (*peerConn, error) {
	r.mu.Lock()
	if r.closed {
		r.mu.Unlock()
		return nil, errRemoteClosed
	}
	if p := r.conns[addr]; p != nil && !p.isDead() {
		r.mu.Unlock()
		return p, nil
	}
	delete(r.conns, addr)
	if r.dialing[addr] {
		r.mu.Unlock()
		return nil, errDialing
	}
	r.dialing[addr] = true
	r.mu.Unlock()
	// An empty hello: this process is no member of the group, and has
	// no client address for the group's nodes to learn.
	hello := codec.AppendString(codec.AppendString(nil, ""), "")
	p, _, err := dialHello(raft.ServerAddress(addr), r.cfg.Group, min(time.Second, r.cfg.CommitTimeout), r.cfg.DialTLS, hello)
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.dialing, addr)
	if err != nil {
		return nil, err
	}
	if r.closed {
		p.close() // Close came meanwhile: nothing was sent on it
		return nil, errRemoteClosed
	}
	r.conns[addr] = p
	return p, nil
}

// errDialing: another call is dialling the address; nothing was sent.
var errDialing = errors.New("remote: the address is being dialled")
