package client

import "errors"

// Errors a call can return, and causes a degraded Decision can carry in
// its Err field. Compare with errors.Is.
var (
	// ErrCommand means the server answered the command with an error
	// reply that is not a transient server state: WRONGTYPE, a bad
	// argument, NOAUTH, NOPERM, an unknown command or policy. It is a bug
	// in the caller or its configuration, so the call returns it instead
	// of applying the failure mode. The server's text follows the colon.
	ErrCommand = errors.New("rlserver refused the command")

	// ErrBadPolicy means a Policy or a call option cannot be expressed as
	// a command (a non-positive limit or rate, a window that is not whole
	// milliseconds, a negative cost). Nothing was sent.
	ErrBadPolicy = errors.New("invalid rate limit policy")

	// ErrBadReply means the server's reply did not have the documented
	// shape, for example a server too old for the command.
	ErrBadReply = errors.New("unexpected reply from rlserver")

	// ErrClosed means the Client was closed.
	ErrClosed = errors.New("client closed")

	// ErrUnavailable is wrapped by every failure that made a call fall
	// back to its failure mode: the server could not be reached, did not
	// answer in time, or answered with a transient state (CLUSTERDOWN,
	// TRYAGAIN, LOADING, MASTERDOWN, UNKNOWN, shutting down, too many
	// clients). It is found in Decision.Err, never returned by a call.
	ErrUnavailable = errors.New("rlserver unavailable")

	// ErrTimeout is wrapped, besides ErrUnavailable, when the per-call
	// timeout ran out.
	ErrTimeout = errors.New("rlserver call timed out")

	// ErrBreakerOpen is wrapped, besides ErrUnavailable, when the circuit
	// breaker skipped the call because recent calls all failed.
	ErrBreakerOpen = errors.New("circuit breaker open")
)
