package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// batchV1 is the entry type of a batch in the first request encoding,
// which replicas read from old logs but nothing writes any more
// (package entry); the tests build such entries with appendRequest.
const batchV1 byte = 1

// appendRequest encodes r in the first request encoding (batchV1
// entries, msgBatchV1 messages).
func appendRequest(dst []byte, r *engine.Request) []byte {
	var flags byte
	if r.ReadOnly {
		flags |= 1
	}
	dst = append(dst, byte(r.Op), flags)
	dst = binary.AppendUvarint(dst, uint64(len(r.Key)))
	dst = append(dst, r.Key...)
	dst = binary.AppendVarint(dst, r.Interval)
	dst = binary.AppendVarint(dst, r.Limit)
	dst = binary.AppendVarint(dst, r.Window)
	dst = binary.AppendVarint(dst, r.Cost)
	return dst
}

// appendRequests encodes reqs one after another (a chunk).
func appendRequests(dst []byte, reqs []engine.Request) []byte {
	for i := range reqs {
		dst = appendRequest(dst, &reqs[i])
	}
	return dst
}

// fillFields sets every field of the struct v points to a distinct non-zero
// value, and fails on a field type it does not know, so that a new field of
// a new type is noticed too.
func fillFields(t *testing.T, v reflect.Value, rng *rand.Rand) {
	t.Helper()
	v = v.Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Uint8, reflect.Uint16:
			f.SetUint(uint64(1 + rng.IntN(200)))
		case reflect.Int64:
			x := rng.Int64()
			if rng.IntN(2) == 0 {
				x = -x
			}
			f.SetInt(x)
		case reflect.Slice:
			if f.Type().Elem().Kind() != reflect.Uint8 {
				t.Fatalf("field %s: unhandled slice type %s", name, f.Type())
			}
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetBytes(b)
		case reflect.String:
			b := make([]byte, 1+rng.IntN(40))
			for j := range b {
				b[j] = byte(rng.IntN(256))
			}
			f.SetString(string(b))
		case reflect.Interface:
			// Result.Err: set separately; Request.Cmd: OpCmd only.
		default:
			t.Fatalf("field %s: unhandled kind %s: teach the encoding (and this test) about it", name, f.Kind())
		}
	}
}

// TestRequestEncodingCarriesEveryField fails when engine.Request gains a
// field the log entry encoding does not carry: every field is set to a
// non-zero value and must survive the round trip. A new field needs a new
// command type (entry.go) and an update of the list below.
func abs64(x int64) int64 {
	if x < 0 {
		if x == -x { // MinInt64
			return 0
		}
		return -x
	}
	return x
}

func TestRequestEncodingCarriesEveryField(t *testing.T) {
	// Cmd travels in OpCmd requests only, as the command's own encoding
	// (kv.Append): kv_entry_test.go round-trips those.
	want := []string{"Cmd", "Cost", "Interval", "Key", "Limit", "Op", "ReadOnly", "Scaled", "Tiers", "Window"} // sorted
	var got []string
	rt := reflect.TypeOf(engine.Request{})
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Name)
	}
	slices.Sort(got)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("engine.Request fields are %v; the log encoding carries %v: extend appendRequest/decoder.request and add a command type", got, want)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 200 {
		var reqs []engine.Request
		for range 1 + rng.IntN(5) {
			var r engine.Request
			fillFields(t, reflect.ValueOf(&r), rng)
			r.ReadOnly = rng.IntN(2) == 0
			// Keep every field non-zero but within engine.Validate's bounds:
			// the decoder refuses requests no constructor builds.
			r.Op = engine.OpFixed
			r.Limit = 1 + abs64(r.Limit)%engine.MaxLimit
			r.Window = 1 + abs64(r.Window)%engine.MaxDuration
			r.Cost = abs64(r.Cost)
			r.Tiers = 0
			reqs = append(reqs, r)
		}
		// One all-or-nothing group of them all (entry.Batch carries Tiers
		// and Scaled; batchV1, which cannot, is only read).
		reqs[0].Tiers = uint16(len(reqs))
		buf := entry.AppendHeader(nil, entry.Batch, rng.Int64())
		buf = appendUvarintCount(buf, len(reqs))
		buf = entry.AppendRequests(buf, reqs, nil)
		e, err := entry.Decode(buf)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(e.Reqs, reqs) {
			t.Fatalf("round trip:\n got %+v\nwant %+v", e.Reqs, reqs)
		}
	}
}

