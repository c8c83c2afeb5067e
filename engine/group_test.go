package engine

import (
	"context"
	"errors"
	"fmt"
	"testing"
)

// keyOn returns a key made of prefix and a number that an n-shard engine
// puts on shard si.
func keyOn(n, si int, prefix string) string {
	for i := 0; ; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if ShardOf([]byte(k), n) == si {
			return k
		}
	}
}

// groupLayouts place the logical keys a..h of the group tests: on a
// 1-shard engine, all on one shard of four (the cheap path), and spread
// over four shards (the coordinator path).
var groupLayouts = []struct {
	name   string
	shards int
	shard  func(i int) int // the shard of the i-th logical key
}{
	{"1 shard", 1, func(int) int { return 0 }},
	{"one shard of 4", 4, func(int) int { return 2 }},
	{"across 4 shards", 4, func(i int) int { return i % 4 }},
}

// gTier is one request of a group test, on a logical key, with the
// result it must get (only Allowed, Remaining and Err are compared).
type gTier struct {
	op        Op
	key       string // a..h
	limit     int64
	cost      int64
	allowed   bool
	remaining int64
	err       error
}

// gItem is a plain request (one tier, group false) or a group.
type gItem struct {
	group bool
	tiers []gTier
}

type gStep struct {
	name  string
	at    int64
	batch []gItem
}

// T and G build items: a plain request and a group.
func T(op Op, key string, limit, cost int64, allowed bool, remaining int64) gItem {
	return gItem{tiers: []gTier{{op: op, key: key, limit: limit, cost: cost, allowed: allowed, remaining: remaining}}}
}

func G(tiers ...gTier) gItem { return gItem{group: true, tiers: tiers} }

func tier(op Op, key string, limit, cost int64, allowed bool, remaining int64) gTier {
	return gTier{op: op, key: key, limit: limit, cost: cost, allowed: allowed, remaining: remaining}
}

func tierErr(op Op, key string, limit, cost int64, err error) gTier {
	return gTier{op: op, key: key, limit: limit, cost: cost, err: err}
}

// build makes the request of tg on the real key: token buckets and queues
// refill at 1 per second, windows are 1 s.
func (tg gTier) build(t *testing.T, key string) Request {
	t.Helper()
	var r Request
	var err error
	switch tg.op {
	case OpGCRA:
		r, err = TokenBucket([]byte(key), tg.limit, 1, tg.cost)
	case OpShape:
		r, err = Shape([]byte(key), tg.limit, 1, tg.cost)
	case OpFixed:
		r, err = Fixed([]byte(key), tg.limit, 1000, tg.cost)
	case OpSliding:
		r, err = Sliding([]byte(key), tg.limit, 1000, tg.cost)
	case OpLog:
		r, err = Log([]byte(key), tg.limit, 1000, tg.cost)
	default:
		r = Request{Op: tg.op, Key: []byte(key)}
	}
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func runGroupSteps(t *testing.T, steps []gStep) {
	for _, l := range groupLayouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEngine(t, l.shards)
			keys := map[string]string{}
			for i, name := range "abcdefgh" {
				keys[string(name)] = keyOn(l.shards, l.shard(i), string(name))
			}
			for _, st := range steps {
				var reqs []Request
				var want []gTier
				for _, it := range st.batch {
					for j, tg := range it.tiers {
						r := tg.build(t, keys[tg.key])
						if it.group && j == 0 {
							r.Tiers = uint16(len(it.tiers))
						}
						reqs = append(reqs, r)
						want = append(want, tg)
					}
				}
				// Do refuses what ValidateBatch refuses, in the results.
				var invalid error
				for _, w := range want {
					if errors.Is(w.err, ErrDuplicateTier) || errors.Is(w.err, ErrBadRequest) {
						invalid = w.err
					}
				}
				if err := ValidateBatch(reqs); err != invalid {
					t.Fatalf("%s: ValidateBatch = %v, want %v", st.name, err, invalid)
				}
				res := make([]Result, len(reqs))
				if err := e.Do(context.Background(), st.at, reqs, res); err != nil {
					t.Fatal(err)
				}
				for i, w := range want {
					g := res[i]
					if !errors.Is(g.Err, w.err) || (w.err == nil && g.Err != nil) ||
						(w.err == nil && (g.Allowed != w.allowed || g.Remaining != w.remaining)) {
						t.Errorf("%s: request %d (%s): got %+v, want allowed %v remaining %d err %v",
							st.name, i, w.key, g, w.allowed, w.remaining, w.err)
					}
					if w.err != nil && (g.Allowed || g.Remaining != 0) {
						t.Errorf("%s: request %d (%s): error result carries a decision: %+v", st.name, i, w.key, g)
					}
				}
			}
		})
	}
}

