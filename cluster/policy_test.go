package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

func mustPolicy(t *testing.T, line string) *policy.Policy {
	t.Helper()
	p, err := policy.Parse(strings.Fields(line))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// checkEntry is an entry.Batch entry of one all-or-nothing group: pairs of
// policy name and key, cost each.
func checkEntry(now, cost int64, pairs ...string) []byte {
	var reqs []engine.Request
	var names [][]byte
	for i := 0; i < len(pairs); i += 2 {
		reqs = append(reqs, engine.Request{Key: []byte(pairs[i+1]), Cost: cost})
		names = append(names, []byte(pairs[i]))
	}
	reqs[0].Tiers = uint16(len(reqs))
	b := entry.AppendHeader(nil, entry.Batch, now)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	return entry.AppendRequests(b, reqs, names)
}

func policyEntry(now int64, cmd byte, defs ...[]string) []byte {
	body := entry.AppendPolicy(cmd, defs)
	return append(entry.AppendHeader(nil, cmd, now), body[1:]...)
}

// TestFSMAppliesPolicies applies hand-built entries: a check resolves the
// policy in force when its entry is applied; a redefinition applies to the
// checks after it; a deleted policy makes the check an error that charges
// no tier; snapshots carry the policies.
func TestFSMAppliesPolicies(t *testing.T) {
	eng := engine.New(4)
	defer eng.Close()
	f := newFSM(eng)
	idx := uint64(0)
	apply := func(data []byte) any {
		idx++
		return f.Apply(&raft.Log{Index: idx, Term: 1, Type: raft.LogCommand, Data: data})
	}
	if r := apply(policyEntry(t0, entry.PolicySet, []string{"a", "ALLOW", "2", "0.001"})).(*policyResult); r.code != policyOK {
		t.Fatalf("set: %d", r.code)
	}
	apply(policyEntry(t0, entry.PolicySet, []string{"b", "FIXED", "5", "60000"}))
	r := apply(checkEntry(t0, 2, "a", "k1", "b", "k2")).(*batchResult)
	if !r.res[0].Allowed || r.res[0].Limit != 2 || r.res[0].Remaining != 0 || r.res[1].Remaining != 3 {
		t.Fatalf("first check: %+v", r.res)
	}
	// Rejected by a: b is not charged.
	r = apply(checkEntry(t0, 1, "b", "k2", "a", "k1")).(*batchResult)
	if r.res[1].Allowed || !r.res[0].Allowed {
		t.Fatalf("second check: %+v", r.res)
	}
	// Raising a's capacity is in force for the next check: the bucket
	// keeps its 2 tokens in use, so 2 more pass at once and b is charged.
	apply(policyEntry(t0, entry.PolicySet, []string{"a", "ALLOW", "4", "0.001"}))
	r = apply(checkEntry(t0, 1, "b", "k2", "a", "k1")).(*batchResult)
	if !r.res[1].Allowed || r.res[1].Limit != 4 || r.res[1].Remaining != 1 || r.res[0].Remaining != 2 {
		t.Fatalf("after raising a: %+v", r.res)
	}
	// Deleting b: the check fails whole, naming b's tier.
	if r := apply(policyEntry(t0, entry.PolicyDel, []string{"b"})).(*policyResult); r.code != policyExisted {
		t.Fatalf("del: %d", r.code)
	}
	if r := apply(policyEntry(t0, entry.PolicyDel, []string{"b"})).(*policyResult); r.code != policyOK {
		t.Fatalf("second del: %d", r.code)
	}
	r = apply(checkEntry(t0, 1, "a", "k1", "b", "k2")).(*batchResult)
	if !errors.Is(r.res[0].Err, engine.ErrGroupAborted) || !errors.Is(r.res[1].Err, policy.ErrUnknown) {
		t.Fatalf("check on a deleted policy: %+v", r.res)
	}
	r = apply(checkEntry(t0, 0, "b2", "k3")).(*batchResult)
	if !errors.Is(r.res[0].Err, policy.ErrUnknown) {
		t.Fatalf("check on a missing policy: %+v", r.res)
	}
	// Replace makes the set; snapshots carry it.
	apply(policyEntry(t0, entry.PolicyReplace, []string{"a", "ALLOW", "4", "0.001"}, []string{"c", "LOG", "3", "1000"}))
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	eng2 := engine.New(3)
	defer eng2.Close()
	g := newFSM(eng2)
	if err := g.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got := g.policies.Defs(); !reflect.DeepEqual(got, f.policies.Defs()) || len(got) != 2 {
		t.Fatalf("restored policies %v", got)
	}
	ctx := context.Background()
	_, d1, _ := f.Digest(ctx)
	_, d2, _ := g.Digest(ctx)
	if d1 != d2 {
		t.Fatal("digests differ after restore")
	}
	// The digest covers the policies.
	idx++
	g.Apply(&raft.Log{Index: idx - 1, Term: 1, Type: raft.LogCommand, Data: policyEntry(t0, entry.PolicyDel, []string{"c"})})
	if _, d3, _ := g.Digest(ctx); d3 == d1 {
		t.Fatal("the digest ignores the policies")
	}
}

func TestPolicyEntriesRefuseBadDefinitions(t *testing.T) {
	for _, data := range [][]byte{
		policyEntry(t0, entry.PolicySet, []string{"a", "ALLOW", "0", "1"}),
		policyEntry(t0, entry.PolicySet, []string{"bad:name", "ALLOW", "1", "1"}),
		policyEntry(t0, entry.PolicyReplace, []string{"a", "FIXED", "1", "1"}, []string{"b", "NOPE"}),
		checkEntry(t0, 1, "a", "k", "b", "k"),  // duplicate key in a group
		checkEntry(t0, -1, "a", "k"),           // negative cost
		checkEntry(t0, 1, "not/valid", "k"),    // invalid policy name
		append(checkEntry(t0, 1, "a", "k"), 0), // trailing byte
	} {
		if _, err := entry.Decode(data); !errors.Is(err, entry.ErrCorrupt) {
			t.Errorf("%x: decoded (%v)", data, err)
		}
	}
	// A group whose Tiers overruns the batch.
	b := entry.AppendHeader(nil, entry.Batch, t0)
	b = binary.AppendUvarint(b, 1)
	b = entry.AppendRequest(b, &engine.Request{Key: []byte("k"), Cost: 1, Tiers: 2}, []byte("a"))
	if _, err := entry.Decode(b); !errors.Is(err, entry.ErrCorrupt) {
		t.Errorf("overrunning group decoded: %v", err)
	}
}

// TestClusterPolicies: policies set through one node are in force on
// every node, a redefinition applies to checks after it wherever they are
// sent, and all-or-nothing holds across nodes.
func TestClusterPolicies(t *testing.T) {
	c := newCluster(t, 3, nil)
	ctx := context.Background()
	var follower *tnode
	l := c.leader()
	for _, tn := range c.nodes {
		if tn != l {
			follower = tn
			break
		}
	}
	retry := func(what string, fn func() error) {
		t.Helper()
		deadline := time.Now().Add(15 * time.Second)
		for {
			err := fn()
			if err == nil {
				return
			}
			if !errors.Is(err, ErrNoLeader) && !errors.Is(err, ErrNotAppended) || time.Now().After(deadline) {
				t.Fatalf("%s: %v", what, err)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	retry("set via follower", func() error { return follower.n.SetPolicy(ctx, mustPolicy(t, "login ALLOW 2 0.000001")) })
	retry("set via leader", func() error { return l.n.SetPolicy(ctx, mustPolicy(t, "ip FIXED 100 600000")) })
	check := func(tn *tnode, pairs ...string) []engine.Result {
		t.Helper()
		var reqs []engine.Request
		var names [][]byte
		for i := 0; i < len(pairs); i += 2 {
			reqs = append(reqs, engine.Request{Key: []byte(pairs[i+1]), Cost: 1})
			names = append(names, []byte(pairs[i]))
		}
		reqs[0].Tiers = uint16(len(reqs))
		res := make([]engine.Result, len(reqs))
		retry("check", func() error { return tn.n.DoPolicies(ctx, reqs, names, res) })
		return res
	}
	for i, tn := range []*tnode{follower, l} {
		if r := check(tn, "login", "u", "ip", "1.2.3.4"); !r[0].Allowed || !r[1].Allowed {
			t.Fatalf("check %d via %s: %+v", i, tn.id, r)
		}
	}
	// login is exhausted: rejected, ip not charged, from any node.
	for _, tn := range c.nodes {
		r := check(tn, "ip", "1.2.3.4", "login", "u")
		if r[0].Remaining != 97 || r[1].Allowed {
			t.Fatalf("rejected check via %s: %+v", tn.id, r)
		}
	}
	// Raised through a follower: in force for the next check on the
	// leader (the bucket keeps its tokens in use: 2 more at once).
	retry("raise", func() error { return follower.n.SetPolicy(ctx, mustPolicy(t, "login ALLOW 4 0.000001")) })
	if r := check(l, "login", "u"); !r[0].Allowed || r[0].Limit != 4 || r[0].Remaining != 1 {
		t.Fatalf("after raising: %+v", r)
	}
	var existed bool
	retry("del", func() error {
		var err error
		existed, err = follower.n.DelPolicy(ctx, "ip")
		return err
	})
	if !existed {
		t.Fatal("DEL ip: did not exist")
	}
	if r := check(follower, "login", "u", "ip", "x"); !errors.Is(r[1].Err, policy.ErrUnknown) || !errors.Is(r[0].Err, engine.ErrGroupAborted) {
		t.Fatalf("check on a deleted policy via a follower: %+v", r)
	}
	retry("too many", func() error {
		ps := make([]*policy.Policy, 0, 2)
		ps = append(ps, mustPolicy(t, "a ALLOW 1 1"), mustPolicy(t, "a FIXED 1 1"))
		err := follower.n.ReplacePolicies(ctx, ps)
		if !errors.Is(err, policy.ErrDuplicate) {
			t.Fatalf("replace with a duplicate: %v", err)
		}
		return nil
	})
	c.converged()
	for _, tn := range c.nodes {
		if got := tn.n.PolicyStore().Defs(); len(got) != 1 || got[0][2] != "4" {
			t.Errorf("%s: policies %v", tn.id, got)
		}
	}
}

// Helpers of FuzzDecodeEntry (entry_fuzz_test.go) for this file's entries.

func policyFuzzSeeds() [][]byte {
	plain, _ := engine.Fixed([]byte("f"), 10, 1000, 1)
	plain.Tiers = 2
	b := entry.AppendHeader(nil, entry.Batch, t0)
	b = binary.AppendUvarint(b, 3)
	b = entry.AppendRequests(b, []engine.Request{plain, {Key: []byte("k"), Cost: 2}, {Key: []byte("x"), Cost: 0, Tiers: 1}}, [][]byte{nil, []byte("p"), []byte("q")})
	return [][]byte{
		b,
		checkEntry(t0, 1, "a", "k1", "b", "k2"),
		policyEntry(t0, entry.PolicySet, []string{"a", "ALLOW", "2", "0.5"}),
		policyEntry(t0, entry.PolicyDel, []string{"a"}),
		policyEntry(t0, entry.PolicyReplace, []string{"a", "SHAPE", "2", "1"}, []string{"b", "THROTTLE", "1", "2", "3"}),
	}
}

func isPolicyEntry(cmd byte) bool {
	switch cmd {
	case entry.Batch, entry.PolicySet, entry.PolicyDel, entry.PolicyReplace:
		return true
	}
	return false
}

// reencodePolicyEntry appends e's body after its header, as the package
// writes it.
func reencodePolicyEntry(dst []byte, e *entry.Decoded) []byte {
	if e.Type == entry.Batch {
		dst = binary.AppendUvarint(dst, uint64(len(e.Reqs)))
		return entry.AppendRequests(dst, e.Reqs, e.Names)
	}
	return append(dst, entry.AppendPolicy(e.Type, e.Defs)[1:]...)
}

// policyResultErr reports the errors a batch result may hold because of
// a policy: an unknown policy, and the other tiers of its group.
func policyResultErr(err error) bool {
	return errors.Is(err, policy.ErrUnknown) || errors.Is(err, engine.ErrGroupAborted)
}