func appendUvarintCount(dst []byte, n int) []byte {
	d := make([]byte, 0, 10)
	for v := uint64(n); ; v >>= 7 {
		if v < 0x80 {
			d = append(d, byte(v))
			break
		}
		d = append(d, byte(v)|0x80)
	}
	return append(dst, d...)
}

// TestResultEncodingCarriesEveryField: the same for forwarded results.
func TestResultEncodingCarriesEveryField(t *testing.T) {
	want := []string{"Err", "Allowed", "Limit", "Remaining", "RetryAfter", "ResetAfter", "Delay", "Queued", "Value", "Kind", "Reply"}
	var got []string
	rt := reflect.TypeOf(engine.Result{})
	for i := range rt.NumField() {
		got = append(got, rt.Field(i).Name)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("engine.Result fields are %v; the forward encoding carries %v: extend appendResult/decoder.result", got, want)
	}
	rng := rand.New(rand.NewPCG(3, 4))
	var res []engine.Result
	for i := range 50 {
		var r engine.Result
		fillFields(t, reflect.ValueOf(&r), rng)
		r.Err = resultErrs[i%len(resultErrs)]
		res = append(res, r)
	}
	back, err := decodeResults(appendResults(nil, res))
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, res) {
		t.Fatalf("round trip:\n got %+v\nwant %+v", back, res)
	}
	if back, _ := decodeResults(appendResults(nil, []engine.Result{{Err: engine.ErrBadRecord}})); back[0].Err != errUnknownResult {
		t.Fatalf("unlisted error decoded as %v", back[0].Err)
	}
}

