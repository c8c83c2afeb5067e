package engine

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
)

// TestGroupsSerializable interleaves multi-tier groups with single-key
// requests on overlapping keys across shards, from several goroutines,
// and checks that what they observed is one serial order of whole
// operations (a group being one operation):
//
//   - All calls run at one instant, so nothing refills: each key's use
//     only grows, and a Result's Remaining tells the use the call saw
//     (limit - Remaining: after the charge when it charged, before it
//     otherwise).
//   - Per key, the charges must form one chain where each starts where
//     the previous ended (no lost or doubled charge), and every other
//     call must have seen a use on that chain.
//   - The operations, ordered by the chains, by where each observation
//     falls on them, and by each goroutine's batches (a batch ends before
//     the next begins), must form an acyclic graph: a cycle means some
//     group was not atomic (seen charged on one key and not on another),
//     or a tier was charged for a rejected group.
//   - Replaying the operations one by one in a topological order on a
//     fresh 1-shard engine (the sequential model) gives exactly the same
//     results.
//   - The use each key ends with is the sum of the costs of the charges
//     reported, so a rejected group charged nothing.
func TestGroupsSerializable(t *testing.T) {
	const (
		shards  = 4
		workers = 4
		batches = 150
	)
	type keySpec struct {
		op    Op
		limit int64
	}
	specs := []keySpec{
		{OpGCRA, 300}, {OpGCRA, 150}, {OpFixed, 250}, {OpSliding, 200},
		{OpLog, 200}, {OpShape, 200}, {OpGCRA, 120}, {OpFixed, 100},
	}
	keys := make([]string, len(specs))
	for i := range keys {
		keys[i] = keyOn(shards, i%shards, fmt.Sprintf("r%d-", i))
	}
	wrong := keyOn(shards, 1, "wrong-") // holds a fixed window; used as a token bucket
	build := func(ki int, cost int64, scaled bool) Request {
		key := []byte(keys[ki])
		var r Request
		var err error
		const rate, windowMs = 1e-6, 1e12 // nothing refills or turns within the test
		switch sp := specs[ki]; sp.op {
		case OpGCRA:
			r, err = TokenBucket(key, sp.limit, rate, cost)
		case OpShape:
			r, err = Shape(key, sp.limit, rate, cost)
		case OpFixed:
			r, err = Fixed(key, sp.limit, windowMs, cost)
		case OpSliding:
			r, err = Sliding(key, sp.limit, windowMs, cost)
		case OpLog:
			r, err = Log(key, sp.limit, windowMs, cost)
		}
		if err != nil {
			panic(err)
		}
		r.Scaled = scaled
		return r
	}

	// operation is one plain request or one group, as sent and answered.
	type operation struct {
		worker, batch int
		reqs          []Request
		res           []Result
		ki            []int // logical key of each request, -1 for wrong
	}
	e := newEngine(t, shards)
	ctx := context.Background()
	w0, err := Fixed([]byte(wrong), 5, 1e12, 1)
	if err != nil {
		t.Fatal(err)
	}
	if r := do1(t, e, t0, w0); !r.Allowed {
		t.Fatal(r)
	}
	perWorker := make([][]*operation, workers)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(w), 99))
			for b := range batches {
				var ops []*operation
				var reqs []Request
				for range 1 + rng.IntN(4) {
					op := &operation{worker: w, batch: b}
					n := 1
					if rng.IntN(2) == 0 {
						n = 2 + rng.IntN(3)
					}
					for j, ki := range rng.Perm(len(specs))[:n] {
						cost := int64(1 + rng.IntN(2))
						if rng.IntN(10) == 0 {
							cost = 0 // a peek
						}
						r := build(ki, cost, rng.IntN(2) == 0)
						if n > 1 && j == n-1 && rng.IntN(20) == 0 {
							r = build(0, 1, false)
							r.Key = []byte(wrong)
							ki = -1
						}
						op.reqs = append(op.reqs, r)
						op.ki = append(op.ki, ki)
					}
					if n > 1 {
						op.reqs[0].Tiers = uint16(n)
					}
					reqs = append(reqs, op.reqs...)
					ops = append(ops, op)
				}
				res := make([]Result, len(reqs))
				if err := e.Do(ctx, t0, reqs, res); err != nil {
					panic(err)
				}
				for _, op := range ops {
					op.res, res = res[:len(op.reqs)], res[len(op.reqs):]
				}
				perWorker[w] = append(perWorker[w], ops...)
			}
		}()
	}
	wg.Wait()

	// The graph: nodes are operations, then one barrier per batch.
	var all []*operation
	for _, ops := range perWorker {
		all = append(all, ops...)
	}
	nOps := len(all)
	barrier := func(w, b int) int { return nOps + w*batches + b }
	edges := make([][]int, nOps+workers*batches)
	edge := func(a, b int) { edges[a] = append(edges[a], b) }
	for i, op := range all {
		if op.batch > 0 {
			edge(barrier(op.worker, op.batch-1), i)
		}
		edge(i, barrier(op.worker, op.batch))
	}
	// Charges per key, and observations of uncharged use.
	type charge struct {
		node       int
		cost, used int64 // used after the charge
	}
	chains := make([][]charge, len(specs))
	type seen struct {
		node int
		used int64
	}
	var observed [][]seen = make([][]seen, len(specs))
	totals := make([]int64, len(specs))
	for i, op := range all {
		groupAllowed := true
		for _, r := range op.res {
			groupAllowed = groupAllowed && r.Err == nil && r.Allowed
		}
		for j, r := range op.res {
			ki := op.ki[j]
			if r.Err != nil {
				if ki >= 0 && r.Err != ErrGroupAborted || ki < 0 && r.Err != ErrWrongType {
					t.Fatalf("operation %d tier %d: %v", i, j, r.Err)
				}
				continue
			}
			if ki < 0 {
				t.Fatalf("operation %d: the wrong-type tier got %+v", i, r)
			}
			used := specs[ki].limit - r.Remaining
			if r.Allowed && op.reqs[j].Cost > 0 && groupAllowed {
				chains[ki] = append(chains[ki], charge{node: i, cost: op.reqs[j].Cost, used: used})
				totals[ki] += op.reqs[j].Cost
			} else {
				if !r.Allowed && op.reqs[j].Cost <= r.Remaining {
					t.Fatalf("operation %d tier %d: denied with %d remaining for cost %d", i, j, r.Remaining, op.reqs[j].Cost)
				}
				if r.Allowed {
					// A read-only evaluation (a peek, or an allowing tier
					// of a rejected group) reports the use after the
					// charge it would make.
					used -= op.reqs[j].Cost
				}
				observed[ki] = append(observed[ki], seen{node: i, used: used})
			}
		}
	}
	for ki, ch := range chains {
		at := map[int64]int{} // use after a charge -> its position in the chain
		byUse := make(map[int64]charge, len(ch))
		for _, c := range ch {
			if _, dup := byUse[c.used]; dup {
				t.Fatalf("key %d: two charges ended at use %d", ki, c.used)
			}
			byUse[c.used] = c
		}
		// Walk the chain from use 0.
		var ordered []charge
		for u := int64(0); len(ordered) < len(ch); {
			next, ok := byUse[u+1]
			if !ok || next.cost != 1 {
				next, ok = byUse[u+2]
				if !ok || next.cost != 2 {
					t.Fatalf("key %d: no charge starts at use %d (a lost or doubled charge): %+v", ki, u, ch)
				}
			}
			at[next.used] = len(ordered)
			ordered = append(ordered, next)
			u = next.used
		}
		for j := 1; j < len(ordered); j++ {
			edge(ordered[j-1].node, ordered[j].node)
		}
		for _, s := range observed[ki] {
			pos := -1 // before the first charge
			if s.used != 0 {
				p, ok := at[s.used]
				if !ok {
					t.Fatalf("key %d: operation %d saw use %d, which no serial order produces", ki, s.node, s.used)
				}
				pos = p
			}
			if pos >= 0 && ordered[pos].node != s.node {
				edge(ordered[pos].node, s.node)
			}
			if pos+1 < len(ordered) && ordered[pos+1].node != s.node {
				edge(s.node, ordered[pos+1].node)
			}
		}
	}
	// Kahn's algorithm: a topological order of the operations, or a cycle.
	indeg := make([]int, len(edges))
	for _, out := range edges {
		for _, b := range out {
			indeg[b]++
		}
	}
	var queue, order []int
	for n, d := range indeg {
		if d == 0 {
			queue = append(queue, n)
		}
	}
	visited := 0
	for len(queue) > 0 {
		n := queue[0]
		queue = queue[1:]
		visited++
		if n < nOps {
			order = append(order, n)
		}
		for _, b := range edges[n] {
			if indeg[b]--; indeg[b] == 0 {
				queue = append(queue, b)
			}
		}
	}
	if visited != len(edges) {
		t.Fatalf("the observations admit no serial order: %d of %d nodes are on or behind a cycle", len(edges)-visited, len(edges))
	}
	// The sequential model: the same operations, one at a time, in that order.
	m := newEngine(t, 1)
	do1(t, m, t0, w0)
	charged, rejected := 0, 0
	for _, n := range order {
		op := all[n]
		res := make([]Result, len(op.reqs))
		if err := m.Do(ctx, t0, op.reqs, res); err != nil {
			t.Fatal(err)
		}
		for j := range res {
			if res[j] != op.res[j] {
				t.Fatalf("operation %d (worker %d, batch %d) request %d: concurrent %+v, sequential %+v",
					n, op.worker, op.batch, j, op.res[j], res[j])
			}
		}
		if len(op.reqs) > 1 {
			if res[0].Err == nil && res[0].Allowed && res[len(res)-1].Allowed {
				charged++
			} else {
				rejected++
			}
		}
	}
	// Every key ends at the sum of its reported charges.
	for ki := range specs {
		r := do1(t, e, t0, build(ki, 0, false))
		if used := specs[ki].limit - r.Remaining; used != totals[ki] {
			t.Errorf("key %d: used %d, reported charges %d", ki, used, totals[ki])
		}
	}
	if charged == 0 || rejected == 0 {
		t.Errorf("%d groups charged, %d rejected: the test needs both", charged, rejected)
	}
	t.Logf("%d operations, %d groups charged, %d not", nOps, charged, rejected)
}
