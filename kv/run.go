package kv

import (
	"errors"

	"github.com/rlserver/rlserver/engine"
)

// The internal reads and writes of optimistic runs and WATCH, with typed
// results: kv writes their replies (RESP, the only form a result takes on
// its way through a cluster's log and forwarding) and kv alone reads them
// back, so its callers never see that text.

// Do runs one request through the engine or a backend in front of it: its
// error is the backend's (the request may not have run), the result's Err
// the engine's.
type Do func(req engine.Request) (engine.Result, error)

// ErrBadReply is an internal read whose reply kv cannot read: a bug, or a
// node of another version.
var ErrBadReply = errors.New("unexpected reply to an internal read")

// Refused is a restore of a run's effects that the engine refused (a new
// key while it refuses new keys): Text is the refusal, as Redis words it.
type Refused struct{ Text string }

func (r *Refused) Error() string { return r.Text }

// ErrConflict is a run's effects or a transaction that did not apply
// because a key changed since the run (or WATCH) read it.
var ErrConflict = errors.New("a key changed since it was read")

func do1(do Do, req engine.Request) (string, error) {
	res, err := do(req)
	if err != nil {
		return "", err
	}
	if res.Err != nil {
		return "", res.Err
	}
	return res.Reply, nil
}

// FetchWith is the Fetch that reads keys through do, in one request.
func FetchWith(do Do) Fetch {
	return func(keys [][]byte) ([]KeyState, error) {
		reply, err := do1(do, NewDump(keys).Request())
		if err != nil {
			return nil, err
		}
		st, ok := ParseDump(reply, len(keys))
		if !ok {
			return nil, ErrBadReply
		}
		return st, nil
	}
}

// ReadDigests reads the digests of keys through do, in one request (WATCH).
func ReadDigests(do Do, keys [][]byte) ([]uint64, error) {
	reply, err := do1(do, NewDigests(keys).Request())
	if err != nil {
		return nil, err
	}
	ds, ok := ParseDigests(reply, len(keys))
	if !ok {
		return nil, ErrBadReply
	}
	return ds, nil
}

// Apply applies a run's effects (Overlay.Effects) through do. It returns
// nil when they applied, ErrConflict when a key changed since the run
// read it (nothing applied: run again), a *Refused when the engine refused
// a restore (the restores that needed no new key applied, as Redis keeps
// a script's writes before an error), or the backend's error.
func (t *Txn) Apply(do Do) error {
	reply, err := do1(do, t.Request())
	if err != nil {
		return err
	}
	return effectsOutcome(reply)
}

// Outcome reads the result of t.Request() run by the caller (a batch of
// programs applies every program's effects in one backend call): as
// Apply's error.
func (t *Txn) Outcome(res engine.Result) error {
	if res.Err != nil {
		return res.Err
	}
	return effectsOutcome(res.Reply)
}

// DumpOutcome reads the result of NewDump(keys).Request() for n keys run
// by the caller.
func DumpOutcome(res engine.Result, n int) ([]KeyState, error) {
	if res.Err != nil {
		return nil, res.Err
	}
	st, ok := ParseDump(res.Reply, n)
	if !ok {
		return nil, ErrBadReply
	}
	return st, nil
}

// effectsOutcome reads the reply of a transaction of restores: a null
// array (a watched key changed), or an array of +OK and errors.
func effectsOutcome(reply string) error {
	if reply == "*-1\r\n" || reply == "_\r\n" {
		return ErrConflict
	}
	// A restore's reply is +OK or an error line, so an error line starts
	// right after a line end.
	for i := 0; i+2 < len(reply); i++ {
		if reply[i] == '\r' && reply[i+1] == '\n' && reply[i+2] == '-' {
			line := reply[i+3:]
			for j := 0; j+1 < len(line); j++ {
				if line[j] == '\r' {
					line = line[:j]
					break
				}
			}
			return &Refused{Text: line}
		}
	}
	if len(reply) > 0 && reply[0] == '-' {
		// The whole transaction refused (EXECABORT-like OOM).
		line := reply[1:]
		for j := 0; j < len(line); j++ {
			if line[j] == '\r' {
				line = line[:j]
				break
			}
		}
		return &Refused{Text: line}
	}
	return nil
}