func TestDecodeEntryRejectsCorrupt(t *testing.T) {
	r, _ := engine.TokenBucket([]byte("k"), 10, 1, 1)
	good := entry.AppendHeader(nil, batchV1, 5)
	good = appendUvarintCount(good, 1)
	good = appendRequest(good, &r)
	if _, err := entry.Decode(good); err != nil {
		t.Fatal(err)
	}
	for i := range len(good) {
		if _, err := entry.Decode(good[:i]); err == nil {
			t.Fatalf("truncated to %d bytes: decoded", i)
		}
	}
	cases := map[string][]byte{
		"empty":         nil,
		"unknown type":  append([]byte{99}, good[1:]...),
		"trailing":      append(bytes.Clone(good), 0),
		"huge count":    append(entry.AppendHeader(nil, batchV1, 5), 0xff, 0xff, 0xff, 0xff, 0x0f),
		"flush payload": append(entry.AppendHeader(nil, entry.Flush, 5), 1),
	}
	for name, b := range cases {
		if _, err := entry.Decode(b); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

func batchEntry(now int64, reqs ...engine.Request) []byte {
	b := entry.AppendHeader(nil, batchV1, now)
	b = appendUvarintCount(b, len(reqs))
	return appendRequests(b, reqs)
}

func allow(t *testing.T, key string, capacity int64, rate float64, cost int64) engine.Request {
	t.Helper()
	r, err := engine.TokenBucket([]byte(key), capacity, rate, cost)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

const t0 = int64(1_700_000_000) * 1e9

// TestFSMApplyHandBuiltEntries applies entries directly: decisions follow
// the stamped time, a stamp that goes backwards (a new leader with a slower
// clock) is clamped and adds no tokens.
func TestFSMApplyHandBuiltEntries(t *testing.T) {
	eng := engine.New(4)
	defer eng.Close()
	f := newFSM(eng)
	apply := func(idx uint64, data []byte) any {
		return f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
	}
	// capacity 2, rate 1/s: T = 1s.
	r := apply(1, batchEntry(t0, allow(t, "a", 2, 1, 1), allow(t, "a", 2, 1, 1), allow(t, "a", 2, 1, 1))).(*batchResult)
	if !r.res[0].Allowed || !r.res[1].Allowed || r.res[2].Allowed {
		t.Fatalf("burst of 3 on capacity 2: %+v", r.res)
	}
	// 10 s backwards: clamped to t0, still empty.
	r = apply(2, batchEntry(t0-10e9, allow(t, "a", 2, 1, 1))).(*batchResult)
	if r.res[0].Allowed {
		t.Fatal("a stamp from the past added tokens")
	}
	if got := f.now.Load(); got != t0 {
		t.Fatalf("clock = %d, want %d (clamped)", got, t0)
	}
	// One second later: one token.
	r = apply(3, batchEntry(t0+1e9, allow(t, "a", 2, 1, 1), allow(t, "a", 2, 1, 1))).(*batchResult)
	if !r.res[0].Allowed || r.res[1].Allowed {
		t.Fatalf("after 1s: %+v", r.res)
	}
	// Non-command logs only advance the index.
	if got := f.Apply(&raft.Log{Index: 5, Type: raft.LogNoop}); got != nil {
		t.Fatal(got)
	}
	if f.applied.Load() != 5 {
		t.Fatalf("applied = %d", f.applied.Load())
	}
	if n := apply(6, entry.AppendHeader(nil, entry.Len, t0+1e9)).(*lenResult).n; n != 1 {
		t.Fatalf("len = %d", n)
	}
	apply(7, entry.AppendHeader(nil, entry.Flush, t0+1e9))
	if n := apply(8, entry.AppendHeader(nil, entry.Len, t0+1e9)).(*lenResult).n; n != 0 {
		t.Fatalf("len after flush = %d", n)
	}
}

func TestFSMPanicsOnUndecodableEntry(t *testing.T) {
	eng := engine.New(1)
	defer eng.Close()
	f := newFSM(eng)
	defer func() {
		p := recover()
		if p == nil || !strings.Contains(p.(string), "does not decode") {
			t.Fatalf("recover() = %v", p)
		}
	}()
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: []byte{batchV1, 0, 5}})
}

type bufSink struct {
	bytes.Buffer
	cancelled bool
}

func (s *bufSink) ID() string    { return "test" }
func (s *bufSink) Cancel() error { s.cancelled = true; return nil }
func (s *bufSink) Close() error  { return nil }

// TestSnapshotRoundTrip restores a snapshot into a fresh FSM with another
// shard count: same digest, same decisions afterwards.
func TestSnapshotRoundTrip(t *testing.T) {
	eng := engine.New(3)
	defer eng.Close()
	f := newFSM(eng)
	var reqs []engine.Request
	for i := range 500 {
		k := "key:" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		reqs = append(reqs, allow(t, k, 100, 0.001, int64(1+i%3)))
	}
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: batchEntry(t0, reqs...)})
	f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: batchEntry(t0+5e9, allow(t, "other", 5, 1, 5))})

	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()

	eng2 := engine.New(7)
	defer eng2.Close()
	g := newFSM(eng2)
	if err := g.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	i1, d1, err := f.Digest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	i2, d2, err := g.Digest(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if i1 != 2 || i1 != i2 || d1 != d2 {
		t.Fatalf("digests differ: %d %s vs %d %s", i1, d1, i2, d2)
	}
	next := batchEntry(t0+6e9, reqs[:50]...)
	r1 := f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: next}).(*batchResult)
	r2 := g.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: next}).(*batchResult)
	if !reflect.DeepEqual(r1.res, r2.res) {
		t.Fatal("restored FSM decides differently")
	}

	// A corrupted snapshot is refused.
	bad := bytes.Clone(sink.Bytes())
	bad[len(bad)/2] ^= 0x40
	if err := newFSM(eng2).Restore(readCloser{bytes.NewReader(bad)}); err == nil {
		t.Fatal("corrupt snapshot restored")
	}
}

type readCloser struct{ *bytes.Reader }

func (readCloser) Close() error { return nil }
