package kv_test

import (
	"context"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// overlayFetch reads keys from e at now, as a script's run does.
func overlayFetch(t *testing.T, e *engine.Engine, now int64) kv.Fetch {
	return func(keys [][]byte) ([]kv.KeyState, error) {
		res := make([]engine.Result, 1)
		if err := e.Do(context.Background(), now, []engine.Request{kv.NewDump(keys).Request()}, res); err != nil {
			return nil, err
		}
		st, ok := kv.ParseDump(res[0].Reply, len(keys))
		if !ok {
			t.Fatalf("dump reply %q", res[0].Reply)
		}
		return st, nil
	}
}

func runOn(t *testing.T, ks engine.Keyspace, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		args := strings.Fields(l)
		spec, ok := kv.Lookup([]byte(args[0]))
		if !ok {
			t.Fatalf("no command %s", args[0])
		}
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		out = append(out, string(kv.New(spec, b, false).Exec(ks, nil)))
	}
	return out
}

func doLines(t *testing.T, e *engine.Engine, now int64, lines ...string) []string {
	t.Helper()
	var out []string
	for _, l := range lines {
		args := strings.Fields(l)
		spec, _ := kv.Lookup([]byte(args[0]))
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		res := make([]engine.Result, 1)
		if err := e.Do(context.Background(), now, []engine.Request{kv.New(spec, b, false).Request()}, res); err != nil {
			t.Fatal(err)
		}
		out = append(out, res[0].Reply)
	}
	return out
}

// TestOverlayEffects: commands run on an Overlay reply as they would on the
// engine, and applying the run's effects leaves the engine in the state
// the commands would have left it in; a key changed between the run and
// the apply fails the effects whole.
func TestOverlayEffects(t *testing.T) {
	const sec = int64(1e9)
	now := int64(1_700_000_000) * sec
	setup := []string{"SET c 5", "HSET h tokens 3 ts 100", "ZADD z 1 a 2 b", "SET gone 1", "SET t x EX 100"}
	script := []string{
		"INCRBY c 10", "EXPIRE c 60", "HINCRBY h tokens -1", "HSET h ts 200", "HMGET h tokens ts",
		"ZREMRANGEBYSCORE z -inf 1", "ZADD z 3 c", "ZCARD z", "DEL gone", "GET t", "TTL t", "SET n 7 PX 5000",
		"GET missing", "HGETALL h",
	}
	direct := engine.New(2)
	defer direct.Close()
	doLines(t, direct, now, setup...)
	want := doLines(t, direct, now+sec, script...)

	e := engine.New(3)
	defer e.Close()
	doLines(t, e, now, setup...)
	o := kv.NewOverlay(now+sec, overlayFetch(t, e, now+sec))
	got := runOn(t, o, script)
	if o.Err() != nil {
		t.Fatal(o.Err())
	}
	for i := range script {
		if got[i] != want[i] {
			t.Errorf("%s on the overlay: %q, on the engine %q", script[i], got[i], want[i])
		}
	}
	fx := o.Effects(false)
	// The effects travel in the Raft log: they decode as they were.
	back, err := kv.Decode(kv.Append(nil, fx))
	if err != nil || string(kv.Append(nil, back)) != string(kv.Append(nil, fx)) {
		t.Fatalf("effects round trip: %v", err)
	}
	// Clients cannot send the internal restore.
	if _, ok := kv.Lookup([]byte("kv.restore")); ok {
		t.Fatal("kv.restore is a client command")
	}
	res := make([]engine.Result, 1)
	if err := e.Do(context.Background(), now+2*sec, []engine.Request{fx.Request()}, res); err != nil {
		t.Fatal(err)
	}
	if strings.HasPrefix(res[0].Reply, "*-1") || strings.Contains(res[0].Reply, "-ERR") {
		t.Fatalf("effects: %q", res[0].Reply)
	}
	// Every key now reads as on the engine that ran the commands.
	check := []string{"GET c", "PTTL c", "HGETALL h", "ZRANGE z 0 -1 WITHSCORES", "EXISTS gone", "GET t", "GET n", "PTTL n"}
	a, b := doLines(t, direct, now+2*sec, check...), doLines(t, e, now+2*sec, check...)
	for i := range check {
		if a[i] != b[i] {
			t.Errorf("%s after the effects: %q, want %q", check[i], b[i], a[i])
		}
	}

	// A conflicting write between the run and the apply: nothing applies.
	o = kv.NewOverlay(now+3*sec, overlayFetch(t, e, now+3*sec))
	runOn(t, o, []string{"INCR c", "SET other 1"})
	doLines(t, e, now+3*sec, "INCR c")
	if err := e.Do(context.Background(), now+3*sec, []engine.Request{o.Effects(false).Request()}, res); err != nil {
		t.Fatal(err)
	}
	if res[0].Reply != "*-1\r\n" {
		t.Fatalf("effects after a conflicting write: %q, want a null array", res[0].Reply)
	}
	if got := doLines(t, e, now+3*sec, "GET c", "EXISTS other"); got[0] != "$2\r\n16\r\n" || got[1] != ":0\r\n" {
		t.Fatalf("after the refused effects: %q", got)
	}
}
