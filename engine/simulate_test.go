package engine

import (
	"context"
	"testing"
)

// TestSimulate: a request applied to a copy of its key's state gives the
// result and the state the engine itself would, and leaves the engine
// alone.
func TestSimulate(t *testing.T) {
	e := newEngine(t, 2)
	ctx := context.Background()
	var rec *Record
	for i := range 4 {
		now := t0 + int64(i)*1e6
		r := bucket(t, "k", 3, 0.5, 1)
		want := do1(t, e, now, r)
		got, after, err := Simulate([]byte("k"), rec, &r, now)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("call %d: simulated %+v, engine %+v", i, got, want)
		}
		var real Record
		if _, err := e.Export(ctx, now, func(r Record) error { real = r; return nil }); err != nil {
			t.Fatal(err)
		}
		if after == nil || after.Kind != real.Kind || len(after.Fields) != len(real.Fields) || after.Fields[0] != real.Fields[0] {
			t.Fatalf("call %d: simulated state %+v, engine's %+v", i, after, real)
		}
		rec = after
	}
	// Deleting: the state is gone.
	del := Request{Op: OpDel, Key: []byte("k")}
	res, after, err := Simulate([]byte("k"), rec, &del, t0+5e6)
	if err != nil || res.Value != 1 || after != nil {
		t.Fatalf("OpDel: %+v %+v %v", res, after, err)
	}
	// A record no engine could make is refused.
	if _, _, err := Simulate([]byte("k"), &Record{Key: "k", Kind: KindFixed, Fields: []int64{1}}, &del, t0); err == nil {
		t.Fatal("bad record accepted")
	}
}
