package clienttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/engine"
)

// Issue 20: transactions are atomic under concurrent clients on
// overlapping keys across shards. One rlserver with --shards 4; 8 keys, two
// on each shard (engine.ShardOf, the server's placement); several go-redis
// clients (RESP2 and RESP3) run MULTI, INCRBY on 2 to 4 random keys, GET
// of all 8 keys, EXEC, at once. Then:
//
//   - SumInvariant: each transaction's increments sum to 0, so every EXEC
//     must see the 8 values sum to 0, its own INCRBY results must equal
//     its GETs, and the final values equal the totals of the increments.
//   - SerialOrder: increments are positive, so each key's values grow and
//     every INCRBY result places its transaction in that key's history;
//     every GET places its transaction between two writers of the key. The
//     order these imply (with each client's own program order) must be
//     acyclic: a serial order exists that explains every EXEC's replies,
//     and the final values equal the last writes.
//   - WatchCAS: WATCH two keys on different shards, GET them, MULTI SET
//     both to one more, EXEC, retried on a null reply: no update is lost
//     (both end at the number of successful EXECs), and an EXEC whose
//     GETs saw the keys differ (another EXEC came between them) fails.
const (
	atomicClients = 6
	atomicTxns    = 300 // per client
	atomicKeys    = 8
	atomicShards  = 4
)

// atomicKeySet returns 8 keys with the prefix, two on each of the 4 shards.
func atomicKeySet(t *testing.T, prefix string) []string {
	t.Helper()
	var keys []string
	per := make([]int, atomicShards)
	for i := 0; len(keys) < atomicKeys && i < 10000; i++ {
		k := prefix + strconv.Itoa(i)
		sh := engine.ShardOf([]byte(k), atomicShards)
		if per[sh] < atomicKeys/atomicShards {
			per[sh]++
			keys = append(keys, k)
		}
	}
	if len(keys) != atomicKeys {
		t.Fatalf("no %d keys over %d shards", atomicKeys, atomicShards)
	}
	return keys
}

// atomicTxn is one EXEC's record.
type atomicTxn struct {
	client, seq int
	deltas      map[int]int64 // key index -> increment
	incr        map[int]int64 // key index -> INCRBY's reply
	got         []int64       // GET of every key (0 when missing)
}

// runAtomicTxn runs MULTI, INCRBY each delta's key, GET every key, EXEC.
func runAtomicTxn(ctx context.Context, c *redis.Client, keys []string, deltas map[int]int64) (incr map[int]int64, got []int64, err error) {
	order := make([]int, 0, len(deltas))
	for k := range deltas {
		order = append(order, k)
	}
	sort.Ints(order)
	rand.Shuffle(len(order), func(i, j int) { order[i], order[j] = order[j], order[i] })
	incrs := make([]*redis.IntCmd, len(order))
	gets := make([]*redis.StringCmd, len(keys))
	_, err = c.TxPipelined(ctx, func(p redis.Pipeliner) error {
		for i, k := range order {
			incrs[i] = p.IncrBy(ctx, keys[k], deltas[k])
		}
		for i, k := range keys {
			gets[i] = p.Get(ctx, k)
		}
		return nil
	})
	if err != nil && !errors.Is(err, redis.Nil) {
		return nil, nil, err
	}
	incr = map[int]int64{}
	for i, k := range order {
		n, err := incrs[i].Result()
		if err != nil {
			return nil, nil, fmt.Errorf("INCRBY %s: %v", keys[k], err)
		}
		incr[k] = n
	}
	got = make([]int64, len(keys))
	for i, g := range gets {
		s, err := g.Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("GET %s: %v", keys[i], err)
		}
		if got[i], err = strconv.ParseInt(s, 10, 64); err != nil {
			return nil, nil, fmt.Errorf("GET %s: %q", keys[i], s)
		}
	}
	return incr, got, nil
}