// TestGroupAllOrNothing: a group is charged only if every tier allows,
// and then every tier is; its results say which tier decided.
func TestGroupAllOrNothing(t *testing.T) {
	const A, F, S, L, Q = OpGCRA, OpFixed, OpSliding, OpLog, OpShape
	runGroupSteps(t, []gStep{
		{"all allow: all charged", t0, []gItem{G(
			tier(A, "a", 3, 1, true, 2), tier(A, "b", 2, 1, true, 1), tier(A, "c", 5, 1, true, 4))}},
		{"b drained by a plain call", t0, []gItem{T(A, "b", 2, 1, true, 0)}},
		{"b rejects: read-only results", t0, []gItem{G(
			tier(A, "a", 3, 1, true, 1), tier(A, "b", 2, 1, false, 0), tier(A, "c", 5, 1, true, 3))}},
		{"nothing was charged", t0, []gItem{
			T(A, "a", 3, 0, true, 2), T(A, "b", 2, 0, true, 0), T(A, "c", 5, 0, true, 4)}},
		{"a group of one", t0, []gItem{G(tier(A, "c", 5, 1, true, 3))}},
		{"1 s later b has a token: all charged", t0 + sec, []gItem{G(
			tier(A, "a", 3, 1, true, 2), tier(A, "b", 2, 1, true, 0), tier(A, "c", 5, 1, true, 3))}},
		{"d holds a fixed window", t0 + sec, []gItem{T(F, "d", 5, 1, true, 4)}},
		{"wrong type: that tier says so, the others are aborted", t0 + sec, []gItem{G(
			tierErr(A, "a", 3, 1, ErrGroupAborted), tierErr(A, "d", 5, 1, ErrWrongType), tierErr(A, "c", 5, 1, ErrGroupAborted))}},
		{"the aborted tiers were not charged", t0 + sec, []gItem{T(A, "a", 3, 0, true, 2), T(A, "c", 5, 0, true, 3)}},
		{"a key twice", t0 + sec, []gItem{G(
			tierErr(A, "a", 3, 1, ErrDuplicateTier), tierErr(A, "a", 3, 1, ErrDuplicateTier))}},
		{"not a decision", t0 + sec, []gItem{G(
			tierErr(A, "a", 3, 1, ErrBadRequest), tierErr(OpDel, "c", 0, 0, ErrBadRequest))}},
		{"the refused groups charged nothing", t0 + sec, []gItem{T(A, "a", 3, 0, true, 2), T(A, "c", 5, 0, true, 3)}},
		{"every algorithm in one group", t0 + sec, []gItem{G(
			tier(F, "e", 3, 1, true, 2), tier(S, "f", 3, 1, true, 2), tier(L, "g", 2, 1, true, 1),
			tier(Q, "h", 3, 1, true, 2), tier(A, "a", 3, 1, true, 1))}},
		{"the log rejects cost 2: none charged", t0 + sec, []gItem{G(
			tier(F, "e", 3, 2, true, 0), tier(S, "f", 3, 2, true, 0), tier(L, "g", 2, 2, false, 1),
			tier(Q, "h", 3, 2, true, 0), tier(A, "a", 3, 1, true, 0))}},
		{"the queue rejects cost 3", t0 + sec, []gItem{G(
			tier(F, "e", 3, 1, true, 1), tier(Q, "h", 3, 3, false, 2))}},
		{"peeks: nothing charged", t0 + sec, []gItem{
			T(F, "e", 3, 0, true, 2), T(S, "f", 3, 0, true, 2), T(L, "g", 2, 0, true, 1), T(Q, "h", 3, 0, true, 2), T(A, "a", 3, 0, true, 1)}},
		{"slice order around a group", t0 + 2*sec, []gItem{
			T(A, "b", 2, 1, true, 0),
			G(tier(A, "a", 3, 1, true, 1), tier(A, "b", 2, 1, false, 0)),
			G(tier(A, "a", 3, 2, true, 0), tier(A, "c", 5, 1, true, 3)),
			T(A, "a", 3, 1, false, 0),
			T(A, "c", 5, 1, true, 2)}},
	})
}

