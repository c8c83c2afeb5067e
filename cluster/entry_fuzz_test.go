package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// FuzzDecodeEntry gives arbitrary bytes to the log entry decoder. The FSM
// panics on an entry that does not decode (by design: a replica that cannot
// apply the log halts), so the error-returning entry.Decode beneath it is
// fuzzed, along with the forwarding decoders that share its code
// (entry.DecodeV1Requests and entry.DecodeRequests validate forwarded
// batches before they reach the log; decodeResults reads the leader's
// replies on a follower):
//
//   - no input panics a decoder; a refusal is entry.ErrCorrupt;
//   - an accepted entry re-encodes to an entry that decodes the same;
//   - every request an accepted entry holds is one the engine's
//     constructors could have built. The request decoder is the only check
//     between a forwarded batch and the log, and the engine trusts its
//     requests (they are built by validating constructors): a request that
//     no constructor builds can panic a shard on every replica;
//   - an accepted entry whose requests pass that check applies through the
//     FSM without a panic.
//
// The crashers kept in testdata are requests the decoder used to accept
// (it checked framing only) and that panic a shard: an unknown op, a zero
// window, a zero emission interval, a negative RL.LOG cost.
func FuzzDecodeEntry(f *testing.F) {
	valid := []engine.Request{
		entryFuzzMust(engine.TokenBucket([]byte("k"), 10, 1, 1)),
		entryFuzzMust(engine.Throttle([]byte("t"), 5, 10, 60e9, 1)),
		entryFuzzMust(engine.GCRA([]byte("g"), 5, 10, 60, 1)),
		entryFuzzMust(engine.Fixed([]byte("f"), 10, 1000, 1)),
		entryFuzzMust(engine.Sliding([]byte("s"), 10, 1000, 2)),
		entryFuzzMust(engine.Log([]byte("l"), 10, 1000, 3)),
		entryFuzzMust(engine.Shape([]byte("q"), 10, 100, 0)),
		{Op: engine.OpDel, Key: []byte("k")},
		{Op: engine.OpExists, Key: []byte("")},
		{Op: engine.OpTTL, Key: []byte("\x00\xff")},
	}
	f.Add(batchEntry(1_700_000_000_000_000_000, valid...))
	f.Add(batchEntry(-1, valid[0]))
	f.Add(batchEntry(0))
	f.Add(entry.AppendHeader(nil, entry.Flush, 1_700_000_000_000_000_000))
	f.Add(entry.AppendHeader(nil, entry.Len, 42))
	f.Add([]byte{batchV1, 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{})
	f.Add([]byte{99, 2})
	f.Add(append([]byte{entry.NoCreate}, batchEntry(5, valid[0])...))
	f.Add(entry.AppendEvict(nil, 5, engine.EvictRange{From: 1, To: 1 << 40, N: 3}))
	f.Add(entry.AppendEvict(nil, 5, engine.EvictRange{From: 1, To: 1 << 40, N: 3, LRU: true}))
	for _, seed := range policyFuzzSeeds() { // policy_test.go
		f.Add(seed)
	}
	f.Add(kvFuzzSeed(f)) // data commands and a transaction (kv_test.go)
	f.Add(appendResults(nil, []engine.Result{{Allowed: true, Limit: 10, Remaining: 9, ResetAfter: 1e9, Err: engine.ErrWrongType}}))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The forwarding decoders: no panic, and only entry.ErrCorrupt.
		if _, err := decodeResults(data); err != nil && !errors.Is(err, entry.ErrCorrupt) {
			t.Fatalf("decodeResults: %v is not entry.ErrCorrupt", err)
		}
		if count, n := binary.Uvarint(data); n > 0 {
			if _, err := entry.DecodeV1Requests(data[n:], count); err != nil && !errors.Is(err, entry.ErrCorrupt) {
				t.Fatalf("entry.DecodeV1Requests: %v is not entry.ErrCorrupt", err)
			}
			if _, _, err := entry.DecodeRequests(data[n:], count, nil); err != nil && !errors.Is(err, entry.ErrCorrupt) {
				t.Fatalf("entry.DecodeRequests: %v is not entry.ErrCorrupt", err)
			}
		}

		e, err := entry.Decode(data)
		if err != nil {
			if !errors.Is(err, entry.ErrCorrupt) {
				t.Fatalf("entry.Decode: %v is not entry.ErrCorrupt", err)
			}
			return
		}
		again := entry.AppendHeader(nil, e.Type, e.NowNanos)
		switch {
		case e.V1: // a batch in the first request encoding (old logs)
			again = entry.AppendHeader(nil, batchV1, e.NowNanos)
			again = binary.AppendUvarint(again, uint64(len(e.Reqs)))
			again = appendRequests(again, e.Reqs)
		case isPolicyEntry(e.Type): // batches and the policy entries (policy_test.go)
			again = reencodePolicyEntry(again, &e)
		}
		if e.Type == entry.Evict { // maxmemory (memory.go)
			again = entry.AppendEvict(nil, e.NowNanos, e.Evict)
		}
		if e.Type == entry.Meta || e.Type == entry.Slots { // directory.go, slotmove.go
			again = append(again, e.Op...)
		}
		if e.NoCreate {
			again = append([]byte{entry.NoCreate}, again...)
		}
		e2, err := entry.Decode(again)
		if err != nil || !entryFuzzSame(e, e2) || e.V1 != e2.V1 || e.NoCreate != e2.NoCreate || e.Evict != e2.Evict || !bytes.Equal(e.Op, e2.Op) {
			t.Fatalf("entry %+v re-encodes to %x, which decodes to %+v, %v", e, again, e2, err)
		}
		for i := range e.Reqs {
			if e.Names != nil && e.Names[i] != nil {
				continue // a policy request: the FSM resolves it with a policy's constructor
			}
			if why := entryFuzzUnbuildable(&e.Reqs[i]); why != "" {
				t.Fatalf("entry.Decode accepts request %d %+v, which no engine constructor builds (%s): "+
					"a forwarded batch holding it passes handleForward's check, reaches the log, "+
					"and the FSM applies it on every replica", i, e.Reqs[i], why)
			}
		}
		entryFuzzApply(t, data)
	})
}

