package cluster

import (
	"encoding/binary"
	"errors"
	"fmt"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Command types: the first byte of every log entry written by this package.
// Append-only: never renumber or reuse a value, old logs and snapshots on
// disk hold them. A change to the encoding of an existing type (a new
// engine.Request field, for example) needs a new type here.
const (
	// cmdBatch is a batch of engine requests:
	// varint nowNanos, uvarint count, then count requests (see appendRequest).
	cmdBatch byte = 1
	// cmdFlush removes every key (FLUSHALL): varint nowNanos.
	cmdFlush byte = 2
	// cmdLen counts live keys at the stamped time (DBSIZE): varint nowNanos.
	cmdLen byte = 3

	// Named policies and all-or-nothing groups (policy.go).

	// cmdBatch2 is cmdBatch with requests in the second encoding, which
	// carries Tiers and Scaled and lets a request name a policy that the
	// FSM resolves when it applies the entry (appendRequest2). Leaders
	// write it for every batch.
	cmdBatch2 byte = 4
	// cmdPolicySet defines or redefines a policy: varint nowNanos, then
	// its words (appendWords).
	cmdPolicySet byte = 5
	// cmdPolicyDel deletes a policy: varint nowNanos, its name.
	cmdPolicyDel byte = 6
	// cmdPolicyReplace replaces every policy (RL.POLICY LOAD, a policy
	// file): varint nowNanos, uvarint count, then count definitions.
	cmdPolicyReplace byte = 7

	// maxmemory (memory.go).

	// cmdNoCreate wraps a batch entry (cmdBatch, cmdBatch2) that the
	// leader wrote while above maxmemory with the noeviction policy: the
	// byte, then the whole inner entry. Replicas apply it with the
	// engine's no-create mode on and every other batch with it off, so
	// the mode needs no state of its own (a snapshot cannot lose it).
	cmdNoCreate byte = 16
	// cmdEvict is one eviction round (engine.EvictRange): varint
	// nowNanos, uvarint N, then From and To as 8 bytes each,
	// big-endian.
	cmdEvict byte = 17
)

// errCorrupt reports a log entry or a forwarded message that does not
// decode. In a log entry it is fatal (the FSM panics).
var errCorrupt = errors.New("undecodable entry")

// Request encoding, in field order of engine.Request:
//
//	byte    Op
//	byte    flags (bit 0: ReadOnly)
//	uvarint len(Key), Key bytes
//	varint  Interval, Limit, Window, Cost
//
// TestRequestEncodingCarriesEveryField fails when engine.Request gains a
// field this encoding does not carry.

const flagReadOnly = 1

// decoder reads the fields of an entry or message; the first error sticks.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail() {
	if d.err == nil {
		d.err = errCorrupt
	}
	d.b = nil
}

func (d *decoder) byte() byte {
	if len(d.b) < 1 {
		d.fail()
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail()
		return 0
	}
	d.b = d.b[n:]
	return v
}

// bytes returns a length-prefixed byte string, aliasing the input.
func (d *decoder) bytes() []byte {
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) request(r *engine.Request) {
	r.Op = engine.Op(d.byte())
	flags := d.byte()
	if flags&^flagReadOnly != 0 {
		d.fail()
	}
	r.ReadOnly = flags&flagReadOnly != 0
	r.Key = d.bytes()
	r.Interval = d.varint()
	r.Limit = d.varint()
	r.Window = d.varint()
	r.Cost = d.varint()
	if d.err == nil && engine.Validate(r) != nil {
		// Only valid requests reach the log: a forwarded batch holding
		// one is refused before it is appended.
		d.fail()
	}
}

