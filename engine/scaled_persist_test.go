package engine_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
)

// TestScaledSnapshotRoundTrip: scaled token buckets and queues go through
// the snapshot format with their parameters, next to compact ones, and
// come back scaled (a later policy change still rescales them).
func TestScaledSnapshotRoundTrip(t *testing.T) {
	ctx := context.Background()
	const t0, ms = int64(1_700_000_000_000_000_000), int64(1e6)
	e := algEngine(t, 3)
	scaled := func(r engine.Request, err error) engine.Request {
		r = algReq(r, err)
		r.Scaled = true
		return r
	}
	algDo(t, e, t0, scaled(engine.TokenBucket([]byte("g"), 10, 10, 4)))
	algDo(t, e, t0, scaled(engine.Shape([]byte("q"), 10, 10, 2)))
	algDo(t, e, t0, algReq(engine.TokenBucket([]byte("plain"), 10, 10, 1)))
	recs, clock := algExport(t, e, t0)
	var buf bytes.Buffer
	if err := persist.Encode(&buf, persist.Header{ClockNanos: clock}, recs); err != nil {
		t.Fatal(err)
	}
	h, got, err := persist.Decode(&buf)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, recs) {
		t.Fatalf("decoded %v, want %v", got, recs)
	}
	want := []engine.Record{
		{Key: "g", Kind: engine.KindGCRA, Fields: []int64{t0 + 400*ms, 100 * ms, 10}},
		{Key: "plain", Kind: engine.KindGCRA, Fields: []int64{t0 + 100*ms}},
		{Key: "q", Kind: engine.KindShape, Fields: []int64{t0 + 200*ms, 100 * ms, 10}},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("records %v, want %v", got, want)
	}
	f := algEngine(t, 1)
	if err := f.Import(ctx, h.ClockNanos, got); err != nil {
		t.Fatal(err)
	}
	// 4 tokens in use at 10/s; at 20/s: 200 ms, 6 of 10 left.
	if r := algDo(t, f, t0, algReq(engine.TokenBucket([]byte("g"), 10, 20, 0))); r.Remaining != 6 || r.ResetAfter != 200*ms {
		t.Errorf("after the round trip, 20/s: %+v", r)
	}
	// The compact key is read as it is.
	if r := algDo(t, f, t0, algReq(engine.TokenBucket([]byte("plain"), 20, 10, 0))); r.Remaining != 19 || r.ResetAfter != 100*ms {
		t.Errorf("after the round trip, compact key: %+v", r)
	}
}
