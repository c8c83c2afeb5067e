//go:build !race

package command

import (
	"strconv"
	"testing"
	"time"
)

// maxEvalSHAAllocs pins the allocations of one EVALSHA of make
// bench-lua's token bucket on an existing key, run alone (Eval): the
// script, its three redis.calls, the read of its key and the apply of
// its effects (issue 34: 170 before, then 133; most of the rest are
// the copy of the key's hash, its restore and the engine's replies).
const maxEvalSHAAllocs = 140

// maxLiveEvalSHAAllocs is the same on live state, as a server running
// alone runs it (live.go): no copy, no restore, no engine reply.
const maxLiveEvalSHAAllocs = 62

func TestEvalSHATokenBucketAllocs(t *testing.T) {
	t.Run("copy", func(t *testing.T) { testTokenBucketAllocs(t, false, maxEvalSHAAllocs) })
	t.Run("live", func(t *testing.T) { testTokenBucketAllocs(t, true, maxLiveEvalSHAAllocs) })
}

func testTokenBucketAllocs(t *testing.T, live bool, max float64) {
	st, call := tokenBucket(t, live)
	now := time.Now().UnixMilli()
	keys := make([]string, 100)
	for i := range keys {
		keys[i] = "tb:" + strconv.Itoa(i)
		st.Eval(call(keys[i], now), true, false, Run{}) // the key exists from now on
	}
	i := 0
	n := testing.AllocsPerRun(500, func() {
		o := st.Eval(call(keys[i%len(keys)], now), true, false, Run{})
		if o.Err != "" || o.Failed {
			t.Fatal(o.Err, string(o.Reply))
		}
		i++
	})
	t.Logf("%.1f allocations per EVALSHA", n)
	if n > max {
		t.Errorf("%.1f allocations per EVALSHA, want at most %.0f", n, max)
	}
}
