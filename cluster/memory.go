package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// maxmemory in a cluster. The engine never measures memory, and replicas'
// memory differs, so only the leader's controller (memlimit.Controller)
// decides, and its decisions travel in the log:
//
//   - No-create mode (noeviction above the limit): the leader wraps every
//     batch entry it writes in entry.NoCreate, and each replica applies a
//     wrapped batch with the engine's no-create mode on and any other
//     batch with it off. The mode is thus a property of each batch, not
//     state to replicate: a replica restored from a snapshot, or a new
//     leader, cannot disagree about it.
//   - Eviction: the leader proposes entry.Evict entries, each an
//     engine.EvictRange stamped with the leader's time; engine.Evict picks
//     the same keys on every replica (it depends on the keys, not on a
//     table's layout or the shard count).

// nodeMemory is a node's maxmemory state.
type nodeMemory struct {
	noCreate atomic.Bool // the leader wraps batches in entry.NoCreate
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

// evictResult is what Apply returns for an entry.Evict entry.
type evictResult struct{ n int }

// Evict proposes one eviction round on the leader and returns the keys it
// removed. It is not forwarded: a follower gets errNotLeader.
func (n *Node) Evict(ctx context.Context, r engine.EvictRange) (int, error) {
	if n.raft.State() != raft.Leader {
		return 0, errNotLeader
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	resp, err := n.applyWait(ctx, entry.AppendEvict(nil, time.Now().UnixNano(), r))
	if err != nil {
		return 0, err
	}
	if er, ok := resp.(*evictResult); ok {
		return er.n, nil
	}
	return 0, nil
}

// setNoCreate puts the engine in the no-create mode of batch entry e
// before it is applied (other entries leave it as it is). Under f.mu.
func (f *fsm) setNoCreate(e *entry.Decoded, l *raft.Log) {
	if e.Type != entry.Batch || e.NoCreate == f.noCreate {
		return
	}
	if err := f.eng.SetNoCreate(context.Background(), e.NoCreate); err != nil {
		panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
	}
	f.noCreate = e.NoCreate
}

// applyEvict applies an entry.Evict entry. Under f.mu.
func (f *fsm) applyEvict(now int64, e *entry.Decoded, l *raft.Log) any {
	n, err := f.eng.Evict(context.Background(), now, e.Evict)
	if err != nil {
		panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
	}
	f.evicted.Add(int64(n))
	return &evictResult{n: n}
}

// wrapNoCreate returns the prefix a leader writes before a batch entry:
// entry.NoCreate while it refuses new keys, nothing otherwise.
func (n *Node) wrapNoCreate(dst []byte) []byte {
	if n.mem.noCreate.Load() {
		dst = append(dst, entry.NoCreate)
	}
	return dst
}

// CmdWrites counts the data commands that changed a key on this replica
// (engine.Engine.CmdWrites): parked blocking clients watch it.
func (n *Node) CmdWrites() uint64 { return n.fsm.eng.CmdWrites() }
