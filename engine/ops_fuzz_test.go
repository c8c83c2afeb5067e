package engine_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
)

// FuzzEngineOps runs sequences of engine operations decoded from the input:
// decisions of every kind with arbitrary parameters, costs and times
// (backwards jumps included), scaled (policy) requests, all-or-nothing
// groups of any tiers (duplicate keys and non-decision tiers included),
// key operations, batches, sweeps, DBSIZE, FLUSHALL, and Export/Import
// round trips through the snapshot format. It checks that nothing panics
// and that:
//
//   - every result is well-formed (Result's documented ranges; the only
//     error outside groups is ErrWrongType; a group fails whole, with
//     ErrDuplicateTier or ErrBadRequest exactly when ValidateBatch refuses
//     it, or with ErrWrongType on the failing tiers and ErrGroupAborted on
//     the others), and every refused constructor call returns one of the
//     engine's sentinel errors;
//   - the tiers of a group are charged only together: a rejected group's
//     tiers admit nothing (the invariant keys below take part in groups);
//   - a token bucket (fixed capacity and rate) never admits more than
//     capacity + rate*W in any W ns; a fixed window never more than its
//     limit in an aligned window; a sliding log never more than its limit in
//     any window; a shaping queue starts each admitted call no earlier than
//     the previous one's units are served;
//   - after a round trip (Export, persist.Encode, persist.Decode, Import
//     into a fresh engine) the copy, run in lockstep, gives every reply the
//     original gives, and both export the same records.
//
// Times are given raw to the engine, which clamps them per shard, unless
// the input asks for a clamped clock (as the Raft FSM does); only then may
// the copy have another shard count, since shards that see different
// clocks legitimately answer differently.
func FuzzEngineOps(f *testing.F) {
	f.Add([]byte{})
	f.Add([]byte("\x00\x00\x01\x02\x03\x04\x05\x00\x00\x01\x01\x01\x02\x0a\x00\x00\x01\x02"))
	f.Add([]byte("\x03\x01\x07\x05\x02\x10\x20\x00\x01\x02\x03\x04\x08\x01\x05\x00\x00\x00\x01\x0a\x00\x01\x02\x09\x0a"))
	f.Add([]byte("\x01\x00\x0f\x03\x07\x09\x05\x00\x05\x00\x01\x05\x01\x02\x06\x03\x03\x05\x04\x0a\x08\x00\x40\x02\x02\x04\x0a\x0b\x00"))
	f.Add([]byte("\x02\x01\xff\xff\xff\xff\xff\xff\xff\xff\x05\x05\x03\x13\x01\x01\x05\x06\x03\x12\x01\x11\x0a\x08\x03\xff\xff\xff\xff\xff\xff\xff\x3f\x0a"))
	f.Add(bytes.Repeat([]byte("\x00\x01\x00\x08\x00\x05\x0a\x02\x03\x01\x04\x02\x08\x02\x03"), 20))
	r := rand.New(rand.NewPCG(1, 2))
	for range 8 {
		b := make([]byte, 400)
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		h := newOpsHarness(t, data)
		defer h.close()
		for !h.in.done() {
			h.step()
		}
		h.commit()
		h.roundTrip()
	})
}

// opsInput reads the fuzz input; past its end it reads zeros.
type opsInput struct{ b []byte }

func (in *opsInput) done() bool { return len(in.b) == 0 }

func (in *opsInput) byte() byte {
	if len(in.b) == 0 {
		return 0
	}
	c := in.b[0]
	in.b = in.b[1:]
	return c
}

func (in *opsInput) u64() uint64 {
	var b [8]byte
	n := copy(b[:], in.b)
	in.b = in.b[n:]
	return binary.LittleEndian.Uint64(b[:])
}

