package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
)

// Group commit (doc.go, Shared log). A call that writes queues an op,
// then:
//
//   - Append takes the writer's lock (wmu) and, unless another writer
//     took its op meanwhile, writes every queued op, all groups', in one
//     write (flushLocked). It returns once its records are written.
//   - StoreLogs, DeleteRange, Set and Drop wait for the sync leader's
//     lock (smu). Its holder writes every queued op in one write, then
//     fdatasyncs outside wmu, so appends go on meanwhile and queue up for
//     the next sync. A caller whose records a sync covered while it
//     waited returns without syncing: one fdatasync releases every
//     caller it covered.

// opKind is what a queued call writes.
type opKind uint8

const (
	opAppend opKind = iota // entries (StoreLogs, Append)
	opDelete               // DeleteRange lo-hi: resolved to a front, back or whole deletion by the writer
	opSet                  // a stable key
	opDrop                 // the whole group
)

// An op's state: written (its records are in the log, or it had none to
// write) or failed (nothing of it is).
const (
	opQueued uint32 = iota
	opWritten
	opFailed
)

// walOp is a queued call.
type walOp struct {
	g      *GroupLog
	kind   opKind
	logs   []*raft.Log
	lo, hi uint64
	key    string
	val    []byte

	err   error  // set before state
	seq   uint64 // its last record's; 0 when it wrote none
	state atomic.Uint32
}

// finish sets op's outcome; the writer calls it, or Close under qmu.
func (op *walOp) finish(err error) {
	op.err = err
	if err != nil {
		op.seq = 0
		op.state.Store(opFailed)
		return
	}
	op.state.Store(opWritten)
}

// walPlan is one record of a write: its effect, applied once the write
// succeeded, and where it lies in the write.
type walPlan struct {
	op    *walOp // nil: a live record Reclaim moves forward
	g     *GroupLog
	kind  walKind
	index uint64 // walEntry: the entry's; walFront: the new first index; walBack: lo
	key   string // walSet
	val   []byte // walSet
	rel   int64  // offset in the write
	n     uint32
}

// walShadow is a group's bounds as the ops planned so far in a write
// leave them (first 0: empty): later ops of the same write are checked
// against it.
type walShadow struct{ first, last uint64 }

func (s *Shared) enqueue(op *walOp) error {
	if op.kind == opAppend {
		op.g.wroteAt.Store(time.Now().UnixNano())
	}
	s.qmu.Lock()
	defer s.qmu.Unlock()
	if s.qclosed {
		return ErrClosed
	}
	s.queue = append(s.queue, op)
	return nil
}

// submitWrite queues op and returns once it is written (Append).
func (s *Shared) submitWrite(op *walOp) error {
	if err := s.enqueue(op); err != nil {
		return err
	}
	s.wmu.Lock()
	if op.state.Load() == opQueued {
		s.flushLocked()
	}
	s.wmu.Unlock()
	// flushLocked took every queued op, this one too, unless Close had
	// taken it; either finished it under qmu, which flushLocked took.
	op.state.Load()
	return op.err
}

// submitSync queues op and returns once it is written and synced.
func (s *Shared) submitSync(op *walOp) error {
	if err := s.enqueue(op); err != nil {
		return err
	}
	// covered reports whether op is done with: failed, or written and
	// synced.
	covered := func() bool {
		switch op.state.Load() {
		case opFailed:
			return true
		case opWritten:
			return op.seq <= s.synced.Load()
		}
		return false
	}
	for !covered() {
		if err := s.leadSync(covered); err != nil {
			if covered() {
				break
			}
			return err
		}
	}
	if op.state.Load() == opFailed {
		return op.err
	}
	return nil
}

// syncTo returns once every record up to seq target is synced.
func (s *Shared) syncTo(target uint64) error {
	covered := func() bool { return s.synced.Load() >= target }
	for !covered() {
		if err := s.leadSync(covered); err != nil {
			return err
		}
	}
	return nil
}