// TestGroupChanges: a charged group counts one change per tier that
// stored state; a rejected or failed one counts none, whichever path it
// takes.
func TestGroupChanges(t *testing.T) {
	for _, l := range groupLayouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEngine(t, l.shards)
			var k [3]string
			for i := range k {
				k[i] = keyOn(l.shards, l.shard(i), fmt.Sprintf("k%d-", i))
			}
			group := func(costs ...int64) []Request {
				var reqs []Request
				for i, c := range costs {
					reqs = append(reqs, bucket(t, k[i], 2, 1, c))
				}
				reqs[0].Tiers = uint16(len(reqs))
				return reqs
			}
			do := func(reqs []Request) {
				if err := e.Do(context.Background(), t0, reqs, make([]Result, len(reqs))); err != nil {
					t.Fatal(err)
				}
			}
			do(group(1, 1, 1))
			if got := e.Changes(); got != 3 {
				t.Errorf("charged group: %d changes, want 3", got)
			}
			do(group(1, 2, 1)) // k1 has 1 left: rejected
			if got := e.Changes(); got != 3 {
				t.Errorf("rejected group: %d changes, want 3", got)
			}
			do(group(1, 1, 0)) // the third tier peeks
			if got := e.Changes(); got != 5 {
				t.Errorf("group with a peek: %d changes, want 5", got)
			}
		})
	}
}

// TestGroupRescaleOnRejection: the tiers of a rejected group store the
// rescaled form of scaled state met with new parameters (no charge), as a
// denied request would.
func TestGroupRescaleOnRejection(t *testing.T) {
	for _, l := range groupLayouts {
		t.Run(l.name, func(t *testing.T) {
			e := newEngine(t, l.shards)
			a, b := keyOn(l.shards, l.shard(0), "a"), keyOn(l.shards, l.shard(1), "b")
			do1(t, e, t0, scaledBucket(t, a, 20, 10, 5)) // 500 ms of 2 s
			do1(t, e, t0, scaledBucket(t, b, 1, 10, 1))  // full
			reqs := []Request{scaledBucket(t, a, 20, 20, 1), scaledBucket(t, b, 1, 10, 1)}
			reqs[0].Tiers = 2
			res := make([]Result, 2)
			if err := e.Do(context.Background(), t0, reqs, res); err != nil {
				t.Fatal(err)
			}
			if !res[0].Allowed || res[1].Allowed {
				t.Fatalf("results %+v", res)
			}
			if got := ttl(t, e, t0, a); got != 250*ms {
				t.Errorf("a's TTL %d, want 250 ms (rescaled to 20/s, not charged)", got)
			}
		})
	}
}

// TestValidateBatch: ValidateBatch refuses every malformed group.
func TestValidateBatch(t *testing.T) {
	a := bucket(t, "a", 3, 1, 1)
	b := bucket(t, "b", 3, 1, 1)
	c := bucket(t, "c", 3, 1, 1)
	with := func(r Request, tiers uint16) Request { r.Tiers = tiers; return r }
	del := keyReq(OpDel, "d")
	for _, c := range []struct {
		name string
		reqs []Request
		want error
	}{
		{"empty", nil, nil},
		{"plain", []Request{a, b, del}, nil},
		{"group of 3", []Request{with(a, 3), b, c}, nil},
		{"group of 1", []Request{with(a, 1), b}, nil},
		{"two groups and plain", []Request{del, with(a, 2), b, with(c, 2), a, b}, nil},
		{"group overruns the batch", []Request{with(a, 3), b}, ErrBadRequest},
		{"group of 65535 in 2", []Request{with(a, 65535), b}, ErrBadRequest},
		{"nested group", []Request{with(a, 3), with(b, 2), c}, ErrBadRequest},
		{"member with Tiers 1", []Request{with(a, 2), with(b, 1)}, ErrBadRequest},
		{"a delete in a group", []Request{with(a, 2), del}, ErrBadRequest},
		{"a group starting with a delete", []Request{with(del, 2), a}, ErrBadRequest},
		{"same key twice", []Request{with(a, 3), b, a}, ErrDuplicateTier},
		{"same key in separate groups is fine", []Request{with(a, 2), b, with(a, 2), b}, nil},
		{"invalid member", []Request{with(a, 2), {Op: OpGCRA, Key: []byte("z")}}, ErrBadRequest},
	} {
		if got := ValidateBatch(c.reqs); !errors.Is(got, c.want) || (c.want == nil && got != nil) {
			t.Errorf("%s: ValidateBatch = %v, want %v", c.name, got, c.want)
		}
	}
	// A large group with a duplicate, found through the map.
	big := make([]Request, 40)
	for i := range big {
		big[i] = bucket(t, fmt.Sprint("k", i), 3, 1, 1)
	}
	big[0].Tiers = 40
	if err := ValidateBatch(big); err != nil {
		t.Errorf("40 distinct tiers: %v", err)
	}
	big[39].Key = big[7].Key
	if err := ValidateBatch(big); !errors.Is(err, ErrDuplicateTier) {
		t.Errorf("40 tiers with a duplicate: %v", err)
	}
}