var opsInts = []int64{
	0, 1, -1, 2, 3, 10, 1000, 1e6, 1e9, 1 << 30, 1e12,
	engine.MaxDuration - 1, engine.MaxDuration, engine.MaxDuration + 1,
	engine.MaxLimit - 1, engine.MaxLimit, engine.MaxLimit + 1,
	engine.MaxLogLimit - 1, engine.MaxLogLimit, engine.MaxLogLimit + 1,
	engine.MaxDuration / 1e6, engine.MaxDuration/1e6 + 1,
	engine.MaxNow - 1, engine.MaxNow, engine.MaxNow + 1,
	math.MaxInt64 / int64(1e9), math.MaxInt64/int64(1e9) + 1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1,
}

// num is an arbitrary int64, biased to small and boundary values.
func (in *opsInput) num() int64 {
	switch in.byte() % 4 {
	case 0:
		return int64(in.byte()) - 8
	case 1:
		return opsInts[int(in.byte())%len(opsInts)]
	case 2:
		return int64(in.byte())<<8 | int64(in.byte())
	}
	return int64(in.u64())
}

var opsRates = []float64{
	0.001, 0.1, 0.5, 1, 2.5, 3, 7, 1e3, 1e6, 1e9, 1e10, 1e-9, 1e-12,
	0, -1, math.NaN(), math.Inf(1), math.Inf(-1), 1e-300, 5e-324, 1e300,
}

// rate is an arbitrary float64, biased to plausible rates and boundaries.
func (in *opsInput) rate() float64 {
	switch in.byte() % 3 {
	case 0:
		return opsRates[int(in.byte())%len(opsRates)]
	case 1:
		return float64(in.num())
	}
	return math.Float64frombits(in.u64())
}

// The keys. The invariant keys each get fixed parameters from the input
// and only requests of their own kind with those parameters (or requests of
// another kind, which find the wrong type or replace expired state); the
// free keys get anything.
var (
	opsBucketKeys = []string{"tb0", "tb1"}
	opsLogKey     = "lg"
	opsFixedKey   = "fx"
	opsShapeKey   = "sh"
	opsFreeKeys   = []string{"a", "b", "", "\x00\xff\r\n"}
)

// opsEvent is an admission on an invariant key: the shard's clock and the
// cost; for the shaping queue, start is when the call proceeds.
type opsEvent struct {
	at, cost, start int64
}

type opsPending struct {
	req   engine.Request
	check func(r engine.Result) // bookkeeping after the batch, may be nil
	group int                   // on a group's first request: its size
}

// opsTier is a decision on an invariant key, for a group: its request and
// the bookkeeping to run if the group is charged.
type opsTier struct {
	req   engine.Request
	check func(r engine.Result)
}

type opsHarness struct {
	t  *testing.T
	in *opsInput

	e        *engine.Engine
	n        int
	shardNow []int64 // e's shard clocks, as the engine clamps them
	clamp    bool    // give the engine a clock that never runs backwards
	now      int64   // the current raw time
	maxSeen  int64   // the largest time given to the engine so far

	twin  *engine.Engine // the copy made by the last round trip
	twinN int

	pending []opsPending

	// The invariant keys' fixed parameters and admissions.
	bucket   map[string]engine.Request
	logReq   engine.Request
	fixedReq engine.Request
	shapeReq engine.Request
	events   map[string][]opsEvent
	trips    int
}

func newOpsHarness(t *testing.T, data []byte) *opsHarness {
	in := &opsInput{b: data}
	h := &opsHarness{t: t, in: in}
	h.n = 1 + int(in.byte()%4)
	h.clamp = in.byte()&1 == 1
	h.e = engine.New(h.n)
	h.shardNow = make([]int64, h.n)
	h.now = 1_700_000_000_000_000_000 + int64(in.byte())*1e6
	h.bucket = map[string]engine.Request{}
	for _, k := range opsBucketKeys {
		h.bucket[k] = h.must(engine.TokenBucket([]byte(k), 1+int64(in.byte()%16), opsRates[int(in.byte())%10], 1))
	}
	h.logReq = h.must(engine.Log([]byte(opsLogKey), 1+int64(in.byte()%8), 1+int64(in.byte()%50), 1))
	h.fixedReq = h.must(engine.Fixed([]byte(opsFixedKey), 1+int64(in.byte()%8), 1+int64(in.byte()%50), 1))
	h.shapeReq = h.must(engine.Shape([]byte(opsShapeKey), 1+int64(in.byte()%16), opsRates[int(in.byte())%10], 1))
	h.events = map[string][]opsEvent{}
	return h
}