// leadSync becomes the sync leader and syncs, unless covered holds by
// then; when another caller leads, it waits for that sync to end
// instead, and returns nil for the caller to look again. Every caller a
// sync covered is released at once when it ends (wake), not one by one
// through smu: they queue their next writes while the next leader's
// sync runs, so that the sync after it takes them all.
func (s *Shared) leadSync(covered func() bool) error {
	s.wakeMu.Lock()
	wake := s.wake
	s.wakeMu.Unlock()
	if !s.smu.TryLock() {
		<-wake // closed by the leader, after it unlocks smu
		return nil
	}
	var err error
	if !covered() {
		// The callers the last sync released are runnable, about to
		// queue their next writes: let them, so that this sync takes
		// them too. (BenchmarkSharedAppend, 3 and 9 groups: 0.50 and
		// 0.20 fdatasyncs per append without, 0.34 and 0.12 with, and
		// half the time per append; 1 group alike within the noise.)
		runtime.Gosched()
		if s.lingers(time.Now().UnixNano()) {
			time.Sleep(syncLinger)
		}
		err = s.syncLocked()
	}
	s.unlockSync()
	return err
}

// Lingering. Followers of different groups on one process store their
// leaders' entries at moments that do not line up, so with several
// groups active each sync covered one group's append: three groups per
// process made 2.4 times the fdatasyncs per decision of one group, and
// with them the wake-ups, context switches and smaller entries (a
// leader's next entry gathers what arrived while the last committed).
// So while two or more groups have written in the last activeWindow, a
// sync leader waits syncLinger before it syncs, for the other groups'
// appends to join it; with one group active it never waits, and a lone
// group's latency is as before. Measured (three processes, redis-benchmark
// --cluster -c 50 -P 32 RL.ALLOW, this 2-core VM, one run each): three
// groups per process 221k decisions/s at 6.59 us of CPU per decision
// summed without the wait, 239k at 5.56 waiting 100 us, 284k at 4.70
// waiting 300 us, 230k at 5.85 waiting 1 ms; one group 308k at 4.18.
const (
	syncLinger   = 300 * time.Microsecond
	activeWindow = 5 * time.Millisecond
)

// lingers reports whether a sync leader waits (syncLinger) before it
// syncs, at Unix ns now: whether two or more groups queued entries in
// the last activeWindow.
func (s *Shared) lingers(now int64) bool {
	s.mu.RLock()
	defer s.mu.RUnlock()
	active := 0
	for _, g := range s.groups {
		if now-g.wroteAt.Load() < int64(activeWindow) {
			if active++; active == 2 {
				return true
			}
		}
	}
	return false
}

// unlockSync unlocks smu and wakes every caller waiting for the sync
// that held it.
func (s *Shared) unlockSync() {
	s.smu.Unlock()
	s.wakeMu.Lock()
	close(s.wake)
	s.wake = make(chan struct{})
	s.wakeMu.Unlock()
}

// syncLocked writes what is queued, then fdatasyncs the last segment
// outside wmu and marks everything written before as synced; the caller
// holds smu. Earlier segments were synced when the log moved past them
// (tailLocked).
func (s *Shared) syncLocked() error {
	s.wmu.Lock()
	s.flushLocked()
	if s.closed {
		s.wmu.Unlock()
		return ErrClosed
	}
	if err := s.brokenErr(); err != nil {
		s.wmu.Unlock()
		return err
	}
	target := s.nextSeq - 1
	if target <= s.synced.Load() || len(s.segs) == 0 {
		s.wmu.Unlock()
		return nil
	}
	g := s.segs[len(s.segs)-1]
	start, end := g.synced, g.size
	s.wmu.Unlock()

	if err := s.syncSeg(g, start, end, target); err != nil {
		return err
	}
	s.wmu.Lock()
	g.synced = max(g.synced, end)
	s.wmu.Unlock()
	return nil
}

