package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/policy"
)

// Named policies and all-or-nothing groups in the log.
//
// Policies are replicated state: RL.POLICY SET, DEL and LOAD are log
// entries (cmdPolicySet, cmdPolicyDel, cmdPolicyReplace) that the FSM
// applies to its policy.Store. Batches are cmdBatch2 entries, whose
// requests may name a policy instead of carrying parameters: the FSM
// resolves the name when it applies the entry, so a policy change is in
// force for every check applied after it, on every replica, and a check
// never runs with parameters a replica did not agree on. Snapshots carry
// the policies (persist's policies section).

// Forward message types, continuing forward.go's append-only list.
const (
	msgBatch2 byte = 8 // body: uvarint count, requests in the second encoding; reply: results
	msgPolicy byte = 9 // body: a policy entry without its time (type byte, payload); reply: a policyResult code
)

// Request encoding 2 (cmdBatch2, msgBatch2), carrying every field of
// engine.Request (TestRequestEncodingCarriesEveryField):
//
//	byte    Op (0 for a policy request)
//	byte    flags: bit 0 ReadOnly, bit 1 Scaled, bit 2 policy
//	uvarint Tiers
//	uvarint len(Key), Key bytes
//	policy request: uvarint len(name), name bytes, varint Cost
//	other requests: varint Interval, Limit, Window, Cost
//
// A policy request carries only its key, cost and tiers: Op, ReadOnly,
// Scaled and the parameters come from the policy when the FSM applies the
// entry (policy.Store.ResolveBatch), so flags bits 0 and 1 are 0 on it.
const (
	flagScaled = 2
	flagPolicy = 4
)

func appendRequest2(dst []byte, r *engine.Request, name []byte) []byte {
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

// appendRequests2 encodes reqs one after another; names[i], when present
// and not nil, makes request i a policy request.
func appendRequests2(dst []byte, reqs []engine.Request, names [][]byte) []byte {
	for i := range reqs {
		var name []byte
		if i < len(names) {
			name = names[i]
		}
		dst = appendRequest2(dst, &reqs[i], name)
	}
	return dst
}

func (d *decoder) request2(r *engine.Request) (name []byte) {
	r.Op = engine.Op(d.byte())
	flags := d.byte()
	tiers := d.uvarint()
	if flags&^(flagReadOnly|flagScaled|flagPolicy) != 0 || tiers > 0xffff {
		d.fail()
	}
	r.Tiers = uint16(tiers)
	r.Key = d.bytes()
	if flags&flagPolicy != 0 {
		name = d.bytes()
		r.Cost = d.varint()
		if d.err == nil && (r.Op != 0 || flags != flagPolicy || !policy.ValidName(name) || r.Cost < 0) {
			d.fail()
		}
		return name
	}
	r.ReadOnly = flags&flagReadOnly != 0
	r.Scaled = flags&flagScaled != 0
	if r.Op == engine.OpCmd {
		b := d.bytes()
		if d.err != nil {
			return nil
		}
		cmd, err := kv.Decode(b)
		if err != nil {
			d.fail()
			return nil
		}
		keys := cmd.Keys()
		if (len(keys) > 0 && !bytes.Equal(keys[0], r.Key)) || (len(keys) == 0 && len(r.Key) != 0) || (len(keys) > 1) != (r.Tiers == 1) {
			d.fail()
			return nil
		}
		r.Cmd = cmd
		return nil
	}
	r.Interval = d.varint()
	r.Limit = d.varint()
	r.Window = d.varint()
	r.Cost = d.varint()
	return nil
}

// decodeRequests2 decodes exactly count requests in the second encoding
// filling all of b, and checks them as engine.ValidateBatch does, a
// policy request standing in as a valid tier: only valid batches reach
// the log. names is nil when no request names a policy. Keys and names
// alias b.
func decodeRequests2(b []byte, count uint64) ([]engine.Request, [][]byte, error) {
	return decodeRequests2Into(b, count, nil)
}

// decodeRequests2Into is decodeRequests2 decoding into buf's array when it
// holds count requests.
func decodeRequests2Into(b []byte, count uint64, buf []engine.Request) ([]engine.Request, [][]byte, error) {
	// Every request takes at least 8 bytes.
	if count > uint64(len(b))/8 {
		return nil, nil, errCorrupt
	}
	d := decoder{b: b}
	var reqs []engine.Request
	if uint64(cap(buf)) >= count {
		reqs = buf[:count]
		clear(reqs)
	} else {
		reqs = make([]engine.Request, count)
	}
	var names [][]byte
	for i := range reqs {
		if name := d.request2(&reqs[i]); name != nil {
			if names == nil {
				names = make([][]byte, count)
			}
			names[i] = name
		}
	}
	if d.err != nil || len(d.b) != 0 {
		return nil, nil, errCorrupt
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
		return nil, nil, errCorrupt
	}
	return reqs, names, nil
}

// Policy entries: a definition is its words, a uvarint count then each as
// a length-prefixed string.
func appendWords(dst []byte, words []string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(words)))
	for _, w := range words {
		dst = appendString(dst, w)
	}
	return dst
}

