package ownership

import "errors"

// Error is an error that carries the text a client sees (the server
// package calls WireText through its BackendError interface): the
// ownership errors below, and cluster's (cluster.Error is this type).
// Compare with errors.Is against the sentinels.
type Error struct {
	msg  string
	wire string
}

// NewError returns an Error whose text is msg and whose reply is wire.
func NewError(msg, wire string) *Error { return &Error{msg, wire} }

func (e *Error) Error() string { return e.msg }

// WireText is the Redis-style error reply for this error.
func (e *Error) WireText() string { return e.wire }

var (
	// ErrNotOwned is a request's result when its group refused it because
	// the group does not own its slot at that log index (a slot being
	// moved, or moved away). The request was not applied; it may be sent
	// again to the slot's owner.
	ErrNotOwned = &Error{"slot not owned", "TRYAGAIN the key's slot is moving between groups; retry"}
	// ErrMoveRefused: a move step was refused by the group's state (for
	// example a freeze of slots the group does not serve).
	ErrMoveRefused = &Error{"move step refused", "ERR the slot move step was refused by the group's state"}
	// ErrNotInitialised: the directory has not been initialised (no group).
	ErrNotInitialised = &Error{"slot directory not initialised", "CLUSTERDOWN the slot directory is not initialised yet; retry"}
)

// ErrMoveInvalid: a move the directory refuses (the reason is in the
// text).
type ErrMoveInvalid struct{ Reason string }

func (e *ErrMoveInvalid) Error() string    { return "slot move refused: " + e.Reason }
func (e *ErrMoveInvalid) WireText() string { return "ERR " + e.Reason }

// ErrBadSnapshot reports a directory or slot-move state in a snapshot
// that does not decode.
var ErrBadSnapshot = errors.New("bad snapshot")