// syncSeg fdatasyncs g's file, whose records from start to end are not
// synced yet, between the test hooks, and then marks every record up to
// seq target synced. A failure breaks the log: Linux may have dropped
// the pages it could not write, and a later fdatasync can succeed
// without them, so only reopening tells what is on disk.
//
// The log's fdatasyncs run one at a time (fsyncMu): Linux reports a
// failed writeback to one fdatasync of the file only, so a sync running
// beside the one that failed could return success for pages that were
// lost. Under fsyncMu, the failed one has broken the log before another
// starts, and that one then fails too.
func (s *Shared) syncSeg(g *walSeg, start, end int64, target uint64) error {
	s.fsyncMu.Lock()
	defer s.fsyncMu.Unlock()
	if err := s.brokenErr(); err != nil {
		return err
	}
	if h := s.opts.Hooks.BeforeSync; h != nil {
		h(g.f, start, end)
	}
	if err := s.syncData(g.f); err != nil {
		return s.breakOn(err)
	}
	if h := s.opts.Hooks.AfterSync; h != nil {
		h(g.f, start, end)
	}
	s.pmu.Lock()
	s.advanceLocked(target)
	s.pmu.Unlock()
	return nil
}

// advanceLocked records that every record up to seq target is synced
// and raises each group's Durable to its last entry at or below it; the
// caller holds pmu.
func (s *Shared) advanceLocked(target uint64) {
	if target <= s.synced.Load() {
		return
	}
	s.synced.Store(target)
	for g := range s.pending {
		k := 0
		for k < len(g.marks) && g.marks[k].seq <= target {
			k++
		}
		if k == 0 {
			continue
		}
		g.durable.Store(g.marks[k-1].index)
		g.marks = g.marks[k:]
		if len(g.marks) == 0 {
			g.marks = nil
			delete(s.pending, g)
		}
	}
}

// flushLocked writes every queued op in one write and finishes each; the
// caller holds wmu. An op that does not fit its group's log (not
// consecutive, a gap) fails alone; a failed write fails them all and
// leaves the log as it was.
func (s *Shared) flushLocked() {
	s.qmu.Lock()
	ops := s.queue
	s.queue = nil
	s.qmu.Unlock()
	if len(ops) == 0 {
		return
	}
	var fail error
	if s.closed {
		fail = ErrClosed
	} else {
		fail = s.brokenErr()
	}
	if fail != nil {
		for _, op := range ops {
			op.finish(fail)
		}
		return
	}
	buf, plan, kept := s.buf[:0], s.plan[:0], s.kept[:0]
	clear(s.shadow)
	appends := 0
	for _, op := range ops {
		nb, np := len(buf), len(plan)
		var err error
		buf, plan, err = s.planOp(op, buf, plan, s.nextSeq+uint64(len(plan)))
		if err != nil {
			buf, plan = buf[:nb], plan[:np]
			op.finish(err)
			continue
		}
		if len(plan) == np {
			op.finish(nil) // nothing to write: a deletion of nothing
			continue
		}
		op.seq = s.nextSeq + uint64(len(plan)) - 1
		if op.kind == opAppend {
			appends++
		}
		kept = append(kept, op)
	}
	err := s.commitLocked(buf, plan)
	for _, op := range kept {
		op.finish(err)
	}
	if err == nil {
		s.stats.ops.Add(uint64(len(kept)))
		s.stats.appends.Add(uint64(appends))
	}
	clear(kept)
	clear(plan)
	s.kept, s.plan = kept[:0], plan[:0]
	if cap(buf) <= 16<<20 { // keep the buffer, unless a rare batch made it huge
		s.buf = buf[:0]
	}
}

