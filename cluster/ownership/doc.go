// Package ownership holds which Raft group owns each hash slot, as the
// log decides it: the slot directory (Directory, the meta group's whole
// state: the data groups and the peers that bootstrap them, the owner of
// each of the 16,384 slots, the nodes' client addresses, the slot moves)
// and a data group's slot-move state (Table: the state of each slot a
// move touched, each move's progress).
//
// Both change only through log entries: a directory op (InitOp,
// MoveBeginOp, ...) is the body of an entry.Meta entry of the meta
// group, a move step (ImportStep, FreezeStep, ...) the body of an
// entry.Slots entry of a data group. This package encodes and checks
// them and holds the state; package cluster proposes them, applies them
// in its state machine (where a step also touches the engine and the
// clock), and carries both states in its snapshots (AppendDirectory,
// AppendTable). It reads no clock and imports nothing of Raft.
//
// # Usage
//
//	d := ownership.EmptyDirectory()
//	d, _, err := d.Apply(ownership.InitOp(3, peers), nowNanos) // groups 1..3, slots split evenly
//	owner := d.Slots[slots.OfString("user:42")]                 // the group that owns the key
//	for _, r := range ownership.Runs(d.Slots) { ... }           // CLUSTER SLOTS
//
//	t := ownership.NewTable()
//	t.Set(slot, ownership.Frozen, moveID)
//	keep, names, idx, filtered := t.FilterOwned(reqs, nil, res) // the others get ErrNotOwned
//
// An op that does not decode (ValidOp, ValidStep false) must not reach
// the log: applying one halts the replica.
package ownership
