package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
)

// fsm applies committed log entries to the engine. It reads no clock: each
// entry carries the leader's time, clamped here so it never goes backwards
// (a new leader whose clock is behind adds no tokens). Every replica that
// applied the same index therefore holds the same state.
type fsm struct {
	eng      *engine.Engine
	policies *policy.Store // replicated: changed only by log entries and snapshots

	// mu is held while an entry is applied and while a consistent view is
	// taken (snapshot mark, digest mark), so the view falls between entries.
	mu      sync.Mutex
	now     atomic.Int64  // the last applied time, clamped; written under mu
	applied atomic.Uint64 // the index of the last applied entry; written under mu

	// maxmemory (memory.go): the engine's no-create mode as the last
	// batch entry set it (under mu), and the keys eviction entries
	// removed on this replica.
	noCreate bool
	evicted  atomic.Int64

	// The slot directory (directory.go; the meta group's only state):
	// replaced whole by each change, which closes dirCh.
	dir   atomic.Pointer[ownership.Directory]
	dirMu sync.Mutex
	dirCh chan struct{}

	// Slot moves (slotmove.go; data groups only), under mu.
	slots ownership.Table
	// movedIn: the slots in state Owned, read without mu (slotmove.go).
	movedIn atomic.Pointer[ownership.MovedIn]

	// reqBuf is the array the requests of the entry being applied are
	// decoded into, reused from entry to entry (under mu).
	reqBuf []engine.Request

	// awaited reports whether a batcher goroutine of this node waits for
	// the results of the batch entry with this data (batch.go); nil: as
	// if always. The results of an entry nobody waits for (every entry on
	// a follower) go back to resultPool at once.
	awaited func(data []byte) bool

	// durable waits until the entry at an index is on this node's disk
	// (durable.go); false: the node closes and it cannot be. Nil: no wait.
	durable func(index uint64) bool
}

func newFSM(eng *engine.Engine) *fsm {
	f := &fsm{eng: eng, policies: policy.NewStore(), dirCh: make(chan struct{}), slots: ownership.NewTable()}
	f.dir.Store(ownership.EmptyDirectory())
	return f
}

func (f *fsm) directory() *ownership.Directory { return f.dir.Load() }

// scatter copies the results of the requests a batch kept (sub, at
// positions idx of res) into res; unfiltered, sub is the whole batch's.
func scatter(res, sub []engine.Result, idx []int, filtered bool) {
	if !filtered {
		copy(res, sub)
		return
	}
	for k, i := range idx {
		res[i] = sub[k]
	}
}

func (f *fsm) dirChanged() <-chan struct{} {
	f.dirMu.Lock()
	defer f.dirMu.Unlock()
	return f.dirCh
}

// setDirectory publishes d (a no-op when it is the current one).
func (f *fsm) setDirectory(d *ownership.Directory) {
	if f.dir.Swap(d) == d {
		return
	}
	f.dirMu.Lock()
	close(f.dirCh)
	f.dirCh = make(chan struct{})
	f.dirMu.Unlock()
}

// batchResult is what Apply returns for a batch entry: one result per
// request, in entry order. Readers share it and must not modify it.
type batchResult struct {
	res []engine.Result
}

// lenResult is what Apply returns for an entry.Len entry.
type lenResult struct {
	n int
}

// Apply applies one committed entry. An entry that does not decode panics:
// a replica that cannot apply the log must halt rather than diverge.
func (f *fsm) Apply(l *raft.Log) any {
	if f.durable != nil && !f.durable(l.Index) {
		// Closing, with the entry not on this node's disk: not applied,
		// so no result of it is seen (its callers' outcome is unknown).
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.applied.Store(l.Index)
	if l.Type != raft.LogCommand {
		return nil
	}
	e, err := entry.DecodeInto(l.Data, f.reqBuf)
	if err != nil {
		panic(fmt.Sprintf("cluster: log entry %d (term %d) does not decode: %v", l.Index, l.Term, err))
	}
	if cap(e.Reqs) > cap(f.reqBuf) {
		f.reqBuf = e.Reqs[:0]
	}
	now := max(e.NowNanos, f.now.Load())
	f.now.Store(now)
	ctx := context.Background()
	f.setNoCreate(&e, l) // memory.go: batches carry the no-create mode
	switch e.Type {
	case entry.Evict:
		return f.applyEvict(now, &e, l) // memory.go
	case entry.Batch:
		var res []engine.Result
		var idx []int
		filtered := false
		if f.slots.Moving() { // slots moving in or out (slotmove.go)
			res = make([]engine.Result, len(e.Reqs))
			var keep []engine.Request
			var keepNames [][]byte
			keep, keepNames, idx, filtered = f.slots.FilterOwned(e.Reqs, e.Names, res)
			if filtered {
				e.Reqs, e.Names = keep, keepNames
			}
		}
		sub, err := f.applyBatch(now, &e)
		if err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		if !filtered {
			if f.awaited != nil && !f.awaited(l.Data) {
				resultPool.put(sub)
				return nil
			}
			return &batchResult{res: sub}
		}
		scatter(res, sub, idx, filtered)
		return &batchResult{res: res}
	case entry.Flush:
		if err := f.eng.Flush(ctx); err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		return nil
	case entry.Len:
		n, err := f.eng.Len(ctx, now)
		if err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		return &lenResult{n: n}
	case entry.PolicySet, entry.PolicyDel, entry.PolicyReplace:
		return f.applyPolicyEntry(&e) // policy.go
	case entry.Meta:
		return f.applyMetaEntry(now, e.Op, l.Index) // directory.go
	case entry.Slots:
		return f.applySlots(now, e.Op, l.Index) // slotmove.go
	}
	panic(fmt.Sprintf("cluster: log entry %d has unknown entry type %d", l.Index, e.Type))
}

// applyBatch applies a batch entry at now, resolving the policies its
// requests name (policy.go).
func (f *fsm) applyBatch(now int64, e *entry.Decoded) ([]engine.Result, error) {
	res := resultPool.get(len(e.Reqs)) // pool.go; the leader puts it back (batch.go)
	if f.policies.ResolveInPlace(e.Reqs, e.Names) {
		return res, f.eng.Do(context.Background(), now, e.Reqs, res)
	}
	out, idx := f.policies.ResolveBatch(e.Reqs, e.Names, res)
	if idx == nil {
		return res, f.eng.Do(context.Background(), now, out, res)
	}
	tmp := make([]engine.Result, len(out))
	if err := f.eng.Do(context.Background(), now, out, tmp); err != nil {
		return nil, err
	}
	for k, i := range idx {
		res[i] = tmp[k]
	}
	return res, nil
}
