package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/values"
)

// markCmd is a data command for these tests: HSET key field value, with an
// optional absolute expiry, changing an existing hash in place (the case a
// copy-on-write export must see before the change).
type markCmd struct {
	key, field, val []byte
	expire          int64
}

func (c *markCmd) Keys() [][]byte { return [][]byte{c.key} }

func (c *markCmd) Exec(ks Keyspace, dst []byte) []byte {
	e, err := ks.Get(c.key)
	if err != nil {
		return append(dst, "-WRONGTYPE\r\n"...)
	}
	if e == nil {
		if e, err = ks.Create(c.key, values.TypeHash); err != nil {
			return append(dst, "-OOM\r\n"...)
		}
	}
	if _, err := e.Obj.(*values.Hash).Set(c.field, c.val); err != nil {
		return append(dst, "-ERR\r\n"...)
	}
	if c.expire != 0 {
		e.Expire = c.expire
	}
	ks.Changed(c.key)
	return append(dst, ":1\r\n"...)
}

// markWorld drives an engine with random operations of every kind that
// writes: decisions of each kind (plain and scaled), data commands that
// change values in place, DEL, reads, time passing (expiry on access),
// sweeps, eviction, DeleteMatching, Import over existing keys, and
// FLUSHALL; enough new keys that tables grow (rebuilds) while a walk is
// in progress.
type markWorld struct {
	t    testing.TB
	e    *Engine
	r    *rand.Rand
	now  int64
	keys int // key names used so far: k0 ... k(keys-1)
	ctx  context.Context
}

const markT0 = int64(1_700_000_000_000_000_000)

func (w *markWorld) key() []byte {
	// Mostly existing names, sometimes a new one.
	if w.keys == 0 || w.r.IntN(4) == 0 {
		w.keys++
		return fmt.Appendf(nil, "k%d", w.keys-1)
	}
	return fmt.Appendf(nil, "k%d", w.r.IntN(w.keys))
}

func (w *markWorld) request(key []byte) Request {
	must := func(r Request, err error) Request {
		if err != nil {
			w.t.Fatal(err)
		}
		return r
	}
	cost := int64(w.r.IntN(3))
	switch w.r.IntN(9) {
	case 0:
		return must(TokenBucket(key, 5, 2, cost))
	case 1:
		r := must(TokenBucket(key, int64(3+w.r.IntN(3)), 1, cost))
		r.Scaled = true
		return r
	case 2:
		return must(Fixed(key, 5, 1000, cost))
	case 3:
		return must(Sliding(key, 5, 2000, cost))
	case 4:
		return must(Log(key, 4, 1500, cost))
	case 5:
		return must(Shape(key, 4, 3, cost))
	case 6:
		var exp int64
		if w.r.IntN(2) == 0 {
			exp = w.now + int64(w.r.IntN(3000))*1e6
		}
		return CommandRequest(&markCmd{key: key, field: []byte{byte('a' + w.r.IntN(4))}, val: fmt.Appendf(nil, "%d", w.r.IntN(100)), expire: exp}, false)
	case 7:
		return Request{Op: OpDel, Key: key}
	default:
		return Request{Op: []Op{OpExists, OpTTL}[w.r.IntN(2)], Key: key}
	}
}