// planOp appends op's records, numbered from seq, to buf and plan, if it
// fits its group's log as the ops before it in this write leave it.
func (s *Shared) planOp(op *walOp, buf []byte, plan []walPlan, seq uint64) ([]byte, []walPlan, error) {
	g := op.g
	sh, ok := s.shadow[g]
	if !ok {
		sh = walShadow{g.first, g.last()}
	}
	add := func(kind walKind, index uint64) {
		start := len(buf)
		buf = walBegin(buf, seq, g.id, kind)
		switch kind {
		case walFront, walBack:
			buf = binary.LittleEndian.AppendUint64(buf, index)
		case walSet:
			buf = binary.LittleEndian.AppendUint32(buf, uint32(len(op.key)))
			buf = append(buf, op.key...)
			buf = append(buf, op.val...)
		}
		buf = walEnd(buf, start)
		plan = append(plan, walPlan{op: op, g: g, kind: kind, index: index, key: op.key, val: op.val, rel: int64(start), n: uint32(len(buf) - start)})
		seq++
	}
	switch op.kind {
	case opAppend:
		next := op.logs[0].Index
		if next == 0 || (sh.first != 0 && next != sh.last+1) {
			return buf, plan, fmt.Errorf("raftlog: group %d: %w: index %d after %d", g.id, ErrNotConsecutive, next, sh.last)
		}
		for i, l := range op.logs {
			if l.Index != next+uint64(i) {
				return buf, plan, fmt.Errorf("raftlog: group %d: %w: index %d after %d", g.id, ErrNotConsecutive, l.Index, next+uint64(i)-1)
			}
			if size := walEntrySize(l); size > math.MaxUint32 {
				return buf, plan, walTooLarge(fmt.Sprintf("group %d's index %d", g.id, l.Index), size)
			}
			start := len(buf)
			buf = walBegin(buf, seq, g.id, walEntry)
			buf = appendEntry(buf, l)
			buf = walEnd(buf, start)
			plan = append(plan, walPlan{op: op, g: g, kind: walEntry, index: l.Index, rel: int64(start), n: uint32(len(buf) - start)})
			seq++
		}
		if sh.first == 0 {
			sh.first = next
		}
		sh.last = op.logs[len(op.logs)-1].Index
	case opDelete:
		if sh.first == 0 || op.lo > op.hi {
			return buf, plan, nil
		}
		lo, hi := max(op.lo, sh.first), min(op.hi, sh.last)
		switch {
		case lo > hi:
			return buf, plan, nil
		case lo == sh.first && hi == sh.last:
			add(walBack, 0)
			sh = walShadow{}
		case lo == sh.first:
			add(walFront, hi+1)
			sh.first = hi + 1
		case hi == sh.last:
			add(walBack, lo)
			sh.last = lo - 1
		default:
			return buf, plan, fmt.Errorf("raftlog: group %d: %w: %d-%d inside %d-%d", g.id, ErrGap, lo, hi, sh.first, sh.last)
		}
	case opSet:
		if size := uint64(walPrefixSize) + 4 + uint64(len(op.key)) + uint64(len(op.val)); size > math.MaxUint32 {
			return buf, plan, walTooLarge(fmt.Sprintf("group %d's key %q", g.id, op.key), size)
		}
		add(walSet, 0)
	case opDrop:
		add(walDrop, 0)
		sh = walShadow{}
	}
	s.shadow[g] = sh
	return buf, plan, nil
}

