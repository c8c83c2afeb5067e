package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"reflect"
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
