package cluster

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
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
	// taken (snapshot capture, digest), so the view falls between entries.
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
	dir   atomic.Pointer[Directory]
	dirMu sync.Mutex
	dirCh chan struct{}

	// Slot moves (slotmove.go; data groups only), under mu.
	slots slotTable
	// movedIn: the slots in state slotOwned, read without mu (slotmove.go).
	movedIn atomic.Pointer[movedIn]

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
	f := &fsm{eng: eng, policies: policy.NewStore(), dirCh: make(chan struct{}), slots: newSlotTable()}
	f.dir.Store(emptyDirectory())
	return f
}

func (f *fsm) directory() *Directory { return f.dir.Load() }

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
func (f *fsm) setDirectory(d *Directory) {
	if f.dir.Swap(d) == d {
		return
	}
	f.dirMu.Lock()
	close(f.dirCh)
	f.dirCh = make(chan struct{})
	f.dirMu.Unlock()
}

// batchResult is what Apply returns for a cmdBatch entry: one result per
// request, in entry order. Readers share it and must not modify it.
type batchResult struct {
	res []engine.Result
}

// lenResult is what Apply returns for a cmdLen entry.
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
	e, err := decodeEntryInto(l.Data, f.reqBuf)
	if err != nil {
		panic(fmt.Sprintf("cluster: log entry %d (term %d) does not decode: %v", l.Index, l.Term, err))
	}
	if cap(e.reqs) > cap(f.reqBuf) {
		f.reqBuf = e.reqs[:0]
	}
	now := max(e.nowNanos, f.now.Load())
	f.now.Store(now)
	ctx := context.Background()
	f.setNoCreate(&e, l) // memory.go: batches carry the no-create mode
	switch e.cmd {
	case cmdEvict:
		return f.applyEvict(now, &e, l) // memory.go
	case cmdBatch:
		res := make([]engine.Result, len(e.reqs))
		reqs := e.reqs
		keep, _, idx, filtered := f.filterOwned(reqs, nil, res) // slotmove.go
		if filtered {
			reqs = keep
		}
		sub := make([]engine.Result, len(reqs))
		if err := f.eng.Do(ctx, now, reqs, sub); err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		scatter(res, sub, idx, filtered)
		return &batchResult{res: res}
	case cmdFlush:
		if err := f.eng.Flush(ctx); err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		return nil
	case cmdLen:
		n, err := f.eng.Len(ctx, now)
		if err != nil {
			panic(fmt.Sprintf("cluster: applying log entry %d: %v", l.Index, err))
		}
		return &lenResult{n: n}
	case cmdBatch2:
		var res []engine.Result
		var idx []int
		filtered := false
		if len(f.slots.state) > 0 { // slots moving in or out (slotmove.go)
			res = make([]engine.Result, len(e.reqs))
			var keep []engine.Request
			var keepNames [][]byte
			keep, keepNames, idx, filtered = f.filterOwned(e.reqs, e.names, res) // slotmove.go
			if filtered {
				e.reqs, e.names = keep, keepNames
			}
		}
		sub, err := f.applyBatch2(now, &e)
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
	case cmdPolicySet, cmdPolicyDel, cmdPolicyReplace:
		return f.applyPolicyEntry(&e)
	case cmdMeta:
		return f.applyMetaEntry(now, e.meta, l.Index) // directory.go
	case cmdSlots:
		return f.applySlots(now, e.meta, l.Index) // slotmove.go
	}
	panic(fmt.Sprintf("cluster: log entry %d has unknown command type %d", l.Index, e.cmd))
}
