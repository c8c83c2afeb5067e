package engine

import (
	"context"
	"fmt"
	"slices"
	"testing"
)

// TestScanGuarantee walks the keys in small steps while other keys are
// added (the tables grow), expire and are swept (the tables shrink) and
// deleted between the steps: every key present for the whole walk is
// returned exactly once, and no key twice.
func TestScanGuarantee(t *testing.T) {
	for _, shards := range []int{1, 3} {
		t.Run(fmt.Sprint(shards, " shards"), func(t *testing.T) {
			e := New(shards)
			defer e.Close()
			ctx := context.Background()
			now := t0
			do := func(reqs ...Request) {
				t.Helper()
				res := make([]Result, len(reqs))
				if err := e.Do(ctx, now, reqs, res); err != nil {
					t.Fatal(err)
				}
			}
			bucket := func(key string, rate float64) Request {
				r, err := TokenBucket([]byte(key), 1, rate, 1)
				if err != nil {
					t.Fatal(err)
				}
				return r
			}
			const stable = 3000
			var reqs []Request
			for i := range stable {
				reqs = append(reqs, bucket(fmt.Sprint("stable:", i), 1e-6)) // empty again in 1e6 s
			}
			do(reqs...)
			sizes := func() (lo, hi int) {
				n := make([]int, shards)
				e.onEach(ctx, func(i int, s *shard) { n[i] = len(s.tab.slots) })
				return slices.Min(n), slices.Max(n)
			}
			firstLo, firstHi := sizes()
			minLo, maxHi := firstLo, firstHi
			seen := map[string]int{}
			cursor := uint64(0)
			for step := 0; ; step++ {
				next, done, err := e.Scan(ctx, now, cursor, 5, func(key []byte, k Kind) {
					if k != KindGCRA {
						t.Errorf("%s: kind %v", key, k)
					}
					seen[string(key)]++
				})
				if err != nil {
					t.Fatal(err)
				}
				if done != (next == 0) {
					t.Fatalf("step %d: next %d done %v", step, next, done)
				}
				if done {
					break
				}
				cursor = next
				switch step % 40 {
				case 0, 1, 2, 3:
					// Growth: keys that last one second.
					reqs = reqs[:0]
					for j := range 1500 {
						reqs = append(reqs, bucket(fmt.Sprint("tmp:", step, ":", j), 1))
					}
					do(reqs...)
				case 20:
					// They expire; the sweep drops them and shrinks the
					// tables.
					now += 2 * sec
					e.Sweep(ctx, now, 1<<20)
				case 30:
					// Deletions of keys that never expire on their own.
					reqs = reqs[:0]
					for j := range 50 {
						reqs = append(reqs, Request{Op: OpDel, Key: []byte(fmt.Sprint("tmp:", step-30, ":", j))})
					}
					do(reqs...)
				}
				lo, hi := sizes()
				minLo, maxHi = min(minLo, lo), max(maxHi, hi)
			}
			for i := range stable {
				if n := seen[fmt.Sprint("stable:", i)]; n != 1 {
					t.Errorf("stable:%d seen %d times", i, n)
				}
			}
			for k, n := range seen {
				if n != 1 {
					t.Errorf("%s seen %d times", k, n)
				}
			}
			if maxHi <= firstHi || minLo >= maxHi {
				t.Errorf("tables did not grow and shrink during the walk: %d-%d at the start, %d-%d over it", firstLo, firstHi, minLo, maxHi)
			}
		})
	}
}

func TestScanCursor(t *testing.T) {
	for _, c := range []struct {
		space uint32
		shard int
		pos   uint64
	}{{0, 0, 0}, {1, 4095, ScanStep}, {4095, 7, ^uint64(0) &^ (ScanStep - 1)}} {
		cur := JoinCursor(c.space, c.shard, c.pos)
		if s, sh, p := SplitCursor(cur); s != c.space || sh != c.shard || p != c.pos {
			t.Errorf("%+v -> %d -> %d %d %d", c, cur, s, sh, p)
		}
	}
	if JoinCursor(0, 0, 0) != 0 {
		t.Error("the first cursor is not 0")
	}
}

// TestScanSkipsExpired: a key empty at the walk's time is not listed,
// and the walk drops nothing.
func TestScanSkipsExpired(t *testing.T) {
	e := New(1)
	defer e.Close()
	ctx := context.Background()
	r, _ := TokenBucket([]byte("a"), 1, 1, 1)
	res := make([]Result, 1)
	if err := e.Do(ctx, t0, []Request{r}, res); err != nil {
		t.Fatal(err)
	}
	var got []string
	scan := func(now int64) {
		got = got[:0]
		if _, _, err := e.Scan(ctx, now, 0, 10, func(k []byte, _ Kind) { got = append(got, string(k)) }); err != nil {
			t.Fatal(err)
		}
	}
	if scan(t0); len(got) != 1 {
		t.Fatalf("at t0: %q", got)
	}
	if scan(t0 + 2*sec); len(got) != 0 {
		t.Fatalf("after expiry: %q", got)
	}
}
