package engine

import "math/bits"

// Policy-managed token buckets and queues (Request.Scaled).
//
// A compact GCRA or SHAPE key keeps one int64 in its slot (the TAT, the
// schedule end) and nothing else: its parameters come with every request.
// When an operator changes a policy's limit, the state must be read under
// the new parameters, which needs the old ones. A Scaled request that
// writes therefore keeps the state in a scaledState, with the interval
// and limit it was charged under, and gives the slot the kind
// kindGCRAScaled or kindShapeScaled (which TYPE, OpTTL, records and
// countKinds show as KindGCRA and KindShape; every GCRA or SHAPE request
// works on them).
//
// The rule: a request whose (Interval, Limit) differ from the stored ones
// first rescales the state, then decides as usual. Both algorithms keep
// the units in use: a token bucket the tokens in use, capped at the new
// capacity, a queue (SHAPE) the units it holds (requests already admitted
// and waiting, never capped: they were promised a place). Either way the
// units refill (are served) at the new rate. With debt d = v - now (v the
// stored TAT or schedule end, d > 0; a state with d <= 0 is empty and
// needs nothing), units in use d/Interval_old:
//
//	GCRA:  d' = min(ceil(d * Interval_new / Interval_old), Limit_new*Interval_new)
//	SHAPE: d' = ceil(d * Interval_new / Interval_old)    (clamped to MaxDuration)
//
// in 128-bit integers. The units in use are carried exactly, the fraction
// of the token in progress included: d' / Interval_new = d / Interval_old
// up to the rounding. Rounding d' up, never down, means no token, not even
// the next one by a nanosecond, comes earlier than the carried state says
// (whole tokens available, floor((tau - d')/T), can only be as many or
// fewer), and a key in debt never reads as full (d > 0 gives d' > 0).
// Rounding the tokens in use to whole tokens instead would restart the
// token in progress, so merely raising a capacity would delay the key's
// next token. A raised capacity therefore admits at once by the
// difference (2 of 2 used under capacity 10: 8 left); a lowered one
// leaves at most one full bucket of the new policy owed (12 of 20 used
// under capacity 5: empty, the next token in Interval_new). A changed
// rate keeps the tokens in use and refills them at the new rate. The cap
// also keeps every rescaled GCRA debt within Validate's tau bound.
//
// A request that writes (not read-only, cost > 0) stores the rescaled
// state with its own parameters, whether it is allowed (then charged on
// top) or denied, alone or as a tier of a group, charged or rejected (a
// rescale charges nothing itself; a raised capacity only admits later
// requests sooner). From then on the state drains at the new rate. A read-only
// request (a peek, cost 0, and the read-only evaluation of a group's
// tiers) reads the state rescaled to its parameters at its now and stores
// nothing, so between a change and the first writing request the state
// drains at the rate it was last stored under.
//
// A key that was once scaled stays scaled until it expires, whoever
// writes it. A compact key met by a Scaled request is read as it is (its
// old parameters are not known) and becomes scaled, with the request's
// parameters, when that request is charged. A non-scaled request on a
// compact key is exactly the plain algorithm.

// scaledState is a GCRA or SHAPE state with its parameters.
type scaledState struct {
	val      int64 // the TAT (GCRA) or the schedule end (SHAPE), ns
	interval int64 // the emission interval it was last stored under, ns
	limit    int64 // the capacity it was last stored under
}

// visible is the kind the key shows outside the package.
func (k Kind) visible() Kind {
	switch k {
	case kindGCRAScaled:
		return KindGCRA
	case kindShapeScaled:
		return KindShape
	}
	return k
}

// scaledKind is the slot kind of k's state (KindGCRA or KindShape) kept
// with its parameters: 1 -> 6, 5 -> 7, without a branch.
func (k Kind) scaledKind() Kind {
	return kindGCRAScaled + k>>2
}

// setKind changes the kind of the used slot i in place. The key keeps its
// slot, so an export in progress still sees it exactly once (a removal
// and insertion could move it into a slot the walk skips).
func (t *table) setKind(i int, k Kind) {
	s := &t.slots[i]
	s.meta = s.meta&^(7<<25) | uint32(k)<<25
}

