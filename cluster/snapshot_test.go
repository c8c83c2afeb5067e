package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// snapLoad is the n-th entry of a write load over keys k0..k(keys-1) and
// new keys: token buckets charged, data keys set, hashed and deleted,
// buckets deleted and created again, and now and then a FLUSHALL.
func snapLoad(t *testing.T, n, keys int) []byte {
	r := rand.New(rand.NewPCG(uint64(n), 5))
	now := t0 + int64(n)*1e6
	if n%97 == 96 {
		return entry.AppendHeader(nil, entry.Flush, now)
	}
	reqs := make([]engine.Request, 32)
	for i := range reqs {
		k := fmt.Sprintf("k%d", r.IntN(keys+keys/4)) // a fifth are new
		switch r.IntN(6) {
		case 0:
			reqs[i] = kvCmd(t, false, "del", k).Request()
		case 1:
			reqs[i] = kvCmd(t, false, "set", "s"+k, fmt.Sprint(n)).Request()
		case 2:
			reqs[i] = kvCmd(t, false, "hset", "h"+k, fmt.Sprint(r.IntN(4)), fmt.Sprint(n)).Request()
		default:
			reqs[i] = allow(t, k, 100, 0.001, int64(1+r.IntN(3)))
		}
	}
	return snapEntry(now, reqs...)
}

// snapEntry is a batch entry in the current encoding (data commands
// included).
func snapEntry(now int64, reqs ...engine.Request) []byte {
	b := entry.AppendHeader(nil, entry.Batch, now)
	b = binary.AppendUvarint(b, uint64(len(reqs)))
	return entry.AppendRequests(b, reqs, make([][]byte, len(reqs)))
}

// hookSink is a bufSink that calls hook on every write.
type hookSink struct {
	bufSink
	hook func()
}

func (s *hookSink) Write(p []byte) (int, error) {
	s.hook()
	return s.bufSink.Write(p)
}