func (h *opsHarness) must(r engine.Request, err error) engine.Request {
	if err != nil {
		h.t.Fatalf("constructor refused valid parameters: %v", err)
	}
	return r
}

func (h *opsHarness) close() {
	h.e.Close()
	if h.twin != nil {
		h.twin.Close()
	}
}

// clock is the time given to the engine for the next call.
func (h *opsHarness) clock() int64 {
	if h.clamp {
		return max(h.now, h.maxSeen)
	}
	return h.now
}

func (h *opsHarness) seen(now int64) { h.maxSeen = max(h.maxSeen, now) }

func advance(clock *int64, now int64) {
	if now > *clock {
		*clock = min(now, engine.MaxNow)
	}
}

func (h *opsHarness) advanceAll(now int64) {
	for i := range h.shardNow {
		advance(&h.shardNow[i], now)
	}
}

func (h *opsHarness) step() {
	in := h.in
	switch op := in.byte() % 13; op {
	case 0, 1, 2, 3, 4: // a decision on an invariant key
		t := h.invariant(int(op))
		h.add(t.req, t.check)
	case 5, 6: // any constructor, any parameters
		b := in.byte()
		var key string
		var kinds []int // constructors allowed on the key
		switch {
		case b < 192:
			key, kinds = opsFreeKeys[int(b)%len(opsFreeKeys)], []int{0, 1, 2, 3, 4, 5, 6}
		case b < 208:
			key, kinds = opsBucketKeys[int(b)%2], []int{3, 4, 5, 6}
		case b < 224:
			key, kinds = opsLogKey, []int{0, 1, 2, 3, 4, 6}
		case b < 240:
			key, kinds = opsFixedKey, []int{0, 1, 2, 4, 5, 6}
		default:
			key, kinds = opsShapeKey, []int{0, 1, 2, 3, 4, 5}
		}
		r, err := h.build(kinds[int(in.byte())%len(kinds)], []byte(key))
		if err != nil {
			if !opsKnownErr(err) {
				h.t.Fatalf("constructor error %v is not one of the engine's sentinels", err)
			}
			return
		}
		b = in.byte()
		if b&1 == 1 {
			r.ReadOnly = true // RL.PEEK does this
		}
		r.Scaled = b&2 != 0 // any parameters: policy changes on live keys
		h.add(r, nil)
	case 7: // DEL, EXISTS, TTL on any key
		keys := append(append([]string{opsLogKey, opsFixedKey, opsShapeKey}, opsBucketKeys...), opsFreeKeys...)
		key := keys[int(in.byte())%len(keys)]
		o := []engine.Op{engine.OpDel, engine.OpExists, engine.OpTTL}[in.byte()%3]
		h.add(engine.Request{Op: o, Key: []byte(key)}, func(engine.Result) {
			if o == engine.OpDel {
				delete(h.events, key) // a new bucket: the bound starts again
			}
		})
	case 8: // the clock moves
		h.commit()
		switch in.byte() % 5 {
		case 0, 1:
			h.now += int64(in.byte()) * 1e6
		case 2:
			h.now += int64(in.u64() % (1 << 48))
		case 3:
			h.now -= int64(in.byte()) * 1e7 // backwards
		default:
			h.now = in.num()
		}
	case 9: // the batch ends
		h.commit()
	case 10:
		h.commit()
		h.roundTrip()
	case 12:
		h.group()
	default:
		h.commit()
		switch b := in.byte(); b % 8 {
		case 0:
			if b < 32 { // FLUSHALL, rarely
				h.flush()
				return
			}
			fallthrough
		case 1, 2, 3:
			h.sweep(int(in.byte()))
		default:
			h.len()
		}
	}
}