// runAtomicLoad runs atomicClients clients of atomicTxns transactions each,
// with the deltas pick returns, and returns every EXEC's record.
func runAtomicLoad(t *testing.T, s *server, keys []string, pick func(r *rand.Rand) map[int]int64) []*atomicTxn {
	t.Helper()
	ctx := context.Background()
	var (
		mu   sync.Mutex
		all  []*atomicTxn
		errs []error
		wg   sync.WaitGroup
	)
	for ci := range atomicClients {
		c := newGoRedis(t, s, &redis.Options{Protocol: 2 + ci%2, ReadTimeout: 30 * time.Second, WriteTimeout: 30 * time.Second})
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(ci), uint64(time.Now().UnixNano())))
			for seq := range atomicTxns {
				d := pick(r)
				incr, got, err := runAtomicTxn(ctx, c, keys, d)
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("client %d txn %d: %v", ci, seq, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				all = append(all, &atomicTxn{client: ci, seq: seq, deltas: d, incr: incr, got: got})
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
	return all
}

// finalValues reads every key.
func finalValues(t *testing.T, c *redis.Client, keys []string) []int64 {
	t.Helper()
	out := make([]int64, len(keys))
	for i, k := range keys {
		v, err := c.Get(context.Background(), k).Result()
		if errors.Is(err, redis.Nil) {
			continue
		}
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		if out[i], err = strconv.ParseInt(v, 10, 64); err != nil {
			t.Fatalf("GET %s: %q", k, v)
		}
	}
	return out
}

// pickKeys returns 2 to 4 distinct key indexes.
func pickKeys(r *rand.Rand) []int {
	return r.Perm(atomicKeys)[:2+r.IntN(3)]
}

func TestTxnAtomic(t *testing.T) {
	s := start(t, opts{args: []string{"--shards", strconv.Itoa(atomicShards)}})
	c := newGoRedis(t, s, nil)

	t.Run("SumInvariant", func(t *testing.T) {
		keys := atomicKeySet(t, "sum:")
		txns := runAtomicLoad(t, s, keys, func(r *rand.Rand) map[int]int64 {
			ks := pickKeys(r)
			d := map[int]int64{}
			var sum int64
			for _, k := range ks[:len(ks)-1] {
				v := int64(r.IntN(11) - 5)
				if v == 0 {
					v = 1
				}
				d[k] = v
				sum += v
			}
			d[ks[len(ks)-1]] = -sum
			return d
		})
		totals := make([]int64, atomicKeys)
		bad := 0
		for _, tx := range txns {
			var sum int64
			for _, v := range tx.got {
				sum += v
			}
			ok := sum == 0
			for k, n := range tx.incr {
				ok = ok && tx.got[k] == n
				totals[k] += tx.deltas[k]
			}
			if !ok {
				if bad++; bad <= 10 {
					t.Errorf("client %d txn %d: deltas %v, INCRBY replies %v, GETs %v (sum %d); want the sum 0 and the GETs equal to the INCRBY replies",
						tx.client, tx.seq, tx.deltas, tx.incr, tx.got, sum)
				}
			}
		}
		if bad > 0 {
			t.Errorf("%d of %d EXECs saw a state no serial order gives", bad, len(txns))
		}
		if got := finalValues(t, c, keys); fmt.Sprint(got) != fmt.Sprint(totals) {
			t.Errorf("final values %v, want the totals %v", got, totals)
		}
		t.Logf("%d transactions over %d keys on %d shards, %d EXECs saw a serial state", len(txns), atomicKeys, atomicShards, len(txns)-bad)
	})

	t.Run("SerialOrder", func(t *testing.T) {
		keys := atomicKeySet(t, "ser:")
		txns := runAtomicLoad(t, s, keys, func(r *rand.Rand) map[int]int64 {
			d := map[int]int64{}
			for _, k := range pickKeys(r) {
				d[k] = int64(1 + r.IntN(100))
			}
			return d
		})
		if err := checkSerial(txns, finalValues(t, c, keys)); err != nil {
			t.Error(err)
		} else {
			t.Logf("%d transactions over %d keys on %d shards have a serial order", len(txns), atomicKeys, atomicShards)
		}
	})

	t.Run("WatchCAS", func(t *testing.T) {
		keys := atomicKeySet(t, "cas:")
		// Two keys on different shards.
		a, b := keys[0], ""
		for _, k := range keys[1:] {
			if engine.ShardOf([]byte(k), atomicShards) != engine.ShardOf([]byte(a), atomicShards) {
				b = k
				break
			}
		}
		ctx := context.Background()
		const clients, each = 4, 40
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		retries := 0
		for ci := range clients {
			cc := newGoRedis(t, s, &redis.Options{Protocol: 2 + ci%2, ReadTimeout: 30 * time.Second})
			wg.Add(1)
			go func() {
				defer wg.Done()
				for range each {
					for {
						err := cc.Watch(ctx, func(tx *redis.Tx) error {
							va, err := tx.Get(ctx, a).Int64()
							if err != nil && !errors.Is(err, redis.Nil) {
								return err
							}
							vb, err := tx.Get(ctx, b).Int64()
							if err != nil && !errors.Is(err, redis.Nil) {
								return err
							}
							// The two GETs are not one read: another client's
							// EXEC may come between them, and then this EXEC
							// must fail, as a watched key changed.
							_, err = tx.TxPipelined(ctx, func(p redis.Pipeliner) error {
								p.Set(ctx, a, va+1, 0)
								p.Set(ctx, b, vb+1, 0)
								return nil
							})
							if err == nil && va != vb {
								return fmt.Errorf("EXEC ran after %s = %d and %s = %d were read under WATCH: one changed, so it must fail", a, va, b, vb)
							}
							return err
						}, a, b)
						if errors.Is(err, redis.TxFailedErr) {
							mu.Lock()
							retries++
							mu.Unlock()
							continue
						}
						if err != nil {
							mu.Lock()
							errs = append(errs, err)
							mu.Unlock()
							return
						}
						break
					}
				}
			}()
		}
		wg.Wait()
		for _, err := range errs {
			t.Error(err)
		}
		want := int64(clients * each)
		if got := finalValues(t, c, []string{a, b}); got[0] != want || got[1] != want {
			t.Errorf("%s, %s = %v after %d successful EXECs, want %d each", a, b, got, want, want)
		}
		t.Logf("%d successful EXECs, %d null replies (a watched key changed) retried", want, retries)
	})
}

// checkSerial finds a serial order of txns (increments > 0, every
// transaction GETs every key after its INCRBYs) that explains every reply
// and the final values, or says why there is none.
func checkSerial(txns []*atomicTxn, final []int64) error {
	n := len(txns)
	// Each key's writers, by the value they left.
	type write struct {
		tx     int
		before int64 // the value the INCRBY found
		after  int64
	}
	writers := make([][]write, atomicKeys)
	for i, tx := range txns {
		for k, r := range tx.incr {
			writers[k] = append(writers[k], write{i, r - tx.deltas[k], r})
			if tx.got[k] != r {
				return fmt.Errorf("client %d txn %d: INCRBY key %d answered %d but its GET %d", tx.client, tx.seq, k, r, tx.got[k])
			}
		}
	}
	succ := make([][]int, n)
	edge := func(a, b int) { succ[a] = append(succ[a], b) }
	after := make([]map[int64]int, atomicKeys) // key -> value -> writer's index in writers[k]
	for k := range writers {
		ws := writers[k]
		sort.Slice(ws, func(i, j int) bool { return ws[i].after < ws[j].after })
		after[k] = map[int64]int{}
		prev := int64(0)
		for i, w := range ws {
			if w.before != prev {
				return fmt.Errorf("key %d: client %d txn %d's INCRBY found %d, but the value before it was %d (lost or duplicated update)",
					k, txns[w.tx].client, txns[w.tx].seq, w.before, prev)
			}
			prev = w.after
			after[k][w.after] = i
			if i > 0 {
				edge(ws[i-1].tx, w.tx)
			}
		}
		if final[k] != prev {
			return fmt.Errorf("key %d: final value %d, want %d (the last write)", k, final[k], prev)
		}
	}
	for i, tx := range txns {
		for k, v := range tx.got {
			if _, wrote := tx.incr[k]; wrote {
				continue
			}
			ws := writers[k]
			next := 0
			if v != 0 {
				w, ok := after[k][v]
				if !ok {
					return fmt.Errorf("client %d txn %d: GET key %d = %d, a value no write left", tx.client, tx.seq, k, v)
				}
				edge(ws[w].tx, i)
				next = w + 1
			}
			if next < len(ws) {
				edge(i, ws[next].tx)
			}
		}
	}
	// Each client's own transactions run in its order.
	byClient := map[[2]int]int{}
	for i, tx := range txns {
		byClient[[2]int{tx.client, tx.seq}] = i
	}
	for i, tx := range txns {
		if j, ok := byClient[[2]int{tx.client, tx.seq + 1}]; ok {
			edge(i, j)
		}
	}
	// Kahn's algorithm: an order exists iff every transaction gets placed.
	indeg := make([]int, n)
	for _, ss := range succ {
		for _, b := range ss {
			indeg[b]++
		}
	}
	var ready []int
	for i := range indeg {
		if indeg[i] == 0 {
			ready = append(ready, i)
		}
	}
	placed := 0
	for len(ready) > 0 {
		a := ready[len(ready)-1]
		ready = ready[:len(ready)-1]
		placed++
		for _, b := range succ[a] {
			if indeg[b]--; indeg[b] == 0 {
				ready = append(ready, b)
			}
		}
	}
	if placed != n {
		var stuck []string
		for i := range indeg {
			if indeg[i] > 0 && len(stuck) < 5 {
				tx := txns[i]
				stuck = append(stuck, fmt.Sprintf("client %d txn %d (deltas %v, INCRBY %v, GET %v)", tx.client, tx.seq, tx.deltas, tx.incr, tx.got))
			}
		}
		return fmt.Errorf("no serial order explains the replies: %d of %d transactions are on a cycle, among them %s",
			n-placed, n, strings.Join(stuck, "; "))
	}
	return nil
}

// TestTxnAtomicChecker: checkSerial accepts a serial history and refuses a
// fractured read (one transaction sees another's write on one key but not
// on the other) and a lost update.
func TestTxnAtomicChecker(t *testing.T) {
	zero := func() []int64 { return make([]int64, atomicKeys) }
	with := func(vals map[int]int64) []int64 {
		g := zero()
		for k, v := range vals {
			g[k] = v
		}
		return g
	}
	// T1 adds 5 to keys 0 and 1; T2 adds 2 to key 2.
	t1 := &atomicTxn{client: 0, seq: 0, deltas: map[int]int64{0: 5, 1: 5}, incr: map[int]int64{0: 5, 1: 5}, got: with(map[int]int64{0: 5, 1: 5})}
	t2 := &atomicTxn{client: 1, seq: 0, deltas: map[int]int64{2: 2}, incr: map[int]int64{2: 2}, got: with(map[int]int64{0: 5, 1: 5, 2: 2})}
	if err := checkSerial([]*atomicTxn{t1, t2}, with(map[int]int64{0: 5, 1: 5, 2: 2})); err != nil {
		t.Errorf("serial history refused: %v", err)
	}
	fractured := &atomicTxn{client: 1, seq: 0, deltas: map[int]int64{2: 2}, incr: map[int]int64{2: 2}, got: with(map[int]int64{0: 5, 2: 2})}
	if err := checkSerial([]*atomicTxn{t1, fractured}, with(map[int]int64{0: 5, 1: 5, 2: 2})); err == nil {
		t.Error("a fractured read was accepted")
	}
	// T3 also added 3 to key 0 but found 0, as T1 did: T1's write is lost.
	t3 := &atomicTxn{client: 2, seq: 0, deltas: map[int]int64{0: 3}, incr: map[int]int64{0: 3}, got: with(map[int]int64{0: 3})}
	if err := checkSerial([]*atomicTxn{t1, t3}, with(map[int]int64{0: 8, 1: 5})); err == nil {
		t.Error("a lost update was accepted")
	}
	// Write skew through two keys: A reads key 1 before B's write and
	// writes key 0; B reads key 0 before A's write and writes key 1.
	a := &atomicTxn{client: 0, seq: 0, deltas: map[int]int64{0: 1}, incr: map[int]int64{0: 1}, got: with(map[int]int64{0: 1})}
	b := &atomicTxn{client: 1, seq: 0, deltas: map[int]int64{1: 1}, incr: map[int]int64{1: 1}, got: with(map[int]int64{1: 1})}
	if err := checkSerial([]*atomicTxn{a, b}, with(map[int]int64{0: 1, 1: 1})); err == nil {
		t.Error("a cycle was accepted")
	}
}
