package cluster

import (
	"encoding/binary"
	"errors"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// Results travel from the leader to a follower in the reply to a
// forwarded batch (forward.go), one per request in the batch's order.

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
	ownership.ErrNotOwned,
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

func readResult(d *codec.Reader, r *engine.Result) {
	code := d.Byte()
	switch {
	case int(code) < len(resultErrs):
		r.Err = resultErrs[code]
	default:
		r.Err = errUnknownResult
	}
	flags := d.Byte()
	r.Allowed = flags&1 != 0
	r.Limit = d.Varint()
	r.Remaining = d.Varint()
	r.RetryAfter = d.Varint()
	r.ResetAfter = d.Varint()
	r.Delay = d.Varint()
	r.Queued = d.Varint()
	r.Value = d.Varint()
	r.Kind = engine.Kind(d.Byte())
	if flags&2 != 0 {
		r.Reply = string(d.Bytes())
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
	d := codec.Reader{B: b}
	n := d.Uvarint()
	if d.Err != nil || n > uint64(len(d.B))/10 {
		return nil, codec.ErrCorrupt
	}
	res := resultPool.get(int(n)) // pool.go
	for i := range res {
		readResult(&d, &res[i])
	}
	if d.Err != nil || len(d.B) != 0 {
		return nil, codec.ErrCorrupt
	}
	return res, nil
}