func (d *decoder) words() []string {
	n := d.uvarint()
	if d.err != nil || n > 64 || n > uint64(len(d.b)) {
		d.fail()
		return nil
	}
	out := make([]string, n)
	for i := range out {
		out[i] = string(d.bytes())
	}
	return out
}

// decodePolicyEntry decodes the body of a cmdBatch2 or policy entry
// (after its time) into e. A policy entry must hold definitions that
// parse: the FSM panics on one that does not.
func decodePolicyEntry(e *entry, b []byte) error {
	d := decoder{b: b}
	switch e.cmd {
	case cmdBatch2:
		count := d.uvarint()
		if d.err != nil {
			return errCorrupt
		}
		reqs, names, err := decodeRequests2Into(d.b, count, e.reqs)
		if err != nil {
			return err
		}
		e.reqs, e.names = reqs, names
		return nil
	case cmdPolicySet:
		def := d.words()
		if d.err != nil || len(d.b) != 0 {
			return errCorrupt
		}
		if _, err := policy.Parse(def); err != nil {
			return fmt.Errorf("%w: policy %q: %v", errCorrupt, def, err)
		}
		e.defs = [][]string{def}
	case cmdPolicyDel:
		name := d.bytes()
		if d.err != nil || len(d.b) != 0 {
			return errCorrupt
		}
		e.defs = [][]string{{string(name)}}
	case cmdPolicyReplace:
		n := d.uvarint()
		if d.err != nil || n > policy.MaxPolicies || n > uint64(len(d.b)) {
			return errCorrupt
		}
		defs := make([][]string, n)
		for i := range defs {
			defs[i] = d.words()
		}
		if d.err != nil || len(d.b) != 0 {
			return errCorrupt
		}
		if _, err := policy.ParseDefs(defs); err != nil {
			return fmt.Errorf("%w: policies: %v", errCorrupt, err)
		}
		e.defs = defs
	}
	return nil
}

// appendPolicyBody encodes a policy entry's type and payload (without its
// time), as msgPolicy carries it.
func appendPolicyBody(cmd byte, defs [][]string) []byte {
	b := []byte{cmd}
	switch cmd {
	case cmdPolicySet:
		b = appendWords(b, defs[0])
	case cmdPolicyDel:
		b = appendString(b, defs[0][0])
	case cmdPolicyReplace:
		b = binary.AppendUvarint(b, uint64(len(defs)))
		for _, d := range defs {
			b = appendWords(b, d)
		}
	}
	return b
}

// policyResult is what Apply returns for a policy entry: a code that also
// travels in msgPolicy replies. Append-only.
type policyResult struct{ code byte }

