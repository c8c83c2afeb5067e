package cluster

import (
	"context"
	"encoding/binary"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
)

// maxmemory in a cluster. The engine never measures memory, and replicas'
// memory differs, so only the leader's controller (memlimit.Controller)
// decides, and its decisions travel in the log:
//
//   - No-create mode (noeviction above the limit): the leader wraps every
//     batch entry it writes in cmdNoCreate, and each replica applies a
//     wrapped batch with the engine's no-create mode on and any other
//     batch with it off. The mode is thus a property of each batch, not
//     state to replicate: a replica restored from a snapshot, or a new
//     leader, cannot disagree about it.
//   - Eviction: the leader proposes cmdEvict entries, each an
//     engine.EvictRange stamped with the leader's time; engine.Evict picks
//     the same keys on every replica (it depends on the keys, not on a
//     table's layout or the shard count).

// nodeMemory is a node's maxmemory state.
type nodeMemory struct {
	noCreate atomic.Bool // the leader wraps batches in cmdNoCreate
}

// Usage reads this replica's stored keys and table memory (no log entry).
func (n *Node) Usage(ctx context.Context) (engine.Usage, error) { return n.fsm.eng.Usage(ctx) }

// MemoryLeader reports whether this node leads: only the leader's memory
// monitor acts.
func (n *Node) MemoryLeader() bool { return n.raft.State() == raft.Leader }

// SetNoCreate makes this node, while it leads, write its batches in
// no-create mode (on) or normally.
func (n *Node) SetNoCreate(_ context.Context, on bool) error {
	n.mem.noCreate.Store(on)
	return nil
}

// EvictedKeys counts the keys the eviction entries this replica applied
// removed (INFO evicted_keys).
func (n *Node) EvictedKeys() int64 { return n.fsm.evicted.Load() }

// evictResult is what Apply returns for a cmdEvict entry.
type evictResult struct{ n int }

// Evict proposes one eviction round on the leader and returns the keys it
// removed. It is not forwarded: a follower gets errNotLeader.
func (n *Node) Evict(ctx context.Context, r engine.EvictRange) (int, error) {
	if n.raft.State() != raft.Leader {
		return 0, errNotLeader
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	resp, err := n.applyWait(ctx, appendEvict(nil, time.Now().UnixNano(), r))
	if err != nil {
		return 0, err
	}
	if er, ok := resp.(*evictResult); ok {
		return er.n, nil
	}
	return 0, nil
}

// appendEvict encodes a cmdEvict entry.
func appendEvict(dst []byte, nowNanos int64, r engine.EvictRange) []byte {
	dst = appendEntryHeader(dst, cmdEvict, nowNanos)
	dst = binary.AppendUvarint(dst, uint64(r.N))
	dst = binary.BigEndian.AppendUint64(dst, r.From)
	dst = binary.BigEndian.AppendUint64(dst, r.To)
	if r.LRU {
		dst = append(dst, 1) // allkeys-lru; absent for volatile-ttl, as before
	}
	return dst
}

// decodeEvict decodes the body of a cmdEvict entry (after the header).
func decodeEvict(e *entry, b []byte) error {
	d := decoder{b: b}
	count := d.uvarint()
	if d.err != nil || (len(d.b) != 16 && (len(d.b) != 17 || d.b[16] != 1)) || count > 1<<31 {
		return errCorrupt
	}
	from, to := binary.BigEndian.Uint64(d.b), binary.BigEndian.Uint64(d.b[8:])
	if from > to {
		return errCorrupt
	}
	e.evict = engine.EvictRange{From: from, To: to, N: int(count), LRU: len(d.b) == 17}
	return nil
}

// decodeNoCreate decodes the entry a cmdNoCreate byte wraps: a batch.
func decodeNoCreate(b []byte, buf []engine.Request) (entry, error) {
	e, err := decodeEntryInto(b, buf)
	if err != nil {
		return e, err
	}
	if !isBatch(e.cmd) || e.noCreate {
		return e, fmt.Errorf("%w: cmdNoCreate wraps command type %d", errCorrupt, e.cmd)
	}
	e.noCreate = true
	return e, nil
}

func isBatch(cmd byte) bool { return cmd == cmdBatch || cmd == cmdBatch2 }

// setNoCreate puts the engine in the no-create mode of batch entry e
// before it is applied (other entries leave it as it is). Under f.mu.
func (f *fsm) setNoCreate(e *entry, l *raft.Log) {
	if !isBatch(e.cmd) || e.noCreate == f.noCreate {
		return
	}
	if err := f.eng.SetNoCreate(context.Background(), e.noCreate); err != nil {
		panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
	}
	f.noCreate = e.noCreate
}

// applyEvict applies a cmdEvict entry. Under f.mu.
func (f *fsm) applyEvict(now int64, e *entry, l *raft.Log) any {
	n, err := f.eng.Evict(context.Background(), now, e.evict)
	if err != nil {
		panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
	}
	f.evicted.Add(int64(n))
	return &evictResult{n: n}
}

// wrapNoCreate returns the prefix a leader writes before a batch entry:
// cmdNoCreate while it refuses new keys, nothing otherwise.
func (n *Node) wrapNoCreate(dst []byte) []byte {
	if n.mem.noCreate.Load() {
		dst = append(dst, cmdNoCreate)
	}
	return dst
}