func entryFuzzMust(r engine.Request, err error) engine.Request {
	if err != nil {
		panic(err)
	}
	return r
}

func entryFuzzSame(a, b entry.Decoded) bool {
	if a.Type != b.Type || a.NowNanos != b.NowNanos || len(a.Reqs) != len(b.Reqs) {
		return false
	}
	for i := range a.Reqs {
		x, y := &a.Reqs[i], &b.Reqs[i]
		if !bytes.Equal(x.Key, y.Key) || x.Op != y.Op || x.ReadOnly != y.ReadOnly ||
			x.Interval != y.Interval || x.Limit != y.Limit || x.Window != y.Window || x.Cost != y.Cost {
			return false
		}
		if (x.Cmd == nil) != (y.Cmd == nil) || (x.Cmd != nil && !bytes.Equal(kv.Append(nil, x.Cmd), kv.Append(nil, y.Cmd))) {
			return false
		}
	}
	return true
}

// entryFuzzUnbuildable says why no constructor of the engine builds r
// (their documented bounds), or "" when one can.
func entryFuzzUnbuildable(r *engine.Request) string {
	switch r.Op {
	case engine.OpDel, engine.OpExists, engine.OpTTL:
		return ""
	case engine.OpCmd:
		// A data command: kv.Decode built it from a known command of the
		// right arity (kv.New is its constructor).
		if r.Cmd == nil {
			return "no command"
		}
		return ""
	case engine.OpGCRA, engine.OpShape:
		switch {
		case r.Interval < 1:
			return "emission interval below 1 ns"
		case r.Limit < 1:
			return "capacity below 1"
		case r.Limit > engine.MaxDuration/r.Interval:
			return "capacity*interval above MaxDuration"
		}
	case engine.OpFixed, engine.OpSliding, engine.OpLog:
		maxLimit := engine.MaxLimit
		if r.Op == engine.OpLog {
			maxLimit = engine.MaxLogLimit
		}
		switch {
		case r.Limit < 1 || r.Limit > maxLimit:
			return fmt.Sprintf("limit outside [1, %d]", maxLimit)
		case r.Window < 1 || r.Window > engine.MaxDuration:
			return "window outside [1, MaxDuration]"
		}
	default:
		return fmt.Sprintf("unknown op %d", r.Op)
	}
	if r.Cost < 0 {
		return "negative cost"
	}
	return ""
}