// invariant builds a decision on invariant key i (0, 1: the token
// buckets, 2: the log, 3: the fixed window, 4: the queue) with the key's
// parameters and an arbitrary cost, Scaled or not (which, with fixed
// parameters, changes nothing).
func (h *opsHarness) invariant(i int) opsTier {
	in := h.in
	var r engine.Request
	var key string
	b := in.byte()
	switch i {
	case 0, 1: // a token bucket call, or a peek
		key = opsBucketKeys[i]
		r = h.bucket[key]
		r.Cost = int64(b % 20)
		c := in.byte()
		r.ReadOnly = r.Cost == 0 || c&1 == 1
		r.Scaled = c&2 != 0
	case 2:
		key, r = opsLogKey, h.logReq
	case 3:
		key, r = opsFixedKey, h.fixedReq
	default:
		key, r = opsShapeKey, h.shapeReq
		r.Scaled = b&0x80 != 0
	}
	if i >= 2 {
		r.Cost = int64(b) % (r.Limit + 2)
		r.ReadOnly = r.Cost == 0
	}
	return opsTier{req: r, check: h.admit(key, r)}
}

// group adds an all-or-nothing group of 1 to 4 tiers: decisions on
// invariant keys (booked only if the group is charged) and on free keys
// with any parameters, sometimes a key twice or a tier that is not a
// decision.
func (h *opsHarness) group() {
	in := h.in
	n := 1 + int(in.byte()%4)
	tiers := make([]opsTier, 0, n)
	for range n {
		b := in.byte()
		switch {
		case b < 96:
			tiers = append(tiers, h.invariant(int(b%5)))
		case b < 250:
			key := opsFreeKeys[int(b)%len(opsFreeKeys)]
			r, err := h.build(int(in.byte()%7), []byte(key))
			if err != nil {
				if !opsKnownErr(err) {
					h.t.Fatalf("constructor error %v is not one of the engine's sentinels", err)
				}
				continue
			}
			r.Scaled = b&1 == 1
			tiers = append(tiers, opsTier{req: r})
		default:
			tiers = append(tiers, opsTier{req: engine.Request{Op: engine.OpExists, Key: []byte(opsFreeKeys[0])}})
		}
	}
	if len(tiers) == 0 {
		return
	}
	if len(h.pending)+len(tiers) > 64 {
		h.commit()
	}
	tiers[0].req.Tiers = uint16(len(tiers))
	for i, t := range tiers {
		p := opsPending{req: t.req, check: t.check}
		if i == 0 {
			p.group = len(tiers)
		}
		h.pending = append(h.pending, p)
	}
}

func (h *opsHarness) build(kind int, key []byte) (engine.Request, error) {
	in := h.in
	switch kind {
	case 0:
		return engine.TokenBucket(key, in.num(), in.rate(), in.num())
	case 1:
		return engine.Throttle(key, in.num(), in.num(), in.num(), in.num())
	case 2:
		return engine.GCRA(key, in.num(), in.num(), in.rate(), in.num())
	case 3:
		return engine.Fixed(key, in.num(), in.num(), in.num())
	case 4:
		return engine.Sliding(key, in.num(), in.num(), in.num())
	case 5:
		return engine.Log(key, in.num(), in.num(), in.num())
	}
	return engine.Shape(key, in.num(), in.rate(), in.num())
}

var opsSentinels = []error{
	engine.ErrBadCapacity, engine.ErrBadRate, engine.ErrBadCost, engine.ErrPeriodTooLong,
	engine.ErrZeroRate, engine.ErrBadBurst, engine.ErrBadPeriod, engine.ErrBadTokens,
	engine.ErrBadLimit, engine.ErrLimitTooLarge, engine.ErrLogLimitTooLarge,
	engine.ErrBadWindow, engine.ErrWindowTooLong,
}

