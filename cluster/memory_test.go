package cluster

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// TestFSMNoCreateAndEvictEntries: a batch wrapped in entry.NoCreate refuses
// new keys and serves existing ones, the next plain batch creates again,
// and an eviction entry removes the same keys on replicas with other
// shard counts.
func TestFSMNoCreateAndEvictEntries(t *testing.T) {
	var fsms []*fsm
	for _, shards := range []int{1, 4} {
		eng := engine.New(shards)
		defer eng.Close()
		fsms = append(fsms, newFSM(eng))
	}
	idx := uint64(0)
	apply := func(data []byte) []any {
		idx++
		var out []any
		for _, f := range fsms {
			out = append(out, f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}))
		}
		return out
	}
	// Rate 1/s, capacity 1000: taking c tokens at t0 leaves the key live
	// until t0 + c seconds.
	var reqs []engine.Request
	for i := range 200 {
		reqs = append(reqs, allow(t, fmt.Sprintf("k%03d", i), 1000, 1, int64(1+i%50)))
	}
	apply(batchEntry(t0, reqs...))

	wrapped := append([]byte{entry.NoCreate}, batchEntry(t0, allow(t, "new", 1000, 1, 1), allow(t, "k007", 1000, 1, 1))...)
	for i, r := range apply(wrapped) {
		res := r.(*batchResult).res
		if !errors.Is(res[0].Err, engine.ErrOOM) || res[1].Err != nil || !res[1].Allowed {
			t.Fatalf("replica %d: wrapped batch results %+v, want [OOM, allowed]", i, res)
		}
	}
	for i, r := range apply(batchEntry(t0, allow(t, "new", 1000, 1, 1))) {
		if res := r.(*batchResult).res; res[0].Err != nil || !res[0].Allowed {
			t.Fatalf("replica %d: plain batch after a wrapped one %+v", i, res)
		}
	}
	for i, r := range apply(entry.AppendEvict(nil, t0, engine.EvictRange{From: 0, To: math.MaxUint64, N: 30})) {
		if n := r.(*evictResult).n; n != 30 {
			t.Fatalf("replica %d evicted %d, want 30", i, n)
		}
	}
	// The 30 closest to full: "new" (1 token taken), then, as costs
	// cycle 1..50 over 200 keys, the 28 keys of costs 1 to 7 and one of
	// the three left at 8 (k007 took one more).
	for i, f := range fsms {
		for _, k := range []string{"new", "k000", "k006", "k056", "k106", "k156"} {
			if n := length(t, f, k); n != 0 {
				t.Errorf("replica %d kept %s", i, k)
			}
		}
		if length(t, f, "k008") != 1 || length(t, f, "k007") != 1 {
			t.Errorf("replica %d evicted a key far from full", i)
		}
	}
	d0, d1 := digestOf(t, fsms[0]), digestOf(t, fsms[1])
	if d0 != d1 {
		t.Fatalf("replicas differ after eviction:\n%s\n%s", d0, d1)
	}
	if got := fsms[0].evicted.Load(); got != 30 {
		t.Errorf("evicted counter %d, want 30", got)
	}
}

// length is 1 when key exists at the FSM's time.
func length(t *testing.T, f *fsm, key string) int {
	t.Helper()
	res := make([]engine.Result, 1)
	if err := f.eng.Do(context.Background(), f.now.Load(), []engine.Request{{Op: engine.OpExists, Key: []byte(key)}}, res); err != nil {
		t.Fatal(err)
	}
	return int(res[0].Value)
}

// digestOf lists an FSM's keys and states, sorted (Export is by shard).
func digestOf(t *testing.T, f *fsm) string {
	t.Helper()
	var keys []string
	if _, err := f.eng.Export(context.Background(), f.now.Load(), func(r engine.Record) error {
		keys = append(keys, fmt.Sprintf("%s=%v", r.Key, r.Fields))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	sortStrings(keys)
	return fmt.Sprint(len(keys), keys)
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// TestClusterNoCreateAndEviction: the leader's no-create mode refuses new
// keys through any node, and eviction entries leave every replica with the
// same keys.
func TestClusterNoCreateAndEviction(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	for i := range 300 {
		do(t, c.nodes[i%3], allow(t, fmt.Sprintf("key-%03d", i), 1000, 1e-3, int64(1+i%97)))
	}
	// Leadership may move on a loaded machine (the in-process timeouts are
	// short): an operation refused as not-leader was not applied, so it is
	// retried on the current leader.
	onLeader := func(op func(*Node) error) {
		t.Helper()
		for range 50 {
			l = c.leader()
			err := op(l.n)
			if err == nil {
				return
			}
			if !errors.Is(err, errNotLeader) {
				t.Fatal(err)
			}
		}
		t.Fatal("no stable leader")
	}
	onLeader(func(n *Node) error { return n.SetNoCreate(context.Background(), true) })
	for _, tn := range c.nodes {
		if r := do(t, tn, allow(t, "fresh-"+tn.id, 10, 1, 1)); !errors.Is(r.Err, engine.ErrOOM) {
			t.Fatalf("new key via %s in no-create mode: %+v", tn.id, r)
		}
		if r := do(t, tn, allow(t, "key-001", 1000, 1e-3, 1)); r.Err != nil || !r.Allowed {
			t.Fatalf("existing key via %s in no-create mode: %+v", tn.id, r)
		}
	}
	onLeader(func(n *Node) error { return n.SetNoCreate(context.Background(), false) })
	if r := do(t, c.nodes[1], allow(t, "fresh-again", 10, 1, 1)); r.Err != nil || !r.Allowed {
		t.Fatalf("new key after no-create mode: %+v", r)
	}
	total := 0
	for round := range uint64(8) {
		w := uint64(math.MaxUint64 / 8)
		onLeader(func(nd *Node) error {
			n, err := nd.Evict(context.Background(), engine.EvictRange{From: round * w, To: round*w + w - 1, N: 10})
			total += n
			return err
		})
	}
	if total != 80 {
		t.Fatalf("evicted %d keys in 8 rounds of 10, want 80", total)
	}
	if _, err := c.nodes[1].n.Evict(context.Background(), engine.EvictRange{To: 1, N: 1}); err == nil && c.leader() != c.nodes[1] {
		t.Error("a follower proposed an eviction")
	}
	c.converged()
	for _, tn := range c.live() {
		waitFor(t, 10e9, "evictions counted on "+tn.id, func() bool { return tn.n.EvictedKeys() == 80 })
	}
}