var (
	entryFuzzOnce   sync.Once
	entryFuzzEngine *engine.Engine
)

// entryFuzzApply applies a decodable entry through a fresh FSM over a
// shared engine (one per fuzzing process), emptied afterwards.
func entryFuzzApply(t *testing.T, data []byte) {
	entryFuzzOnce.Do(func() { entryFuzzEngine = engine.New(2) })
	f := newFSM(entryFuzzEngine)
	res := f.Apply(&raft.Log{Index: 1, Term: 1, Type: raft.LogCommand, Data: data})
	if br, ok := res.(*batchResult); ok {
		for i, r := range br.res {
			if r.Err != nil && r.Err != engine.ErrWrongType && r.Err != engine.ErrOOM && !policyResultErr(r.Err) {
				t.Fatalf("result %d: error %v", i, r.Err)
			}
		}
	}
	if err := entryFuzzEngine.Flush(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := entryFuzzEngine.SetNoCreate(context.Background(), false); err != nil {
		t.Fatal(err)
	}
}

// TestBugForwardedInvalidRequestHaltsReplicas pins what the crashers of
// FuzzDecodeEntry mean end to end: a follower (or anything that can reach
// the cluster port) forwards a batch whose request decodes but is not one
// the engine's constructors build (here an unknown op). handleForward's
// check was the request decoder, which checked framing only, so the leader
// appends the batch and applies it, and the engine panics on its shard
// goroutine: the leader dies, and so does every replica that applies the
// entry, on every restart. The batch must be refused (statusBadRequest)
// like an undecodable one. The cluster runs in a child process, whose
// crash is then a failure here rather than the end of the test binary.
func TestBugForwardedInvalidRequestHaltsReplicas(t *testing.T) {
	if os.Getenv("RLSERVER_FORWARD_CHILD") == "" {
		cmd := exec.Command(os.Args[0], "-test.run=^TestBugForwardedInvalidRequestHaltsReplicas$", "-test.count=1")
		cmd.Env = append(os.Environ(), "RLSERVER_FORWARD_CHILD=1")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("the cluster in the child process failed (%v):\n%s", err, out)
		}
		return
	}
	c := newCluster(t, 1, nil)
	l := c.leader()
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, r := range []engine.Request{
		{Op: 48, Key: []byte("k"), Interval: 1, Limit: 1, Window: 1, Cost: 1},
		{Op: engine.OpFixed, Key: []byte("k"), Limit: 10, Cost: 1},
	} {
		payload := appendRequest([]byte{1}, &r)
		resp, err := p.call(ctx, msgBatchV1, payload)
		if err != nil || resp.status != statusBadRequest {
			t.Errorf("forwarded %+v: status %d, %v; want statusBadRequest", r, resp.status, err)
		}
	}
	// The leader still serves.
	good := appendRequest([]byte{1}, ptr(allow(t, "k", 5, 1, 1)))
	if resp, err := p.call(ctx, msgBatchV1, good); err != nil || resp.status != statusOK {
		t.Fatalf("good batch after the bad ones: status %d, %v", resp.status, err)
	}
}