// commitLocked writes buf, the records of plan, at the end of the log
// and applies their effects; the caller holds wmu. On error nothing is
// applied and the segment is cut back to where it was.
func (s *Shared) commitLocked(buf []byte, plan []walPlan) error {
	if len(plan) == 0 {
		return nil
	}
	tail, rolled, err := s.tailLocked()
	if err != nil {
		return err
	}
	off := tail.size
	end := off + int64(len(buf))
	alloc := max(tail.alloc, end)
	if end > tail.alloc {
		alloc = preallocate(tail.f, end, s.opts.SegmentSize)
	}
	if _, err := tail.f.WriteAt(buf, off); err != nil {
		return s.undoLocked(tail, off, fmt.Errorf("raftlog: %w", err))
	}
	s.stats.writes.Add(1)
	s.stats.records.Add(uint64(len(plan)))
	kick := rolled
	seq := s.nextSeq
	s.mu.Lock()
	s.pmu.Lock()
	for i := range plan {
		r := &plan[i]
		g := r.g
		l := loc{seg: tail.ord, n: r.n, off: off + r.rel}
		switch r.kind {
		case walEntry:
			s.put(g, r.index, l)
			if r.op != nil {
				g.marks = append(g.marks, mark{seq: seq, index: r.index})
				s.pending[g] = struct{}{}
			}
		case walFront:
			s.killBelow(g, r.index)
			if len(g.locs) == 0 {
				s.resetDurableLocked(g)
			}
			kick = true
		case walBack:
			s.killFrom(g, r.index)
			if r.index == 0 {
				s.resetDurableLocked(g)
				kick = true
				break
			}
			// The deleted entries' writes no longer count, synced or
			// not: their indexes will hold other entries.
			k := len(g.marks)
			for k > 0 && g.marks[k-1].index >= r.index {
				k--
			}
			g.marks = g.marks[:k]
			if d := g.durable.Load(); d >= r.index {
				g.durable.Store(r.index - 1)
			}
		case walSet:
			s.setKey(g, r.key, r.val, l)
		case walDrop:
			s.dropGroup(g)
			s.resetDurableLocked(g)
			kick = true
		}
		if r.op != nil {
			g.lastSeq = seq
		}
		seq++
	}
	tail.size, tail.alloc, tail.next = end, alloc, seq
	s.nextSeq = seq
	if s.opts.NoSync {
		s.advanceLocked(seq - 1)
	}
	s.pmu.Unlock()
	s.mu.Unlock()
	if kick {
		s.kickReclaim()
	}
	return nil
}

// resetDurableLocked empties g's Durable and marks, for a log emptied;
// the caller holds pmu.
func (s *Shared) resetDurableLocked(g *GroupLog) {
	g.marks = nil
	delete(s.pending, g)
	g.durable.Store(0)
}

// undoLocked cuts tail back to off, its good size, after a write that
// failed, and returns err. If that fails too, the log is broken: a
// partial write left between records would read as damage once later
// records follow it.
func (s *Shared) undoLocked(tail *walSeg, off int64, err error) error {
	terr := s.truncate(tail.f, off)
	if terr == nil {
		tail.alloc = off
		s.fsyncMu.Lock()
		terr = s.syncData(tail.f)
		if terr != nil {
			s.breakOn(terr)
		}
		s.fsyncMu.Unlock()
	}
	if terr != nil {
		return errors.Join(err, s.breakOn(terr))
	}
	return err
}

// tailLocked returns the segment to write to, starting a new one when
// there is none or the last is full, and whether it did after a full
// one. The full one is synced first: only the last segment holds records
// not synced.
func (s *Shared) tailLocked() (*walSeg, bool, error) {
	var g *walSeg
	if n := len(s.segs); n > 0 {
		g = s.segs[n-1]
	}
	if g != nil && (g.size < s.opts.SegmentSize || g.size == 0) {
		return g, false, nil
	}
	ord := uint32(1)
	if g != nil {
		if g.synced < g.size {
			if err := s.syncSeg(g, g.synced, g.size, g.next-1); err != nil {
				return nil, false, err
			}
			g.synced = g.size
		}
		if g.alloc > g.size && s.truncate(g.f, g.size) == nil {
			// Its zeros past the records: nothing needs them (left
			// there, they read as the end).
			g.alloc = g.size
		}
		ord = g.ord + 1
	}
	ng, err := openWalSeg(s.dir, s.nextSeq, ord, os.O_CREATE|os.O_TRUNC)
	if err != nil {
		return nil, false, fmt.Errorf("raftlog: %w", err)
	}
	if err := s.syncDir(); err != nil {
		ng.f.Close()
		os.Remove(ng.path)
		return nil, false, err
	}
	s.mu.Lock()
	s.segs = append(s.segs, ng)
	s.mu.Unlock()
	return ng, g != nil, nil
}

// kickReclaim wakes maintain, unless it is awake already.
func (s *Shared) kickReclaim() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}
