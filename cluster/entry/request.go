package entry

import (
	"bytes"
	"encoding/binary"

	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// Request encoding (Batch entries, and the batches followers forward),
// carrying every field of engine.Request
// (TestRequestEncodingCarriesEveryField):
//
//	byte    Op (0 for a policy request)
//	byte    flags: bit 0 ReadOnly, bit 1 Scaled, bit 2 policy
//	uvarint Tiers
//	uvarint len(Key), Key bytes
//	policy request: uvarint len(name), name bytes, varint Cost
//	data command (Op engine.OpCmd): uvarint length, then kv.Append's
//	  encoding of the command
//	other requests: varint Interval, Limit, Window, Cost
//
// A policy request carries only its key, cost and tiers: Op, ReadOnly,
// Scaled and the parameters come from the policy when the state machine
// applies the entry (policy.Store.ResolveBatch), so flags bits 0 and 1
// are 0 on it.
const (
	flagReadOnly = 1
	flagScaled   = 2
	flagPolicy   = 4
)

// AppendRequest encodes r; a name that is not nil makes it a policy
// request.
func AppendRequest(dst []byte, r *engine.Request, name []byte) []byte {
	var flags byte
	if name != nil {
		flags = flagPolicy
	} else {
		if r.ReadOnly {
			flags |= flagReadOnly
		}
		if r.Scaled {
			flags |= flagScaled
		}
	}
	op := r.Op
	if name != nil {
		op = 0
	}
	dst = append(dst, byte(op), flags)
	dst = binary.AppendUvarint(dst, uint64(r.Tiers))
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	if name != nil {
		dst = binary.AppendUvarint(dst, uint64(len(name)))
		dst = append(dst, name...)
		return binary.AppendVarint(dst, r.Cost)
	}
	if r.Op == engine.OpCmd {
		// A data command: its encoding (package kv) instead of the
		// limiter fields.
		at := len(dst)
		dst = append(dst, make([]byte, binary.MaxVarintLen64)...)
		dst = kv.Append(dst, r.Cmd)
		n := len(dst) - at - binary.MaxVarintLen64
		hdr := binary.AppendUvarint(nil, uint64(n))
		copy(dst[at:], hdr)
		return append(dst[:at+len(hdr)], dst[at+binary.MaxVarintLen64:]...)
	}
	dst = binary.AppendVarint(dst, r.Interval)
	dst = binary.AppendVarint(dst, r.Limit)
	dst = binary.AppendVarint(dst, r.Window)
	return binary.AppendVarint(dst, r.Cost)
}

// AppendRequests encodes reqs one after another; names[i], when present
// and not nil, makes request i a policy request.
func AppendRequests(dst []byte, reqs []engine.Request, names [][]byte) []byte {
	for i := range reqs {
		var name []byte
		if i < len(names) {
			name = names[i]
		}
		dst = AppendRequest(dst, &reqs[i], name)
	}
	return dst
}

func readRequest(d *codec.Reader, r *engine.Request) (name []byte) {
	r.Op = engine.Op(d.Byte())
	flags := d.Byte()
	tiers := d.Uvarint()
	if flags&^(flagReadOnly|flagScaled|flagPolicy) != 0 || tiers > 0xffff {
		d.Fail()
	}
	r.Tiers = uint16(tiers)
	r.Key = d.Bytes()
	if flags&flagPolicy != 0 {
		name = d.Bytes()
		r.Cost = d.Varint()
		if d.Err == nil && (r.Op != 0 || flags != flagPolicy || !policy.ValidName(name) || r.Cost < 0) {
			d.Fail()
		}
		return name
	}
	r.ReadOnly = flags&flagReadOnly != 0
	r.Scaled = flags&flagScaled != 0
	if r.Op == engine.OpCmd {
		b := d.Bytes()
		if d.Err != nil {
			return nil
		}
		cmd, err := kv.Decode(b)
		if err != nil {
			d.Fail()
			return nil
		}
		keys := cmd.Keys()
		if (len(keys) > 0 && !bytes.Equal(keys[0], r.Key)) || (len(keys) == 0 && len(r.Key) != 0) || (len(keys) > 1) != (r.Tiers == 1) {
			d.Fail()
			return nil
		}
		r.Cmd = cmd
		return nil
	}
	r.Interval = d.Varint()
	r.Limit = d.Varint()
	r.Window = d.Varint()
	r.Cost = d.Varint()
	return nil
}

// DecodeRequests decodes exactly count requests (AppendRequest) filling
// all of b, into buf's array when it holds count requests, and checks
// them as engine.ValidateBatch does, a policy request standing in as a
// valid tier: only valid batches reach the log. names is nil when no
// request names a policy. Keys and names alias b.
func DecodeRequests(b []byte, count uint64, buf []engine.Request) ([]engine.Request, [][]byte, error) {
	// Every request takes at least 8 bytes.
	if count > uint64(len(b))/8 {
		return nil, nil, ErrCorrupt
	}
	d := codec.Reader{B: b}
	var reqs []engine.Request
	if uint64(cap(buf)) >= count {
		reqs = buf[:count]
		clear(reqs)
	} else {
		reqs = make([]engine.Request, count)
	}
	var names [][]byte
	for i := range reqs {
		if name := readRequest(&d, &reqs[i]); name != nil {
			if names == nil {
				names = make([][]byte, count)
			}
			names[i] = name
		}
	}
	if d.Err != nil || len(d.B) != 0 {
		return nil, nil, ErrCorrupt
	}
	check := reqs
	if names != nil {
		check = make([]engine.Request, len(reqs))
		copy(check, reqs)
		for i, nm := range names {
			if nm != nil {
				// Any valid decision stands in: its policy is resolved
				// at apply time into one the constructors built.
				check[i] = engine.Request{Op: engine.OpFixed, Key: reqs[i].Key, Limit: 1, Window: 1, Cost: reqs[i].Cost, Tiers: reqs[i].Tiers}
			}
		}
	}
	if engine.ValidateBatch(check) != nil {
		return nil, nil, ErrCorrupt
	}
	return reqs, names, nil
}

// The first request encoding, read from old logs (batchV1 entries) and
// from followers of older builds (cluster's msgBatchV1); nothing writes
// it any more:
//
//	byte    Op
//	byte    flags (bit 0: ReadOnly)
//	uvarint len(Key), Key bytes
//	varint  Interval, Limit, Window, Cost
func readRequestV1(d *codec.Reader, r *engine.Request) {
	r.Op = engine.Op(d.Byte())
	flags := d.Byte()
	if flags&^flagReadOnly != 0 {
		d.Fail()
	}
	r.ReadOnly = flags&flagReadOnly != 0
	r.Key = d.Bytes()
	r.Interval = d.Varint()
	r.Limit = d.Varint()
	r.Window = d.Varint()
	r.Cost = d.Varint()
	if d.Err == nil && engine.Validate(r) != nil {
		// Only valid requests reach the log: a forwarded batch holding
		// one is refused before it is appended.
		d.Fail()
	}
}

// DecodeV1Requests decodes exactly count requests in the first encoding
// filling all of b. Keys alias b.
func DecodeV1Requests(b []byte, count uint64) ([]engine.Request, error) {
	// Every request takes at least 7 bytes: a count that cannot fit is corrupt
	// and must not make us allocate.
	if count > uint64(len(b))/7 {
		return nil, ErrCorrupt
	}
	d := codec.Reader{B: b}
	reqs := make([]engine.Request, count)
	for i := range reqs {
		readRequestV1(&d, &reqs[i])
	}
	if d.Err != nil || len(d.B) != 0 {
		return nil, ErrCorrupt
	}
	return reqs, nil
}