const (
	policyOK       byte = 0 // done; DEL: the policy did not exist
	policyExisted  byte = 1 // DEL: removed
	policyTooMany  byte = 2 // SET, LOAD: over policy.MaxPolicies (nothing changed)
	policyDupNames byte = 3 // LOAD: a name twice (nothing changed)
)

func policyErr(code byte) error {
	switch code {
	case policyTooMany:
		return policy.ErrTooMany
	case policyDupNames:
		return policy.ErrDuplicate
	}
	return nil
}

// applyBatch2 applies a cmdBatch2 entry at now, resolving its policies.
func (f *fsm) applyBatch2(now int64, e *entry) ([]engine.Result, error) {
	res := resultPool.get(len(e.reqs)) // pool.go; the leader puts it back (batch.go)
	if f.policies.ResolveInPlace(e.reqs, e.names) {
		return res, f.eng.Do(context.Background(), now, e.reqs, res)
	}
	out, idx := f.policies.ResolveBatch(e.reqs, e.names, res)
	if idx == nil {
		return res, f.eng.Do(context.Background(), now, out, res)
	}
	tmp := make([]engine.Result, len(out))
	if err := f.eng.Do(context.Background(), now, out, tmp); err != nil {
		return nil, err
	}
	for k, i := range idx {
		res[i] = tmp[k]
	}
	return res, nil
}

// applyPolicyEntry applies a policy entry to the FSM's store. The store's
// refusals (too many policies) are results, the same on every replica.
func (f *fsm) applyPolicyEntry(e *entry) *policyResult {
	switch e.cmd {
	case cmdPolicySet:
		p, err := policy.Parse(e.defs[0])
		if err != nil {
			panic(fmt.Sprintf("cluster: policy entry does not parse: %v", err))
		}
		if f.policies.Set(p) != nil {
			return &policyResult{policyTooMany}
		}
	case cmdPolicyDel:
		if f.policies.Del(e.defs[0][0]) {
			return &policyResult{policyExisted}
		}
	case cmdPolicyReplace:
		ps, err := policy.ParseDefs(e.defs)
		if err != nil {
			panic(fmt.Sprintf("cluster: policy entry does not parse: %v", err))
		}
		switch f.policies.Replace(ps) {
		case nil:
		case policy.ErrDuplicate:
			return &policyResult{policyDupNames}
		default:
			return &policyResult{policyTooMany}
		}
	}
	return &policyResult{policyOK}
}

// PolicyStore is the policies this replica has applied (RL.POLICY GET and
// LIST, INFO): reads are local, like a follower's view of the log.
func (n *Node) PolicyStore() *policy.Store { return n.fsm.policies }

// SetPolicy defines or redefines p, through the log.
func (n *Node) SetPolicy(ctx context.Context, p *policy.Policy) error {
	code, err := n.proposePolicy(ctx, appendPolicyBody(cmdPolicySet, [][]string{p.Words()}))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// DelPolicy deletes a policy, through the log, and reports whether it
// existed.
func (n *Node) DelPolicy(ctx context.Context, name string) (bool, error) {
	code, err := n.proposePolicy(ctx, appendPolicyBody(cmdPolicyDel, [][]string{{name}}))
	return code == policyExisted, err
}

// ReplacePolicies makes ps the whole set, through the log.
func (n *Node) ReplacePolicies(ctx context.Context, ps []*policy.Policy) error {
	defs := make([][]string, len(ps))
	for i, p := range ps {
		defs[i] = p.Words()
	}
	code, err := n.proposePolicy(ctx, appendPolicyBody(cmdPolicyReplace, defs))
	if err != nil {
		return err
	}
	return policyErr(code)
}

// DoPolicies is Do for a batch whose requests may name policies (see
// server.Policies; names may be nil): the names travel in the entry and the
// FSM resolves them.
func (n *Node) DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	if len(reqs) == 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	// Encoding copies the keys, which alias the caller's buffers: after an
	// early return nothing here reads them.
	chunk := appendRequests2(chunkPool.get(len(reqs) * 48)[:0], reqs, names)
	err := n.submit(ctx, chunk, len(reqs), false, func(all []engine.Result) {
		copy(res[:len(reqs)], all)
	})
	if err == nil {
		// The batcher copied the chunk into its entry or message before
		// any result came back; after an error it may not have.
		chunkPool.put(chunk)
	}
	return err
}