// op applies one random operation at a time at or after the last.
func (w *markWorld) op() {
	if w.r.IntN(3) == 0 {
		w.now += int64(w.r.IntN(400)) * 1e6
	}
	ctx := w.ctx
	switch n := w.r.IntN(100); {
	case n < 80:
		reqs := make([]Request, 1+w.r.IntN(8))
		for i := range reqs {
			reqs[i] = w.request(w.key())
		}
		if err := w.e.Do(ctx, w.now, reqs, make([]Result, len(reqs))); err != nil {
			w.t.Fatal(err)
		}
	case n < 84:
		// A burst of new keys: tables grow while a walk is in progress.
		reqs := make([]Request, 64)
		for i := range reqs {
			w.keys++
			reqs[i], _ = TokenBucket(fmt.Appendf(nil, "k%d", w.keys-1), 5, 1, 1)
		}
		if err := w.e.Do(ctx, w.now, reqs, make([]Result, len(reqs))); err != nil {
			w.t.Fatal(err)
		}
	case n < 89:
		if _, _, err := w.e.Sweep(ctx, w.now, 1+w.r.IntN(50)); err != nil {
			w.t.Fatal(err)
		}
	case n < 92:
		if _, err := w.e.Evict(ctx, w.now, EvictRange{From: w.r.Uint64(), To: ^uint64(0), N: 1 + w.r.IntN(4), LRU: w.r.IntN(2) == 0}); err != nil {
			w.t.Fatal(err)
		}
	case n < 95:
		suffix := fmt.Sprint(w.r.IntN(10))
		if _, err := w.e.DeleteMatching(ctx, w.now, func(k []byte) bool { return bytes.HasSuffix(k, []byte(suffix)) }); err != nil {
			w.t.Fatal(err)
		}
	case n < 99:
		// Import over existing keys (and new ones).
		recs := make([]Record, 1+w.r.IntN(5))
		for i := range recs {
			recs[i] = Record{Key: string(w.key()), Kind: KindGCRA, Fields: []int64{w.now + int64(w.r.IntN(5000))*1e6}}
		}
		if err := w.e.Import(ctx, w.now, recs); err != nil {
			w.t.Fatal(err)
		}
	default:
		if err := w.e.Flush(ctx); err != nil {
			w.t.Fatal(err)
		}
	}
}

// markState is Export's records at now, sorted by key: the whole state,
// read while nothing else runs.
func markState(t testing.TB, e *Engine, now int64) []Record {
	t.Helper()
	var recs []Record
	if _, err := e.Export(context.Background(), now, func(r Record) error {
		recs = append(recs, r)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return markSorted(recs)
}

func markSorted(recs []Record) []Record {
	slices.SortFunc(recs, func(a, b Record) int { return strings.Compare(a.Key, b.Key) })
	return recs
}

// markDiff describes how got differs from want, "" when equal.
func markDiff(got, want []Record) string {
	for i := 1; i < len(got); i++ {
		if got[i].Key == got[i-1].Key {
			return fmt.Sprintf("key %q twice", got[i].Key)
		}
	}
	gm := map[string]Record{}
	for _, r := range got {
		gm[r.Key] = r
	}
	var b strings.Builder
	for _, r := range want {
		g, ok := gm[r.Key]
		switch {
		case !ok:
			fmt.Fprintf(&b, "missing %v\n", r)
		case !reflect.DeepEqual(g, r):
			fmt.Fprintf(&b, "got %v, want %v\n", g, r)
		}
		delete(gm, r.Key)
	}
	for _, r := range gm {
		fmt.Fprintf(&b, "extra %v\n", r)
	}
	return b.String()
}

// TestMarkPointInTime takes point-in-time exports while random operations
// of every kind that writes run between its steps (steps of a few keys, so
// each walk meets many changes, rebuilds and flushes), and checks that
// each export is exactly the state at its mark: every key live then, with
// its state then, once, and nothing else.
func TestMarkPointInTime(t *testing.T) {
	defer func(n int) { exportChunk = n }(exportChunk)
	for seed := range uint64(60) {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 32))
			exportChunk = 1 + r.IntN(8)
			e := New(1 + r.IntN(4))
			defer e.Close()
			w := &markWorld{t: t, e: e, r: r, now: markT0, ctx: context.Background()}
			for range 50 + r.IntN(400) {
				w.op()
			}
			for round := range 3 {
				want := markState(t, e, w.now)
				sn, err := e.Mark(w.ctx, w.now)
				if err != nil {
					t.Fatal(err)
				}
				var got []Record
				opsPerStep := r.IntN(6)
				for {
					recs, err := sn.Next(w.ctx)
					if err == io.EOF {
						break
					}
					if err != nil {
						t.Fatal(err)
					}
					got = append(got, recs...)
					for range opsPerStep {
						w.op()
					}
				}
				sn.Close()
				if d := markDiff(markSorted(got), want); d != "" {
					t.Fatalf("round %d: the export differs from the state at its mark (%d records, want %d):\n%s", round, len(got), len(want), d)
				}
				markNoWalks(t, e)
				for range r.IntN(100) {
					w.op()
				}
			}
		})
	}
}

