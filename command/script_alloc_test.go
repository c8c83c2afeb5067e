package command

import (
	"context"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
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
// on key.
func tokenBucket(tb testing.TB) (st *Scripts, call func(key string, nowMs int64) [][]byte) {
	src, err := os.ReadFile("../bench/kvcompare/token_bucket.lua")
	if err != nil {
		tb.Fatal(err)
	}
	eng := engine.New(1)
	tb.Cleanup(eng.Close)
	st = NewScripts(engineBackend{eng}, 0)
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
	st, call := tokenBucket(b)
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
