package engine

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/internal/offheap"
)

func setNoCreate(t *testing.T, e *Engine, on bool) {
	t.Helper()
	if err := e.SetNoCreate(context.Background(), on); err != nil {
		t.Fatal(err)
	}
}

func fixedReq(t *testing.T, key string, limit, windowMs, cost int64) Request {
	t.Helper()
	r, err := Fixed([]byte(key), limit, windowMs, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func logReq(t *testing.T, key string, limit, windowMs, cost int64) Request {
	t.Helper()
	r, err := Log([]byte(key), limit, windowMs, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestNoCreate: in no-create mode, only requests that would store state
// under a key that holds none are refused; everything on existing keys,
// reads and deletions work; turning it off restores creation.
func TestNoCreate(t *testing.T) {
	e := newEngine(t, 2)
	// "old" is a bucket of 10 tokens at 1 token/s with 5 taken at t0: it
	// is live until t0+5s. "win" is a fixed window of 60 s.
	do1(t, e, t0, bucket(t, "old", 10, 1, 5))
	do1(t, e, t0, fixedReq(t, "win", 10, 60_000, 1))
	setNoCreate(t, e, true)
	rows := []struct {
		name    string
		at      int64
		req     Request
		wantErr error
		allowed bool
	}{
		{"new bucket refused", t0, bucket(t, "new", 10, 1, 1), ErrOOM, false},
		{"new fixed window refused", t0, fixedReq(t, "new-win", 10, 60_000, 1), ErrOOM, false},
		{"new log refused", t0, logReq(t, "new-log", 10, 60_000, 1), ErrOOM, false},
		{"existing bucket charged", t0 + sec, bucket(t, "old", 10, 1, 1), nil, true},
		{"existing window charged", t0 + sec, fixedReq(t, "win", 10, 60_000, 1), nil, true},
		{"peek on a missing key", t0 + sec, peekReq(t, "new", 10, 1, 1), nil, true},
		{"cost 0 on a missing key", t0 + sec, bucket(t, "new", 10, 1, 0), nil, true},
		{"wrong type is still wrong type", t0 + sec, fixedReq(t, "old", 10, 60_000, 1), ErrWrongType, false},
		// old: 5 taken at t0, 1 more at t0+1s (4 refilled by then): TAT
		// t0+6s; full again (empty state) from then on.
		{"bucket full again counts as missing", t0 + 6*sec, bucket(t, "old", 10, 1, 1), ErrOOM, false},
	}
	for _, r := range rows {
		got := do1(t, e, r.at, r.req)
		if !errors.Is(got.Err, r.wantErr) || (r.wantErr == nil && got.Allowed != r.allowed) {
			t.Errorf("%s: got %+v, want err %v allowed %v", r.name, got, r.wantErr, r.allowed)
		}
	}
	at := t0 + 6*sec
	for _, k := range []string{"new", "new-win", "new-log", "old"} {
		if exists(t, e, at, k) {
			t.Errorf("%s exists after refused creations", k)
		}
	}
	if got := do1(t, e, at, keyReq(OpDel, "win")); got.Value != 1 {
		t.Errorf("DEL win in no-create mode = %+v, want 1", got)
	}
	setNoCreate(t, e, false)
	if got := do1(t, e, at, bucket(t, "new", 10, 1, 1)); got.Err != nil || !got.Allowed {
		t.Errorf("creation after no-create mode ends = %+v", got)
	}
}

// TestNoCreateGroupFailsWhole: a group with a tier that would create a key
// is refused whole in no-create mode, so no tier is charged.
func TestNoCreateGroupFailsWhole(t *testing.T) {
	e := newEngine(t, 2)
	do1(t, e, t0, bucket(t, "tier-old", 10, 1, 1))
	setNoCreate(t, e, true)
	a, b := bucket(t, "tier-old", 10, 1, 1), bucket(t, "tier-new", 10, 1, 1)
	a.Tiers = 2
	res := make([]Result, 2)
	if err := e.Do(context.Background(), t0, []Request{a, b}, res); err != nil {
		t.Fatal(err)
	}
	if !errors.Is(res[1].Err, ErrOOM) || !errors.Is(res[0].Err, ErrGroupAborted) {
		t.Fatalf("group results %+v, want [aborted, OOM]", res)
	}
	if got := do1(t, e, t0, peekReq(t, "tier-old", 10, 1, 1)); got.Remaining != 8 {
		t.Errorf("tier-old remaining %d after the refused group, want 8 (one token taken before)", got.Remaining)
	}
}

// TestEvictOrder: with the whole hash space as the sample, Evict removes
// the keys whose state empties soonest (buckets closest to full) and
// leaves the rest; keys already empty are not candidates.
func TestEvictOrder(t *testing.T) {
	e := newEngine(t, 3)
	// Bucket of 100 tokens at 1 token/s: taking c tokens at t0 leaves the
	// key live until t0 + c seconds.
	for i, c := range []int64{50, 3, 90, 7, 1, 60} {
		do1(t, e, t0, bucket(t, fmt.Sprintf("k%d", i), 100, 1, c))
	}
	do1(t, e, t0, fixedReq(t, "window", 10, 20_000, 1)) // empties at the next multiple of 20 s
	do1(t, e, t0, bucket(t, "gone", 100, 1, 2))         // empty from t0+2s
	all := EvictRange{From: 0, To: math.MaxUint64}

	at := t0 + 2*sec
	all.N = 2
	n, err := e.Evict(context.Background(), at, all)
	if err != nil || n != 2 {
		t.Fatalf("Evict = %d, %v; want 2", n, err)
	}
	// Left at t0+2s: k4 (1, already empty), gone (empty), k1 (1 s left),
	// k3 (5 s), k0, k5, k2, window (up to 20 s): k1 and k3 go first.
	if got, want := liveKeys(t, e, at), []string{"k0", "k2", "k5", "window"}; !slices.Equal(got, want) {
		t.Fatalf("after evicting 2: %v, want %v", got, want)
	}
	all.N = 10
	if n, err := e.Evict(context.Background(), at, all); err != nil || n != 4 {
		t.Fatalf("Evict(10) = %d, %v; want the 4 live keys", n, err)
	}
	if n := length(t, e, at); n != 0 {
		t.Errorf("%d keys left", n)
	}
}

// liveKeys lists the keys live at now, sorted.
func liveKeys(t *testing.T, e *Engine, now int64) []string {
	t.Helper()
	var keys []string
	if _, err := e.Export(context.Background(), now, func(r Record) error {
		keys = append(keys, r.Key)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	slices.Sort(keys)
	return keys
}

// TestEvictIsDeterministic: two engines with the same live keys but other
// shard counts and other histories (deleted keys, leaving tombstones and
// other table sizes, and expired keys one of them swept already) evict
// the same keys, round after round over a moving range.
func TestEvictIsDeterministic(t *testing.T) {
	a, b := newEngine(t, 1), newEngine(t, 5)
	const keys = 20_000
	for i := range keys {
		// Costs cycle so that many keys share an expiry: ties are broken
		// by hash, then key.
		r := bucket(t, fmt.Sprintf("user:%08d", i), 1000, 1, 1+int64(i%37))
		do1(t, a, t0, r)
		do1(t, b, t0, r)
	}
	for i := range keys {
		do1(t, b, t0, bucket(t, fmt.Sprintf("extra:%d", i), 1000, 1, 1))
		if i%3 == 0 {
			do1(t, b, t0, keyReq(OpDel, fmt.Sprintf("extra:%d", i)))
		}
	}
	// b's extra keys are empty from t0+1s; a never had them, b sweeps
	// half of them.
	at := t0 + 2*sec
	if _, _, err := b.Sweep(context.Background(), at, keys/2); err != nil {
		t.Fatal(err)
	}
	live := length(t, a, at)
	const width = math.MaxUint64 / 16
	for round := range uint64(20) {
		r := EvictRange{From: round % 16 * width, To: round%16*width + width - 1, N: 50}
		na, err := a.Evict(context.Background(), at, r)
		if err != nil {
			t.Fatal(err)
		}
		nb, err := b.Evict(context.Background(), at, r)
		if err != nil {
			t.Fatal(err)
		}
		if na != nb || na != 50 {
			t.Fatalf("round %d: evicted %d and %d, want 50", round, na, nb)
		}
	}
	ka, kb := liveKeys(t, a, at), liveKeys(t, b, at)
	if len(ka) != live-20*50 || !slices.Equal(ka, kb) {
		t.Fatalf("after eviction: %d and %d keys, equal %v", len(ka), len(kb), slices.Equal(ka, kb))
	}
}

// TestUsage: stored-key counts and charged bytes follow inserts, deletions,
// rebuilds and flushes without a walk.
func TestUsage(t *testing.T) {
	e := newEngine(t, 2)
	usage := func() Usage {
		t.Helper()
		u, err := e.Usage(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	const n = 10_000
	for i := range n {
		do1(t, e, t0, bucket(t, fmt.Sprintf("b%05d", i), 10, 1, 1)) // 6-byte keys
	}
	for i := range 100 {
		do1(t, e, t0, fixedReq(t, fmt.Sprintf("f%05d", i), 10, 60_000, 1))
	}
	u := usage()
	if u.Keys[KindGCRA] != n || u.Keys[KindFixed] != 100 || u.Stored != n+100 {
		t.Fatalf("usage %+v, want %d gcra and 100 fixed", u, n)
	}
	if want := int64(n+100) * (SlotCharge + 6); u.Charged != want {
		t.Errorf("charged %d, want %d", u.Charged, want)
	}
	for i := range n / 2 {
		do1(t, e, t0, keyReq(OpDel, fmt.Sprintf("b%05d", i)))
	}
	if u := usage(); u.Keys[KindGCRA] != n/2 || u.Charged != int64(n/2+100)*(SlotCharge+6) {
		t.Errorf("after deleting half: %+v", u)
	}
	// Expired keys stay stored until dropped; a sweep drops them and a
	// rebuild keeps the counts.
	if _, _, err := e.Sweep(context.Background(), t0+2*sec, 1<<20); err != nil {
		t.Fatal(err)
	}
	if u := usage(); u.Stored != 100 || u.Keys[KindFixed] != 100 {
		t.Errorf("after the sweep: %+v, want the 100 windows", u)
	}
	if err := e.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if u := usage(); u.Stored != 0 || u.Charged != 0 || u.Keys != [NumKinds]int{} {
		t.Errorf("after flush: %+v", u)
	}
}

// TestOffHeapFollowsTables: large tables are mapped off the heap, and
// their memory is returned as soon as they are dropped (growth, flush),
// or when the last export reading a replaced table ends.
func TestOffHeapFollowsTables(t *testing.T) {
	base := OffHeapBytes()
	s := newShard(1)
	s.advance(t0)
	var out Result
	for i := range 100_000 {
		r := bucket(t, fmt.Sprintf("user:%016d", i), 10, 1, 1)
		s.apply(&r, &out)
	}
	if mapsSupported() {
		if got, want := OffHeapBytes()-base, int64(len(s.tab.slots)*16+cap(s.tab.arena)); got != want {
			t.Fatalf("off-heap bytes %d, want the table's %d (old arrays freed on growth)", got, want)
		}
	}
	x := &exporter{}
	x.start(s)
	x.step()
	held := OffHeapBytes()
	s.flush() // the export still holds the old arrays
	if OffHeapBytes() != held {
		t.Fatalf("flush freed arrays an export still walks")
	}
	for _, more := x.step(); more; _, more = x.step() {
	}
	if got := OffHeapBytes() - base; got != 0 {
		t.Fatalf("%d off-heap bytes left after the export ended on a flushed shard", got)
	}
}

func mapsSupported() bool {
	mem := offheap.Map(mmapMin)
	if mem == nil {
		return false
	}
	offheap.Unmap(mem)
	return true
}

// TestDeleteMatching: every matching key goes, of every kind, live or
// empty; the count is of those with a state at the given time (as Export
// lists them); the others stay with their state; the table stays usable.
func TestDeleteMatching(t *testing.T) {
	e := newEngine(t, 2)
	// A bucket with 1 of 10 taken at 1 token/s is empty a second later
	// (one with all 10 taken, ten seconds later);
	// a fixed window or a log lives for its minute. (A shard's clock
	// never goes back: every key of a time first, then the next time.)
	for i := range 300 {
		do1(t, e, t0, bucket(t, fmt.Sprintf("drop%d", i), 10, 1, 1))
		do1(t, e, t0, bucket(t, fmt.Sprintf("keep%d", i), 10, 1, 10)) // live for 10 s
		do1(t, e, t0, fixedReq(t, fmt.Sprintf("dropwin%d", i), 10, 60_000, 1))
	}
	for i := range 300 {
		do1(t, e, t0+sec, logReq(t, fmt.Sprintf("droplog%d", i), 10, 60_000, 1))
	}
	now := t0 + 2*sec // the buckets are empty by now, the windows and logs are not
	n, err := e.DeleteMatching(context.Background(), now, func(k []byte) bool { return len(k) > 4 && string(k[:4]) == "drop" })
	if err != nil {
		t.Fatal(err)
	}
	if n != 600 {
		t.Fatalf("DeleteMatching counted %d live keys, want 600 (windows and logs; the dropped buckets were empty)", n)
	}
	if got, err := e.Len(context.Background(), now); err != nil || got != 300 {
		t.Fatalf("Len after: %d (%v), want the 300 kept buckets", got, err)
	}
	// The table holds the kept keys and nothing else, and takes new ones.
	u, err := e.Usage(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if u.Stored != 300 || u.Keys[KindGCRA] != 300 {
		t.Fatalf("%d keys in the tables after the deletion (%d buckets), want the 300 kept buckets", u.Stored, u.Keys[KindGCRA])
	}
	// keep0 kept its state: 2 of its 10 tokens back after 2 s, 1 left.
	if r := do1(t, e, now, bucket(t, "keep0", 10, 1, 1)); !r.Allowed || r.Remaining != 1 {
		t.Fatalf("keep0 after the deletion: %+v, want allowed with 1 left", r)
	}
	r := do1(t, e, now, fixedReq(t, "dropwin0", 10, 60_000, 1))
	if !r.Allowed || r.Remaining != 9 {
		t.Fatalf("a deleted window used again: %+v, want a fresh window with 9 left", r)
	}
}
