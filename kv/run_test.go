package kv_test

import (
	"context"
	"errors"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// The typed results of FetchWith, ReadDigests and Txn.Apply (issue 31:
// the edge used to read these replies' RESP text itself).
func TestTypedRuns(t *testing.T) {
	const now, sec = int64(1_000_000_000_000), int64(1e9)
	e := engine.New(3)
	defer e.Close()
	at := now
	do := func(req engine.Request) (engine.Result, error) {
		res := make([]engine.Result, 1)
		err := e.Do(context.Background(), at, []engine.Request{req}, res)
		return res[0], err
	}
	doLines(t, e, now, "SET c 5", "HSET h f v")

	ds, err := kv.ReadDigests(do, [][]byte{[]byte("c"), []byte("h"), []byte("none")})
	if err != nil || len(ds) != 3 || ds[0] == 0 || ds[2] != 0 {
		t.Fatalf("ReadDigests: %v, %v", ds, err)
	}

	o := kv.NewOverlay(now, kv.FetchWith(do))
	runOn(t, o, []string{"INCR c", "HSET h g w"})
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
	if err := o.Effects(false).Apply(do); err != nil {
		t.Fatalf("effects of an undisturbed run: %v", err)
	}
	if got := doLines(t, e, now, "GET c", "HGET h g"); got[0] != "$1\r\n6\r\n" || got[1] != "$1\r\nw\r\n" {
		t.Fatalf("after the effects: %q", got)
	}

	// A write between the run and its effects: ErrConflict, nothing applied.
	at = now + sec
	o = kv.NewOverlay(at, kv.FetchWith(do))
	runOn(t, o, []string{"INCR c", "SET other 1"})
	doLines(t, e, at, "INCR c")
	if err := o.Effects(false).Apply(do); !errors.Is(err, kv.ErrConflict) {
		t.Fatalf("effects after a conflicting write: %v, want ErrConflict", err)
	}
	if got := doLines(t, e, at, "GET c", "EXISTS other"); got[0] != "$1\r\n7\r\n" || got[1] != ":0\r\n" {
		t.Fatalf("after the refused effects: %q", got)
	}

	// A backend's error is returned as it is, from every one of them.
	boom := errors.New("boom")
	fail := func(engine.Request) (engine.Result, error) { return engine.Result{}, boom }
	if _, err := kv.FetchWith(fail)([][]byte{[]byte("c")}); !errors.Is(err, boom) {
		t.Fatalf("FetchWith through a failing backend: %v", err)
	}
	if _, err := kv.ReadDigests(fail, [][]byte{[]byte("c")}); !errors.Is(err, boom) {
		t.Fatalf("ReadDigests through a failing backend: %v", err)
	}
	if err := o.Effects(false).Apply(fail); !errors.Is(err, boom) {
		t.Fatalf("Apply through a failing backend: %v", err)
	}
	// A reply kv cannot read is ErrBadReply, not a guess.
	junk := func(engine.Request) (engine.Result, error) { return engine.Result{Reply: "+OK\r\n"}, nil }
	if _, err := kv.FetchWith(junk)([][]byte{[]byte("c")}); !errors.Is(err, kv.ErrBadReply) {
		t.Fatalf("FetchWith of an unreadable reply: %v", err)
	}
}