// markNoWalks checks that no walk is registered and no array is kept for
// one.
func markNoWalks(t testing.TB, e *Engine) {
	t.Helper()
	if err := e.onEach(context.Background(), func(i int, s *shard) {
		if len(s.walks) != 0 || len(s.retired) != 0 {
			t.Errorf("shard %d: %d walks, %d retired regions after the export ended", i, len(s.walks), len(s.retired))
		}
	}); err != nil {
		t.Fatal(err)
	}
}

// TestMarkClose pins that a Snapshot closed before its end (Raft calls
// Release without Persist when the store fails) unregisters its walks, so
// writes stop saving records for it, and that Close is idempotent.
func TestMarkClose(t *testing.T) {
	defer func(n int) { exportChunk = n }(exportChunk)
	exportChunk = 2
	e := New(2)
	defer e.Close()
	w := &markWorld{t: t, e: e, r: rand.New(rand.NewPCG(7, 7)), now: markT0, ctx: context.Background()}
	for range 200 {
		w.op()
	}
	sn, err := e.Mark(w.ctx, w.now)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sn.Next(w.ctx); err != nil {
		t.Fatal(err)
	}
	sn.Close()
	sn.Close()
	if _, err := sn.Next(w.ctx); err != io.EOF {
		t.Fatalf("Next after Close: %v, want io.EOF", err)
	}
	for range 50 {
		w.op()
	}
	markNoWalks(t, e)
}

// TestMarkConcurrent runs the export while another goroutine applies
// random operations without pause (no interleaving by hand: the race
// detector checks the hand-offs), and compares the export with the state
// read just before the mark.
func TestMarkConcurrent(t *testing.T) {
	defer func(n int) { exportChunk = n }(exportChunk)
	exportChunk = 16
	for seed := range uint64(6) {
		e := New(3)
		w := &markWorld{t: t, e: e, r: rand.New(rand.NewPCG(seed, 99)), now: markT0, ctx: context.Background()}
		for range 2000 {
			w.op()
		}
		want := markState(t, e, w.now)
		sn, err := e.Mark(w.ctx, w.now)
		if err != nil {
			t.Fatal(err)
		}
		var got []Record
		var wg sync.WaitGroup
		stop := make(chan struct{})
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
					w.op()
				}
			}
		}()
		for {
			recs, err := sn.Next(w.ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, recs...)
		}
		close(stop)
		wg.Wait()
		sn.Close()
		if d := markDiff(markSorted(got), want); d != "" {
			t.Fatalf("seed %d: the export differs from the state at its mark:\n%s", seed, d)
		}
		e.Close()
	}
}

// TestReserve: Reserve sizes the tables up front and keeps them from
// shrinking (a sweep of the still empty tables would otherwise undo it
// during a restore) until Reserve(0).
func TestReserve(t *testing.T) {
	e := New(2)
	defer e.Close()
	ctx := context.Background()
	slots := func() []int {
		n := make([]int, 2)
		e.onEach(ctx, func(i int, s *shard) { n[i] = len(s.tab.slots) })
		return n
	}
	if err := e.Reserve(ctx, 100000); err != nil {
		t.Fatal(err)
	}
	for _, n := range slots() {
		if n < tableSize(50000) {
			t.Fatalf("reserved tables of %v slots", slots())
		}
	}
	if _, _, err := e.Sweep(ctx, markT0, 10); err != nil {
		t.Fatal(err)
	}
	for _, n := range slots() {
		if n < tableSize(50000) {
			t.Fatalf("a sweep shrank reserved tables to %v slots", slots())
		}
	}
	e.Reserve(ctx, 0)
	e.Sweep(ctx, markT0, 10)
	for _, n := range slots() {
		if n > shrinkFloor {
			t.Fatalf("after Reserve(0), a sweep left tables of %v slots", slots())
		}
	}
}
