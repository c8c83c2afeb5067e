package command

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// engineBackend runs scripts' requests on an engine at the wall clock, as
// the standalone backend does.
type engineBackend struct{ eng *engine.Engine }

func (b engineBackend) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return b.eng.Do(ctx, time.Now().UnixNano(), reqs, res)
}

func (b engineBackend) Len(ctx context.Context) (int, error) {
	return b.eng.Len(ctx, time.Now().UnixNano())
}

// tokenBucket loads make bench-lua's token-bucket script into a fresh
// Scripts on one engine shard and returns the arguments of one EVALSHA
// on key. With live, scripts run on the shard (live.go), as a server
// running alone runs them; otherwise on copies, as a cluster's do.
func tokenBucket(tb testing.TB, live bool) (st *Scripts, call func(key string, nowMs int64) [][]byte) {
	src, err := os.ReadFile("../bench/kvcompare/token_bucket.lua")
	if err != nil {
		tb.Fatal(err)
	}
	eng := engine.New(1)
	tb.Cleanup(eng.Close)
	st = NewScripts(engineBackend{eng}, 0)
	if live {
		st.shards = eng.Shards()
	}
	tb.Cleanup(st.Stop)
	sha, text := st.Load(src)
	if text != "" {
		tb.Fatal(text)
	}
	args := [][]byte{[]byte("EVALSHA"), []byte(sha), []byte("1"), nil, []byte("100"), []byte("10"), nil, []byte("1")}
	return st, func(key string, nowMs int64) [][]byte {
		args[3], args[6] = []byte(key), strconv.AppendInt(args[6][:0], nowMs, 10)
		return args
	}
}

func BenchmarkEvalSHATokenBucketInProcess(b *testing.B) {
	for _, live := range []bool{false, true} {
		b.Run(map[bool]string{false: "copy", true: "live"}[live], func(b *testing.B) { benchTokenBucket(b, live) })
	}
}

func benchTokenBucket(b *testing.B, live bool) {
	st, call := tokenBucket(b, live)
	now := time.Now().UnixMilli()
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "tb:" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		o := st.Eval(call(keys[i%len(keys)], now), true, false, Run{})
		if o.Err != "" || o.Failed {
			b.Fatal(o.Err, string(o.Reply))
		}
	}
}

// kvDo runs a data command on the engine directly, as another client
// would.
func kvDo(t *testing.T, b Backend, args ...string) string {
	t.Helper()
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	spec, ok := kv.Lookup(bytes.ToLower(bs[0]))
	if !ok {
		t.Fatalf("no command %s", args[0])
	}
	res := make([]engine.Result, 1)
	if err := b.Do(context.Background(), []engine.Request{kv.New(spec, bs, false).Request()}, res); err != nil || res[0].Err != nil {
		t.Fatal(err, res[0].Err)
	}
	return res[0].Reply
}

func evalCall(src string, keys []string, argv ...string) EvalCall {
	args := [][]byte{[]byte("EVAL"), []byte(src), []byte(strconv.Itoa(len(keys)))}
	for _, k := range append(keys, argv...) {
		args = append(args, []byte(k))
	}
	return EvalCall{Args: args}
}

// Two scripts of one pipeline on the same key, declared or not: the
// second sees the first's write, and the replies keep the pipeline's
// order (issue 34: the batch of a pipeline's scripts).
func TestEvalBatchSameKeyInOrder(t *testing.T) {
	eng := engine.New(2)
	t.Cleanup(eng.Close)
	st := NewScripts(engineBackend{eng}, 0)
	t.Cleanup(st.Stop)
	incr := "return redis.call('INCR', KEYS[1])"
	undeclared := "return redis.call('INCR', 'hidden')"
	calls := []EvalCall{
		evalCall(incr, []string{"a"}),
		evalCall(incr, []string{"b"}),
		evalCall(incr, []string{"a"}),
		evalCall(undeclared, nil),
		evalCall(undeclared, nil),
		evalCall(incr, []string{"a"}),
		{Args: [][]byte{[]byte("EVALSHA"), []byte("ffffffffffffffffffffffffffffffffffffffff"), []byte("0")}, BySHA: true},
		evalCall(incr, []string{"hidden"}),
	}
	outs := st.EvalBatch(calls, Run{}, nil)
	want := []string{":1\r\n", ":1\r\n", ":2\r\n", ":1\r\n", ":2\r\n", ":3\r\n", "", ":3\r\n"}
	for i, o := range outs {
		if i == 6 {
			if !strings.HasPrefix(o.Err, "NOSCRIPT") {
				t.Errorf("call %d: %+v, want NOSCRIPT", i, o)
			}
			continue
		}
		if o.Err != "" || string(o.Reply) != want[i] {
			t.Errorf("call %d: %q %q, want %q", i, o.Err, o.Reply, want[i])
		}
	}
	if got := kvDo(t, engineBackend{eng}, "GET", "a"); got != "$1\r\n3\r\n" {
		t.Errorf("a = %q, want 3", got)
	}
}

// interfering runs a write of another client once, right after the
// first backend call it sees (a batch's reads).
type interfering struct {
	engineBackend
	t    *testing.T
	once bool
	args []string
}

func (b *interfering) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	err := b.engineBackend.Do(ctx, reqs, res)
	if !b.once {
		b.once = true
		kvDo(b.t, b.engineBackend, b.args...)
	}
	return err
}

// A key a batched script read changes before its effects apply: the
// effects do not apply, the script runs again on the new value, and its
// write takes effect exactly once (issue 34).
func TestEvalBatchKeyChangedBetweenReadAndApply(t *testing.T) {
	eng := engine.New(2)
	t.Cleanup(eng.Close)
	b := &interfering{engineBackend: engineBackend{eng}, t: t, args: []string{"SET", "a", "10"}}
	st := NewScripts(b, 0)
	t.Cleanup(st.Stop)
	incr := "return redis.call('INCR', KEYS[1])"
	outs := st.EvalBatch([]EvalCall{evalCall(incr, []string{"a"}), evalCall(incr, []string{"b"})}, Run{}, nil)
	if string(outs[0].Reply) != ":11\r\n" || string(outs[1].Reply) != ":1\r\n" {
		t.Fatalf("replies %q %q, want :11 and :1", outs[0].Reply, outs[1].Reply)
	}
	if got := kvDo(t, b.engineBackend, "GET", "a"); got != "$2\r\n11\r\n" {
		t.Errorf("a = %q, want 11", got)
	}
	if got := kvDo(t, b.engineBackend, "GET", "b"); got != "$1\r\n1\r\n" {
		t.Errorf("b = %q, want 1", got)
	}
}
