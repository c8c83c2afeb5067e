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

// liveRun runs lines on a live overlay over the shard it runs on
// (engine.Command), and reads check on the shard before ApplyLive.
type liveRun struct {
	t            *testing.T
	keys         [][]byte
	lines, check []string
	local        func([]byte) bool
	got, before  []string
	err          error
}

func (r *liveRun) Keys() [][]byte { return r.keys }

func (r *liveRun) Exec(ks engine.Keyspace, dst []byte) []byte {
	o := kv.NewLiveOverlay(ks, r.local)
	for _, l := range r.lines {
		args := strings.Fields(l)
		spec, _ := kv.Lookup([]byte(args[0]))
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		o.SetWriting(spec.Write())
		r.got = append(r.got, string(kv.New(spec, b, false).Exec(o, nil)))
		o.SetWriting(false)
	}
	r.before = runOn(r.t, ks, r.check)
	if r.err = o.Err(); r.err == nil {
		o.ApplyLive()
	}
	return dst
}

// TestLiveOverlay: commands run on a live overlay reply as on the engine
// and change nothing on it until ApplyLive, which leaves it as the
// commands would have; a run that touches a key it does not hold fails
// with ErrNotLocal and changes nothing.
func TestLiveOverlay(t *testing.T) {
	const sec = int64(1e9)
	now := int64(1_700_000_000) * sec
	setup := []string{"SET c 5", "HSET h tokens 3 ts 100", "ZADD z 1 a 2 b", "SET gone 1", "SET t x EX 100", "RPUSH l a b", "SADD s x"}
	script := []string{
		"INCRBY c 10", "EXPIRE c 60", "HINCRBY h tokens -1", "HSET h ts 200", "HMGET h tokens ts",
		"ZREMRANGEBYSCORE z -inf 1", "ZADD z 3 c", "ZCARD z", "DEL gone", "GET t", "TTL t", "SET n 7 PX 5000",
		"GET missing", "HGETALL h", "LPUSH l z", "LRANGE l 0 -1", "SADD s y", "SMEMBERS s", "HGETALL h",
	}
	check := []string{"GET c", "PTTL c", "HGETALL h", "ZRANGE z 0 -1 WITHSCORES", "EXISTS gone", "GET t", "GET n", "PTTL n", "LRANGE l 0 -1", "SMEMBERS s"}
	direct := engine.New(1)
	defer direct.Close()
	doLines(t, direct, now, setup...)
	setupState := doLines(t, direct, now, check...)
	want := doLines(t, direct, now+sec, script...)

	e := engine.New(1)
	defer e.Close()
	doLines(t, e, now, setup...)
	run := &liveRun{t: t, keys: [][]byte{[]byte("c")}, lines: script, check: check,
		local: func([]byte) bool { return true }}
	res := make([]engine.Result, 1)
	if err := e.Do(context.Background(), now+sec, []engine.Request{engine.CommandRequest(run, false)}, res); err != nil {
		t.Fatal(err)
	}
	if run.err != nil {
		t.Fatal(run.err)
	}
	for i := range script {
		if run.got[i] != want[i] {
			t.Errorf("%s on the live overlay: %q, on the engine %q", script[i], run.got[i], want[i])
		}
	}
	for i := range check {
		if run.before[i] != setupState[i] && check[i] != "PTTL n" {
			t.Errorf("%s before ApplyLive: %q, want it unchanged: %q", check[i], run.before[i], setupState[i])
		}
	}
	a, b := doLines(t, direct, now+2*sec, check...), doLines(t, e, now+2*sec, check...)
	for i := range check {
		if a[i] != b[i] {
			t.Errorf("%s after ApplyLive: %q, want %q", check[i], b[i], a[i])
		}
	}

	// A key the run does not hold: ErrNotLocal, and nothing applies.
	run = &liveRun{t: t, keys: [][]byte{[]byte("c")}, lines: []string{"INCR c", "HSET h ts 1", "GET far", "SET other 1"},
		local: func(k []byte) bool { return string(k) != "far" }}
	if err := e.Do(context.Background(), now+3*sec, []engine.Request{engine.CommandRequest(run, false)}, res); err != nil {
		t.Fatal(err)
	}
	if run.err != kv.ErrNotLocal {
		t.Fatalf("a run that touched far: %v, want ErrNotLocal", run.err)
	}
	if got := doLines(t, e, now+3*sec, "GET c", "HGET h ts", "EXISTS other"); got[0] != b[0] || got[1] != "$3\r\n200\r\n" || got[2] != ":0\r\n" {
		t.Fatalf("after a discarded run: %q", got)
	}
}
