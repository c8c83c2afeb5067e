package cluster

import (
	"errors"

	"github.com/rlserver/rlserver/cluster/ownership"

	"github.com/hashicorp/raft"
)

// Error is a cluster error that carries the text a client sees: the
// same type as ownership's. Compare with errors.Is against the sentinels
// below.
type Error = ownership.Error

// Sentinel errors. Only ErrUnknownOutcome may hide an applied command: every
// other one guarantees the command was not appended to the log, so a client
// may safely retry (TRYAGAIN and CLUSTERDOWN are retried by go-redis and
// other clients automatically).
var (
	// ErrNoLeader: no leader is known within the commit wait.
	ErrNoLeader = ownership.NewError("no leader known", "CLUSTERDOWN no leader is known, the cluster is electing one; retry later")
	// ErrNotAppended: the command certainly did not reach the log (the node
	// asked was not the leader, the leader was unreachable, or the wait ended
	// before the command was sent).
	ErrNotAppended = ownership.NewError("command not appended", "TRYAGAIN the command was not applied; retry")
	// ErrUnknownOutcome: the command was sent to or appended by a leader but
	// no result came back in time (leadership lost, connection lost, commit
	// wait exceeded). It may have been applied. Not retryable automatically.
	ErrUnknownOutcome = ownership.NewError("outcome unknown", "UNKNOWN outcome unknown: the command may have been applied and tokens may have been consumed")
	// ErrShutdown: this node is shutting down; nothing was appended.
	ErrShutdown = ownership.NewError("node shutting down", "CLUSTERDOWN this node is shutting down")
	// ErrRemoved: this node was removed from the cluster's configuration
	// (removed.go); nothing was appended. Its code is not one clients retry
	// on their own: the same node will never accept the command again, so
	// the client should use another member.
	ErrRemoved = ownership.NewError("node removed from the cluster", "REMOVED this node was removed from the cluster; send commands to another member")
	// ErrMembership: a membership change (join, remove) failed.
	ErrMembership = ownership.NewError("membership change failed", "ERR cluster membership change failed; check the node id and address and retry")
	// ErrUnknownNode: REMOVE named a node that is not a member.
	ErrUnknownNode = ownership.NewError("unknown node", "ERR no such node in the cluster configuration")
	// ErrBadAddress: a join named an empty id or address.
	ErrBadAddress = ownership.NewError("bad node id or address", "ERR node id and raft address must not be empty")
)

// errNotLeader is internal: this node cannot apply (not appended). Callers
// retry through the new leader; it leaves the package as ErrNotAppended.
var errNotLeader = errors.New("not the leader")

// applyErr maps an error of a raft future of an Apply to ours.
func applyErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout),
		errors.Is(err, raft.ErrLeadershipTransferInProgress):
		// The leader loop never took the command (or refused it while
		// handing leadership over): certainly not appended.
		return errNotLeader
	default:
		// ErrLeadershipLost, ErrRaftShutdown, ErrAbortedByRestore after the
		// command may have been appended: we cannot tell.
		return ErrUnknownOutcome
	}
}

// retryable reports whether an error guarantees the command was not
// appended, so it may be sent again.
func retryable(err error) bool {
	return errors.Is(err, errNotLeader) || errors.Is(err, ErrNotAppended) || errors.Is(err, ErrNoLeader)
}