// decodeRequests decodes exactly count requests filling all of b. Keys
// alias b.
func decodeRequests(b []byte, count uint64) ([]engine.Request, error) {
	// Every request takes at least 7 bytes: a count that cannot fit is corrupt
	// and must not make us allocate.
	if count > uint64(len(b))/7 {
		return nil, errCorrupt
	}
	d := decoder{b: b}
	reqs := make([]engine.Request, count)
	for i := range reqs {
		d.request(&reqs[i])
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return reqs, nil
}

// appendEntryHeader starts a log entry of type cmd stamped nowNanos.
func appendEntryHeader(dst []byte, cmd byte, nowNanos int64) []byte {
	dst = append(dst, cmd)
	return binary.AppendVarint(dst, nowNanos)
}

// entry is a decoded log entry.
type entry struct {
	cmd      byte
	nowNanos int64
	reqs     []engine.Request  // cmdBatch, cmdBatch2
	names    [][]byte          // cmdBatch2: the policy of each request, nil for plain ones
	defs     [][]string        // cmdPolicySet (one), cmdPolicyDel (the name alone), cmdPolicyReplace
	noCreate bool              // cmdNoCreate: the wrapped batch is applied in no-create mode
	evict    engine.EvictRange // cmdEvict
	meta     []byte            // cmdMeta: the directory change (directory.go); cmdSlots: the move step (slotmove.go)
}

// decodeEntry decodes a log entry written by this package.
func decodeEntry(b []byte) (entry, error) { return decodeEntryInto(b, nil) }

// decodeEntryInto is decodeEntry decoding a cmdBatch2 entry's requests
// into buf's array when it is large enough (the FSM reuses one array for
// every entry it applies: the requests' keys point into b, and nothing
// keeps a request after the entry is applied).
func decodeEntryInto(b []byte, buf []engine.Request) (entry, error) {
	if len(b) > 0 && b[0] == cmdNoCreate { // memory.go
		return decodeNoCreate(b[1:], buf)
	}
	d := decoder{b: b}
	e := entry{cmd: d.byte(), nowNanos: d.varint()}
	if d.err != nil {
		return e, errCorrupt
	}
	switch e.cmd {
	case cmdBatch:
		count := d.uvarint()
		if d.err != nil {
			return e, errCorrupt
		}
		reqs, err := decodeRequests(d.b, count)
		if err != nil {
			return e, err
		}
		e.reqs = reqs
	case cmdFlush, cmdLen:
		if len(d.b) != 0 {
			return e, errCorrupt
		}
	case cmdEvict: // memory.go
		if err := decodeEvict(&e, d.b); err != nil {
			return e, err
		}
	case cmdBatch2, cmdPolicySet, cmdPolicyDel, cmdPolicyReplace:
		if e.cmd == cmdBatch2 {
			e.reqs = buf[:0]
		}
		if err := decodePolicyEntry(&e, d.b); err != nil {
			return e, err
		}
	case cmdMeta:
		if !validMetaOp(d.b) {
			return e, errCorrupt
		}
		e.meta = d.b
	case cmdSlots:
		if !validSlotsOp(d.b) {
			return e, errCorrupt
		}
		e.meta = d.b
	default:
		return e, fmt.Errorf("%w: unknown command type %d", errCorrupt, e.cmd)
	}
	return e, nil
}

// resultErrs numbers the errors an engine.Result can carry, for forwarded
// replies. Append-only: followers and leaders of different builds must agree.
var resultErrs = []error{
	nil,
	engine.ErrWrongType,
	engine.ErrBadCapacity,
	engine.ErrBadRate,
	engine.ErrBadCost,
	engine.ErrPeriodTooLong,
	engine.ErrClosed,
	engine.ErrGroupAborted,
	engine.ErrDuplicateTier,
	policy.ErrUnknown,
	engine.ErrOOM,
	ErrNotOwned,
}

// errUnknownResult stands for a Result error that resultErrs does not list.
var errUnknownResult = errors.New("unknown engine error")

const errCodeUnknown = 255

func resultErrCode(err error) byte {
	for i, e := range resultErrs {
		if e == err {
			return byte(i)
		}
	}
	return errCodeUnknown
}

// Result encoding (forwarded replies), in field order of engine.Result:
//
//	byte    error code (resultErrs index)
//	byte    flags (bit 0: Allowed)
//	varint  Limit, Remaining, RetryAfter, ResetAfter, Delay, Queued, Value
//	byte    Kind
//	when flags bit 1 (a data command's reply): uvarint length, the reply
func appendResult(dst []byte, r *engine.Result) []byte {
	var flags byte
	if r.Allowed {
		flags = 1
	}
	if r.Reply != "" {
		flags |= 2
	}
	dst = append(dst, resultErrCode(r.Err), flags)
	dst = binary.AppendVarint(dst, r.Limit)
	dst = binary.AppendVarint(dst, r.Remaining)
	dst = binary.AppendVarint(dst, r.RetryAfter)
	dst = binary.AppendVarint(dst, r.ResetAfter)
	dst = binary.AppendVarint(dst, r.Delay)
	dst = binary.AppendVarint(dst, r.Queued)
	dst = binary.AppendVarint(dst, r.Value)
	dst = append(dst, byte(r.Kind))
	if r.Reply != "" {
		dst = binary.AppendUvarint(dst, uint64(len(r.Reply)))
		dst = append(dst, r.Reply...)
	}
	return dst
}

func (d *decoder) result(r *engine.Result) {
	code := d.byte()
	switch {
	case int(code) < len(resultErrs):
		r.Err = resultErrs[code]
	default:
		r.Err = errUnknownResult
	}
	flags := d.byte()
	r.Allowed = flags&1 != 0
	r.Limit = d.varint()
	r.Remaining = d.varint()
	r.RetryAfter = d.varint()
	r.ResetAfter = d.varint()
	r.Delay = d.varint()
	r.Queued = d.varint()
	r.Value = d.varint()
	r.Kind = engine.Kind(d.byte())
	if flags&2 != 0 {
		r.Reply = string(d.bytes())
	}
}

func appendResults(dst []byte, res []engine.Result) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(res)))
	for i := range res {
		dst = appendResult(dst, &res[i])
	}
	return dst
}

func decodeResults(b []byte) ([]engine.Result, error) {
	d := decoder{b: b}
	n := d.uvarint()
	if d.err != nil || n > uint64(len(d.b))/10 {
		return nil, errCorrupt
	}
	res := resultPool.get(int(n)) // pool.go
	for i := range res {
		d.result(&res[i])
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, errCorrupt
	}
	return res, nil
}