func opsKnownErr(err error) bool {
	for _, s := range opsSentinels {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

func (h *opsHarness) add(r engine.Request, after func(engine.Result)) {
	h.pending = append(h.pending, opsPending{req: r, check: after})
	if len(h.pending) >= 64 {
		h.commit()
	}
}

// admit returns the bookkeeping of a call on an invariant key: its
// admissions are recorded and checked against the key's guarantee.
func (h *opsHarness) admit(key string, r engine.Request) func(engine.Result) {
	return func(res engine.Result) {
		if !res.Allowed || r.ReadOnly || r.Cost == 0 {
			return
		}
		at := h.shardNow[engine.ShardOf(r.Key, h.n)]
		ev := opsEvent{at: at, cost: r.Cost, start: at + res.Delay}
		evs := append(h.events[key], ev)
		h.events[key] = evs
		j := len(evs) - 1
		switch r.Op {
		case engine.OpGCRA:
			// At most Limit + W/T in any W ns: sum*T <= Limit*T + W.
			var sum int64
			for i := j; i >= 0; i-- {
				sum += evs[i].cost
				if sum*r.Interval > r.Limit*r.Interval+(at-evs[i].at) {
					h.t.Fatalf("token bucket %q (capacity %d, T %d ns) admitted %d tokens in %d ns: %+v",
						key, r.Limit, r.Interval, sum, at-evs[i].at, evs[i:])
				}
			}
		case engine.OpLog:
			var sum int64
			for i := j; i >= 0 && at-evs[i].at < r.Window; i-- {
				sum += evs[i].cost
			}
			if sum > r.Limit {
				h.t.Fatalf("sliding log %q (limit %d, window %d ns) admitted %d in one window: %+v", key, r.Limit, r.Window, sum, evs)
			}
		case engine.OpFixed:
			var sum int64
			for i := j; i >= 0 && evs[i].at/r.Window == at/r.Window; i-- {
				sum += evs[i].cost
			}
			if sum > r.Limit {
				h.t.Fatalf("fixed window %q (limit %d, window %d ns) admitted %d in one aligned window: %+v", key, r.Limit, r.Window, sum, evs)
			}
		case engine.OpShape:
			if res.Delay < 0 {
				h.t.Fatalf("shape %q admitted with delay %d", key, res.Delay)
			}
			if j > 0 {
				p := evs[j-1]
				if ev.start < p.start+p.cost*r.Interval {
					h.t.Fatalf("shape %q (T %d ns) starts a call at %d, before the previous one (at %d, cost %d) is served",
						key, r.Interval, ev.start, p.start, p.cost)
				}
			}
		}
	}
}

// commit applies the pending batch to the engine, and to the copy, whose
// results must be the same.
func (h *opsHarness) commit() {
	if len(h.pending) == 0 {
		return
	}
	reqs := make([]engine.Request, len(h.pending))
	for i, p := range h.pending {
		reqs[i] = p.req
	}
	now := h.clock()
	h.seen(now)
	res := make([]engine.Result, len(reqs))
	if err := h.e.Do(context.Background(), now, reqs, res); err != nil {
		h.t.Fatalf("Do: %v", err)
	}
	for i := range reqs {
		advance(&h.shardNow[engine.ShardOf(reqs[i].Key, h.n)], now)
	}
	if h.twin != nil {
		twin := make([]engine.Result, len(reqs))
		if err := h.twin.Do(context.Background(), now, reqs, twin); err != nil {
			h.t.Fatalf("copy Do: %v", err)
		}
		for i := range reqs {
			if twin[i] != res[i] {
				h.t.Fatalf("after round trip %d, request %d %+v at %d:\noriginal %+v\ncopy     %+v",
					h.trips, i, reqs[i], now, res[i], twin[i])
			}
		}
	}
	verr := engine.ValidateBatch(reqs)
	sawInvalid := false
	for i := 0; i < len(reqs); i++ {
		if n := h.pending[i].group; n > 0 {
			invalid, charged := opsCheckGroup(h.t, reqs[i:i+n], res[i:i+n])
			sawInvalid = sawInvalid || invalid
			for j := i; j < i+n && charged; j++ {
				if p := h.pending[j]; p.check != nil {
					p.check(res[j])
				}
			}
			i += n - 1
			continue
		}
		opsCheckResult(h.t, &reqs[i], &res[i])
		if p := h.pending[i]; p.check != nil && res[i].Err == nil {
			p.check(res[i])
		}
	}
	if (verr != nil) != sawInvalid {
		h.t.Fatalf("ValidateBatch says %v, but Do refused a group: %v", verr, sawInvalid)
	}
	h.pending = h.pending[:0]
}

// opsCheckGroup checks a group's results. It reports whether Do refused
// the group as ValidateBatch would (ErrDuplicateTier, ErrBadRequest), and
// whether every tier was charged (allowed), so the caller books them.
func opsCheckGroup(t *testing.T, reqs []engine.Request, res []engine.Result) (invalid, charged bool) {
	failed, wrong := 0, 0
	charged = true
	for i := range res {
		switch err := res[i].Err; {
		case err == nil:
			charged = charged && res[i].Allowed
		case errors.Is(err, engine.ErrDuplicateTier), errors.Is(err, engine.ErrBadRequest):
			invalid = true
		case errors.Is(err, engine.ErrGroupAborted):
			failed++
		case errors.Is(err, engine.ErrWrongType):
			failed++
			wrong++
		default:
			t.Fatalf("group %+v: tier %d: unexpected error %v", reqs, i, err)
		}
	}
	if invalid {
		for i := range res {
			if res[i] != (engine.Result{Err: res[0].Err}) {
				t.Fatalf("refused group %+v: results %+v are not all one error", reqs, res)
			}
		}
		return true, false
	}
	if failed > 0 {
		if failed != len(res) || wrong == 0 {
			t.Fatalf("failed group %+v: results %+v", reqs, res)
		}
		return false, false
	}
	for i := range reqs {
		opsCheckResult(t, &reqs[i], &res[i])
	}
	return false, charged
}

// opsCheckResult checks the ranges Result documents.
func opsCheckResult(t *testing.T, r *engine.Request, res *engine.Result) {
	bad := func(why string) {
		t.Helper()
		t.Fatalf("request %+v: result %+v: %s", *r, *res, why)
	}
	if res.Err != nil {
		if res.Err != engine.ErrWrongType {
			bad("unexpected error")
		}
		return
	}
	switch r.Op {
	case engine.OpDel, engine.OpExists:
		if res.Value != 0 && res.Value != 1 {
			bad("value not 0 or 1")
		}
		return
	case engine.OpTTL:
		if (res.Value == -2) != (res.Kind == engine.KindNone) || (res.Value != -2 && res.Value <= 0) {
			bad("TTL is neither -2 for a missing key nor positive for a live one")
		}
		return
	}
	switch {
	case res.Limit != r.Limit:
		bad("limit differs from the request's")
	case res.Remaining < 0 || res.Remaining > res.Limit:
		bad("remaining outside [0, limit]")
	case res.ResetAfter < 0:
		bad("negative reset_after")
	case res.Allowed && res.RetryAfter != 0:
		bad("allowed with a retry_after")
	case !res.Allowed && res.RetryAfter != -1 && res.RetryAfter <= 0:
		bad("denied with retry_after neither -1 nor positive")
	case !res.Allowed && (res.RetryAfter == -1) != (r.Cost > r.Limit):
		bad("retry_after is -1 exactly when the cost exceeds the limit")
	}
	if r.Op == engine.OpShape {
		switch {
		case res.Queued < 0 || res.Allowed && res.Queued > res.Limit:
			// A rejected call may see more: a queue built under another
			// rate or capacity is reported in this call's units.
			bad("queued outside [0, capacity]")
		case res.Allowed && res.Delay < 0, !res.Allowed && res.Delay != -1:
			bad("delay is -1 exactly when rejected")
		}
	}
}

func (h *opsHarness) flush() {
	if err := h.e.Flush(context.Background()); err != nil {
		h.t.Fatal(err)
	}
	if h.twin != nil {
		if err := h.twin.Flush(context.Background()); err != nil {
			h.t.Fatal(err)
		}
	}
	clear(h.events)
}

func (h *opsHarness) sweep(budget int) {
	now := h.clock()
	h.seen(now)
	if _, _, err := h.e.Sweep(context.Background(), now, budget); err != nil {
		h.t.Fatal(err)
	}
	h.advanceAll(now)
	if h.twin != nil {
		if _, _, err := h.twin.Sweep(context.Background(), now, budget); err != nil {
			h.t.Fatal(err)
		}
	}
}

func (h *opsHarness) len() {
	now := h.clock()
	h.seen(now)
	n, err := h.e.Len(context.Background(), now)
	if err != nil {
		h.t.Fatal(err)
	}
	h.advanceAll(now)
	if h.twin != nil {
		m, err := h.twin.Len(context.Background(), now)
		if err != nil {
			h.t.Fatal(err)
		}
		if m != n {
			h.t.Fatalf("after round trip %d, DBSIZE at %d: original %d, copy %d", h.trips, now, n, m)
		}
	}
}

// export returns e's records sorted by key, and the clock.
func opsExport(t *testing.T, e *engine.Engine, now int64) ([]engine.Record, int64) {
	var recs []engine.Record
	clock, err := e.Export(context.Background(), now, func(r engine.Record) error {
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		t.Fatalf("Export: %v", err)
	}
	persist.SortRecords(recs)
	return recs, clock
}

// roundTrip snapshots the engine through the persist format into a fresh
// engine, which then runs in lockstep with it. With several shards the
// snapshot is taken at the largest time seen, as the Raft FSM does: each
// shard keeps its own clock, and a snapshot has one.
func (h *opsHarness) roundTrip() {
	now := h.clock()
	if h.n > 1 || h.twin != nil && h.twinN > 1 {
		now = max(now, h.maxSeen)
	}
	h.seen(now)
	recs, clock := opsExport(h.t, h.e, now)
	h.advanceAll(now)
	if h.twin != nil {
		twin, twinClock := opsExport(h.t, h.twin, now)
		if twinClock != clock || !reflect.DeepEqual(twin, recs) {
			h.t.Fatalf("before round trip %d, at %d: the copy's state differs:\noriginal %d %s\ncopy     %d %s",
				h.trips+1, now, clock, opsShow(recs), twinClock, opsShow(twin))
		}
		h.twin.Close()
		h.twin = nil
	}
	h.trips++
	var buf bytes.Buffer
	if err := persist.Encode(&buf, persist.Header{ClockNanos: clock}, recs); err != nil {
		h.t.Fatalf("persist.Encode of exported records: %v", err)
	}
	hdr, got, err := persist.Decode(&buf)
	if err != nil {
		h.t.Fatalf("persist.Decode of a snapshot just encoded: %v", err)
	}
	if hdr.ClockNanos != clock || len(got) != len(recs) || (len(recs) > 0 && !reflect.DeepEqual(got, recs)) {
		h.t.Fatalf("snapshot round trip: clock %d, %s; want clock %d, %s", hdr.ClockNanos, opsShow(got), clock, opsShow(recs))
	}
	h.twinN = h.n
	if h.clamp {
		h.twinN = 1 + int(h.in.byte()%4)
	}
	h.twin = engine.New(h.twinN)
	if err := h.twin.Import(context.Background(), hdr.ClockNanos, got); err != nil {
		h.t.Fatalf("Import refuses what Export produced: %v", err)
	}
	again, againClock := opsExport(h.t, h.twin, clock)
	if againClock != clock || !reflect.DeepEqual(again, recs) {
		h.t.Fatalf("after Import at %d: the copy exports\n%d %s\nwant\n%d %s", clock, againClock, opsShow(again), clock, opsShow(recs))
	}
}

func opsShow(recs []engine.Record) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d records:", len(recs))
	for _, r := range recs {
		f := r.Fields
		if len(f) > 6 {
			f = append(slices.Clip(f[:6]), -999)
		}
		fmt.Fprintf(&b, " %q/%d%v", r.Key, r.Kind, f)
	}
	return b.String()
}