// TestSnapshotPointInTimeUnderLoad takes a snapshot, applies entries
// while it is persisted, and restores it into an FSM
// with another shard count: the restored state is the state at the
// snapshot's index (same digest), and the entries after it, applied to
// the copy, bring it to the original's digest. A snapshot that read
// records changed after its mark would fail both.
func TestSnapshotPointInTimeUnderLoad(t *testing.T) {
	const keys = 60000
	eng := engine.New(4)
	defer eng.Close()
	f := newFSM(eng)
	idx := uint64(0)
	apply := func(f *fsm, data []byte, i uint64) {
		f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data})
	}
	// Every key first, then some load.
	for i := 0; i < keys; i += 500 {
		reqs := make([]engine.Request, 0, 500)
		for j := i; j < i+500; j++ {
			reqs = append(reqs, allow(t, fmt.Sprintf("k%d", j), 100, 0.001, 1))
			if j%3 == 0 {
				reqs = append(reqs, kvCmd(t, false, "hset", fmt.Sprintf("hk%d", j), "f", "v").Request())
			}
		}
		idx++
		apply(f, snapEntry(t0, reqs...), idx)
	}
	for range 50 {
		idx++
		apply(f, snapLoad(t, int(idx), keys), idx)
	}
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	atIdx, atDigest, err := f.Digest(ctx)
	if err != nil || atIdx != idx {
		t.Fatalf("digest at the snapshot: %d, %v", atIdx, err)
	}
	// Persist writes to the sink every 256 KiB (its buffer); each write
	// applies the next entries before it returns, so the walk meets them.
	const later = 400
	applied := uint64(0)
	sink := &hookSink{hook: func() {
		for range 40 {
			if applied < later {
				applied++
				apply(f, snapLoad(t, int(idx+applied), keys), idx+applied)
			}
		}
	}}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	if applied < 100 {
		t.Fatalf("only %d entries applied during Persist", applied)
	}
	for applied < later {
		applied++
		apply(f, snapLoad(t, int(idx+applied), keys), idx+applied)
	}

	eng2 := engine.New(7)
	defer eng2.Close()
	g := newFSM(eng2)
	if err := g.Restore(readCloser{bytes.NewReader(sink.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if i, d, err := g.Digest(ctx); err != nil || i != atIdx || d != atDigest {
		t.Fatalf("restored: index %d digest %.16s (%v), want %d %.16s", i, d, err, atIdx, atDigest)
	}
	for i := range uint64(later) {
		apply(g, snapLoad(t, int(idx+1+i), keys), idx+1+i)
	}
	i1, d1, _ := f.Digest(ctx)
	i2, d2, _ := g.Digest(ctx)
	if i1 != i2 || d1 != d2 {
		t.Fatalf("after the same entries: %d %.16s, the original %d %.16s", i2, d2, i1, d1)
	}
}

// TestSnapshotRestoresSortedFormat restores a snapshot written before
// snapshots were streamed (records sorted, no Unordered flag: the bytes
// testdata/encodings.golden held until then), so a data folder of an
// older version still opens.
func TestSnapshotRestoresSortedFormat(t *testing.T) {
	h, err := os.ReadFile("testdata/snapshot-sorted.hex")
	if err != nil {
		t.Fatal(err)
	}
	b, err := hex.DecodeString(strings.TrimSpace(string(h)))
	if err != nil {
		t.Fatal(err)
	}
	eng := engine.New(2)
	defer eng.Close()
	f := newFSM(eng)
	if err := f.Restore(readCloser{bytes.NewReader(b)}); err != nil {
		t.Fatal(err)
	}
	n, err := eng.Len(context.Background(), 5)
	if err != nil || n != 2 || f.applied.Load() != 6 || f.policies.Defs() == nil {
		t.Fatalf("restored %d keys (%v), applied %d, policies %v", n, err, f.applied.Load(), f.policies.Defs())
	}
}

// TestSnapshotDamagedLeavesNoHalfState: a snapshot damaged after its
// first blocks fails to restore and leaves the engine empty, not holding
// the records before the damage.
func TestSnapshotDamagedLeavesNoHalfState(t *testing.T) {
	eng := engine.New(2)
	defer eng.Close()
	f := newFSM(eng)
	reqs := make([]engine.Request, 0, 20000)
	for i := range 20000 {
		reqs = append(reqs, allow(t, fmt.Sprintf("key:%d", i), 100, 0.001, 1))
	}
	f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: batchEntry(t0, reqs...)})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	var sink bufSink
	if err := snap.Persist(&sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	bad := bytes.Clone(sink.Bytes())
	bad[len(bad)*3/4] ^= 0x10
	eng2 := engine.New(2)
	defer eng2.Close()
	g := newFSM(eng2)
	if err := g.Restore(readCloser{bytes.NewReader(bad)}); err == nil {
		t.Fatal("damaged snapshot restored")
	}
	if n, _ := eng2.Len(context.Background(), t0); n != 0 {
		t.Fatalf("%d keys left after a failed restore", n)
	}
}

// TestClusterSnapshotUnderLoad: the leader takes a snapshot while clients
// write, a follower that was down receives it (the log behind it is
// compacted) and catches up from the log: every replica ends with the
// same digest.
func TestClusterSnapshotUnderLoad(t *testing.T) {
	c := newCluster(t, 3, func(cfg *Config) {
		cfg.TrailingLogs = 8
		cfg.SnapshotThreshold = 1 << 20 // only the snapshot the test asks for
		cfg.SnapshotInterval = time.Hour
	})
	l := c.leader()
	var follower *tnode
	for _, tn := range c.nodes {
		if tn != l {
			follower = tn
		}
	}
	follower.stop()
	const keys = 60000
	ctx := context.Background()
	for i := 0; i < keys; i += 1000 {
		reqs := make([]engine.Request, 0, 1000)
		for j := i; j < i+1000; j++ {
			reqs = append(reqs, allow(t, fmt.Sprintf("k%d", j), 100, 0.001, 1))
		}
		if err := l.n.Do(ctx, reqs, make([]engine.Result, len(reqs))); err != nil {
			t.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				select {
				case <-stop:
					return
				default:
				}
				reqs := make([]engine.Request, 64)
				for i := range reqs {
					k := fmt.Sprintf("k%d", r.IntN(keys+keys/4))
					if r.IntN(5) == 0 {
						reqs[i] = kvCmd(t, false, "del", k).Request()
					} else {
						reqs[i] = allow(t, k, 100, 0.001, 1)
					}
				}
				// Errors (a spurious election) only end this writer.
				if err := l.n.Do(ctx, reqs, make([]engine.Result, len(reqs))); err != nil {
					return
				}
			}
		}()
	}
	before := l.n.fsm.applied.Load()
	if err := l.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	after := l.n.fsm.applied.Load()
	t.Logf("entries applied while the snapshot was taken: %d", after-before)
	waitFor(t, 10*time.Second, "log compaction", func() bool {
		first, _ := l.n.store.FirstIndex()
		return first > before
	})
	c.start(follower, false)
	waitFor(t, 20*time.Second, "the follower to restore", func() bool {
		return follower.n.fsm.applied.Load() > before
	})
	close(stop)
	wg.Wait()
	c.converged()
}
