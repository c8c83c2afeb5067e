package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"time"

	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/ownership"
)

// State ops: directory changes (entry.Meta, directory.go) and slot move steps
// (entry.Slots, slotmove.go) take the same path. The op is one log entry;
// the FSM answers a value or a refusal by the state (the entry is applied
// and changes nothing); a follower forwards the op to the leader, whose
// reply body is 0 and the value as a varint, or 1 and the refusal's
// reason.

// stateResult is what Apply returns for a state op entry.
type stateResult struct {
	v   int64
	err error // a refusal: *ownership.ErrMoveInvalid or ownership.ErrMoveRefused
}

// stateOp is one kind of state op: its entry and message types, and how a
// refusal's reason travels.
type stateOp struct {
	entryType, msg byte
	valid          func(op []byte) bool
	refused        func(reason string) error
}

var (
	metaOps  = stateOp{entryType: entry.Meta, msg: msgMeta, valid: ownership.ValidOp, refused: func(r string) error { return &ownership.ErrMoveInvalid{Reason: r} }}
	slotsOps = stateOp{entryType: entry.Slots, msg: msgSlots, valid: ownership.ValidStep, refused: func(string) error { return ownership.ErrMoveRefused }}
)

// refusalReason reports whether err is a refusal by the state, and its
// reason.
func refusalReason(err error) (string, bool) {
	var inv *ownership.ErrMoveInvalid
	switch {
	case errors.As(err, &inv):
		return inv.Reason, true
	case errors.Is(err, ownership.ErrMoveRefused):
		return "", true
	}
	return "", false
}

// propose applies op through the leader, retrying while it is certainly
// not appended, within the commit timeout.
func (k stateOp) propose(ctx context.Context, n *Node, op []byte) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return k.apply(ctx, n, op, false)
}

func (k stateOp) apply(ctx context.Context, n *Node, op []byte, localOnly bool) (int64, error) {
	return applyOp(ctx, n, logOp[int64]{
		encode: func(now time.Time) []byte {
			return append(entry.AppendHeader(make([]byte, 0, 12+len(op)), k.entryType, now.UnixNano()), op...)
		},
		leader: func(resp any) (int64, error) {
			r, ok := resp.(*stateResult)
			if !ok {
				return 0, ErrUnknownOutcome
			}
			return r.v, r.err
		},
		msg:       k.msg,
		body:      op,
		forwarded: k.reply,
	}, localOnly)
}

// reply reads a leader's answer to a forwarded op (handle): a value, or a
// refusal by the state.
func (k stateOp) reply(reply []byte) (int64, error) {
	switch {
	case len(reply) > 0 && reply[0] == 1:
		return 0, k.refused(string(reply[1:]))
	case len(reply) == 0:
		return 0, ErrUnknownOutcome
	}
	v, m := binary.Varint(reply[1:])
	if m <= 0 {
		return 0, ErrUnknownOutcome
	}
	return v, nil
}

// handle serves a forwarded op on the leader; the op is checked before it
// can reach the log.
func (k stateOp) handle(ctx context.Context, n *Node, op []byte) (byte, []byte) {
	if !k.valid(op) {
		return statusBadRequest, nil
	}
	v, err := k.apply(ctx, n, op, true)
	if reason, ok := refusalReason(err); ok {
		return statusOK, append([]byte{1}, reason...)
	}
	if err != nil {
		return statusOf(err), nil
	}
	return statusOK, binary.AppendVarint([]byte{0}, v)
}