// validBatch2 reports whether a forwarded batch's count requests decode,
// as the FSM will decode them.
func validBatch2(b []byte, count uint64) bool {
	buf := requestPool.get(0) // count is not checked yet: decoding checks it first
	reqs, _, err := decodeRequests2Into(b, count, buf)
	// Drop the keys, which point into b (a failed decode may have
	// written some into buf).
	if reqs != nil {
		clear(reqs)
		if cap(reqs) >= cap(buf) {
			buf = reqs
		}
	} else {
		clear(buf[:min(uint64(cap(buf)), count)])
	}
	requestPool.put(buf)
	return err == nil
}

// proposePolicy applies a policy entry (body: type and payload) on the
// leader, or forwards it, retrying while it is certainly not appended.
func (n *Node) proposePolicy(ctx context.Context, body []byte) (byte, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.applyPolicy(ctx, body, false)
}

func (n *Node) applyPolicy(ctx context.Context, body []byte, localOnly bool) (byte, error) {
	return applyOp(ctx, n, logOp[byte]{
		entry: func(now time.Time) []byte {
			buf := appendEntryHeader(make([]byte, 0, 12+len(body)), body[0], now.UnixNano())
			return append(buf, body[1:]...)
		},
		leader: func(resp any) (byte, error) {
			pr, ok := resp.(*policyResult)
			if !ok {
				return 0, ErrUnknownOutcome
			}
			return pr.code, nil
		},
		msg:  msgPolicy,
		body: body,
		forwarded: func(reply []byte) (byte, error) {
			if len(reply) != 1 {
				return 0, ErrUnknownOutcome
			}
			return reply[0], nil
		},
	}, localOnly)
}

// handleForward2 answers the forward messages of this file; ok is false
// for a type it does not know.
func (n *Node) handleForward2(ctx context.Context, typ byte, payload []byte) (status byte, body []byte, ok bool) {
	d := decoder{b: payload}
	switch typ {
	case msgBatch:
		// A follower of an older build: re-encode its batch.
		count := d.uvarint()
		if d.err != nil {
			return statusBadRequest, nil, true
		}
		reqs, err := decodeRequests(d.b, count)
		if err != nil {
			return statusBadRequest, nil, true
		}
		return n.serveBatch(ctx, appendRequests2(nil, reqs, nil), int(count))
	case msgBatch2:
		count := d.uvarint()
		if d.err != nil {
			return statusBadRequest, nil, true
		}
		// Validate before it can reach the log: an entry that does not
		// decode would halt every replica.
		if !validBatch2(d.b, count) {
			return statusBadRequest, nil, true
		}
		return n.serveBatch(ctx, d.b, int(count))
	case msgPolicy:
		if len(payload) == 0 {
			return statusBadRequest, nil, true
		}
		e := entry{cmd: payload[0]}
		switch e.cmd {
		case cmdPolicySet, cmdPolicyDel, cmdPolicyReplace:
		default:
			return statusBadRequest, nil, true
		}
		if decodePolicyEntry(&e, payload[1:]) != nil {
			return statusBadRequest, nil, true
		}
		code, err := n.applyPolicy(ctx, payload, true)
		if err != nil {
			return statusOf(err), nil, true
		}
		return statusOK, []byte{code}, true
	}
	return 0, nil, false
}

func (n *Node) serveBatch(ctx context.Context, chunk []byte, count int) (byte, []byte, bool) {
	var body []byte
	err := n.submitBy(ctx, chunk, count, true, leaderDeadline(ctx), func(res []engine.Result) {
		body = appendResults(nil, res)
	})
	if err != nil {
		return statusOf(err), nil, true
	}
	return statusOK, body, true
}
