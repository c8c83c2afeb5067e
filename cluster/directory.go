package cluster

import (
	"context"
	"errors"
	"fmt"

	"github.com/rlserver/rlserver/cluster/ownership"
)

// The slot directory through the meta group's log: each change is an
// ownership directory op in an entry.Meta entry, proposed through the
// leader as a state op (stateop.go), applied by the FSM (applyMetaEntry),
// and read from the FSM of this replica.

// Directory is this replica's slot directory as of its last applied entry
// (never nil; Epoch 0 until initialised). Only the meta group's is used.
func (n *Node) Directory() *ownership.Directory { return n.fsm.directory() }

// DirectoryChanged is closed at the next change of the directory.
func (n *Node) DirectoryChanged() <-chan struct{} { return n.fsm.dirChanged() }

// InitDirectory creates groups 1..groups with the slots split evenly, unless
// the directory is initialised already (then it does nothing).
func (n *Node) InitDirectory(ctx context.Context, groups int, peers []Peer) error {
	_, err := n.proposeMeta(ctx, ownership.InitOp(groups, peers))
	return err
}

// RegisterNode records a node's client address.
func (n *Node) RegisterNode(ctx context.Context, id, respAddr string) error {
	_, err := n.proposeMeta(ctx, ownership.RegisterOp(id, respAddr))
	return err
}

// ForgetNode drops a node's record.
func (n *Node) ForgetNode(ctx context.Context, id string) error {
	_, err := n.proposeMeta(ctx, ownership.ForgetOp(id))
	return err
}

// AddGroup adds a data group with no slots, bootstrapped by peers, and
// returns its id.
func (n *Node) AddGroup(ctx context.Context, peers []Peer) (uint32, error) {
	v, err := n.proposeMeta(ctx, ownership.AddGroupOp(peers))
	if err == nil && v == 0 {
		return 0, ownership.ErrNotInitialised
	}
	return uint32(v), err
}

// BeginMove records a move of slots [start, end] to group target and
// returns its id; *ownership.ErrMoveInvalid says why the directory
// refused it.
func (n *Node) BeginMove(ctx context.Context, start, end int, target uint32) (uint64, error) {
	return n.proposeMeta(ctx, ownership.MoveBeginOp(start, end, target))
}

// MoveCommitted points move id's range at its target.
func (n *Node) MoveCommitted(ctx context.Context, id uint64) error {
	_, err := n.proposeMeta(ctx, ownership.MoveCommittedOp(id))
	return err
}

// MoveReleased ends move id.
func (n *Node) MoveReleased(ctx context.Context, id uint64) error {
	_, err := n.proposeMeta(ctx, ownership.MoveReleasedOp(id))
	return err
}

func (n *Node) proposeMeta(ctx context.Context, op []byte) (uint64, error) {
	v, err := metaOps.propose(ctx, n, op)
	return uint64(v), err
}

// applyMetaEntry applies an entry.Meta entry (the caller holds f.mu). An op
// that does not decode was refused before the log, so it panics like any
// undecodable entry.
func (f *fsm) applyMetaEntry(now int64, op []byte, index uint64) any {
	d, v, err := f.dir.Load().Apply(op, now)
	if errors.Is(err, ownership.ErrBadChange) {
		panic(fmt.Sprintf("cluster: log entry %d: %v", index, err))
	}
	if err != nil {
		return &stateResult{err: err}
	}
	f.setDirectory(d)
	return &stateResult{v: int64(v)}
}