// rescale returns st's value as seen under interval and limit at now
// (see the rule above): the units in use carried at the new interval,
// capped at the new capacity unless queue is set (SHAPE).
func rescale(now int64, st *scaledState, interval, limit int64, queue bool) int64 {
	if st.val <= now || (st.interval == interval && (queue || st.limit == limit)) {
		return st.val
	}
	ceiling := uint64(MaxDuration)
	if !queue {
		ceiling = uint64(limit * interval) // <= MaxDuration: Validate's bound
	}
	d := uint64(st.val - now)
	if st.interval == interval {
		return now + int64(min(d, ceiling))
	}
	hi, lo := bits.Mul64(d, uint64(interval))
	if hi >= uint64(st.interval) {
		return now + int64(ceiling) // the quotient would not fit 64 bits
	}
	q, rem := bits.Div64(hi, lo, uint64(st.interval))
	if rem != 0 {
		q++
	}
	return now + int64(min(q, ceiling))
}

// rescaleOnly stores the rescaled state of r's key under r's parameters
// when r writes and the key holds a scaled state of r's kind with other
// parameters: what a denied r stores (applyBucket), for the tiers of a
// rejected group.
func (s *shard) rescaleOnly(r *Request) {
	if r.ReadOnly || r.Cost == 0 || (r.Op != OpGCRA && r.Op != OpShape) {
		return
	}
	i, ok := s.lookup(r.Key, hashKey(r.Key))
	if !ok {
		return
	}
	k := KindGCRA
	if r.Op == OpShape {
		k = KindShape
	}
	sl := &s.tab.slots[i]
	if sl.kind() != k.scaledKind() {
		return
	}
	st := &s.scaled.vals[sl.val]
	if st.interval != r.Interval || st.limit != r.Limit {
		*st = scaledState{val: rescale(s.now, st, r.Interval, r.Limit, r.Op == OpShape), interval: r.Interval, limit: r.Limit}
		s.dirty++
	}
}

// applyBucket decides a GCRA (k = KindGCRA) or SHAPE (k = KindShape)
// request. Its state is one int64 (0 when the key is missing): kept in the
// slot of a compact key, in s.scaled for a scaled one. A request that is
// not Scaled on a compact key is exactly the plain algorithm; a Scaled one
// stores a new key, or a compact one (read as it is), scaled, with its
// parameters, when it writes.
func (s *shard) applyBucket(k Kind, r *Request, out *Result,
	decide func(now, v int64, r *Request, out *Result) (int64, bool)) {
	h := hashKey(r.Key)
	i, ok := s.lookup(r.Key, h)
	var v int64
	if ok {
		sl := &s.tab.slots[i]
		if kd := sl.kind(); kd != k {
			if kd == k.scaledKind() {
				s.applyScaled(&s.scaled.vals[sl.val], r, out, decide)
			} else {
				out.Err = ErrWrongType
			}
			return
		}
		v = sl.val
	}
	next, store := decide(s.now, v, r, out)
	if !store {
		return
	}
	s.dirty++
	switch {
	case !r.Scaled:
		if !ok {
			i = s.insert(r.Key, h, k)
		}
		s.tab.slots[i].val = next
		return
	case ok:
		s.tab.setKind(i, k.scaledKind())
	default:
		i = s.insert(r.Key, h, k.scaledKind()) // may renumber the slab: add after
	}
	s.tab.slots[i].val = s.scaled.add(scaledState{val: next, interval: r.Interval, limit: r.Limit})
}

// applyScaled decides r on the live scaled state st: rescaled to r's
// parameters, decided, and stored with them when r writes (see the rule
// above).
func (s *shard) applyScaled(st *scaledState, r *Request, out *Result,
	decide func(now, v int64, r *Request, out *Result) (int64, bool)) {
	v := rescale(s.now, st, r.Interval, r.Limit, r.Op == OpShape)
	next, store := decide(s.now, v, r, out)
	switch {
	case store:
		*st = scaledState{val: next, interval: r.Interval, limit: r.Limit}
		s.dirty++
	case !r.ReadOnly && r.Cost > 0 && (st.interval != r.Interval || st.limit != r.Limit):
		*st = scaledState{val: v, interval: r.Interval, limit: r.Limit}
		s.dirty++
	}
}
