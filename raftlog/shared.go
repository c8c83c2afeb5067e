package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
)

// ErrNotShared is OpenShared's error for a folder that holds a Store
// (one group's log), which Open reads.
var ErrNotShared = errors.New("a per-group log store, not a shared log")

// Shared is one write-ahead log for every Raft group of a process
// (doc.go, Shared log): segment files whose records each name their
// group, written by every group and synced by one fdatasync for all the
// writers waiting at that moment. Group returns a group's view of it,
// which is that group's raft.LogStore and raft.StableStore. Its methods
// are safe for concurrent use.
type Shared struct {
	dir  string
	opts Options

	// Locks, always taken in this order: smu, wmu, fsyncMu or mu, pmu
	// (fsyncMu and mu are never held together). qmu is taken alone.
	smu     sync.Mutex   // the sync leader (syncLocked), Reclaim, Close
	wmu     sync.Mutex   // the writer (flushLocked, the moves), Close
	fsyncMu sync.Mutex   // one fdatasync of a segment at a time (syncSeg)
	mu      sync.RWMutex // what readers see; changed under wmu and mu both, except groups (mu alone)
	pmu     sync.Mutex   // groups' marks and durable indexes, synced
	qmu     sync.Mutex   // queue, qclosed
	wakeMu  sync.Mutex   // wake

	// wake is closed, and replaced, each time smu is unlocked: callers
	// waiting for a sync wait for it (leadSync).
	wake chan struct{}

	segs   []*walSeg            // oldest first; the last one is written to
	groups map[uint32]*GroupLog // every group seen or asked for
	closed bool

	// The writer's (wmu).
	nextSeq uint64 // seq of the next record written
	buf     []byte
	plan    []walPlan
	kept    []*walOp
	shadow  map[*GroupLog]walShadow

	queue   []*walOp // waiting for the writer (qmu)
	qclosed bool

	synced  atomic.Uint64          // every record up to this seq is synced; written under pmu
	pending map[*GroupLog]struct{} // groups with marks (pmu)
	broken  atomic.Pointer[error]  // set when an fdatasync of written records failed

	kick     chan struct{} // wakes maintain: a segment was started or a group's front deleted
	stop     chan struct{}
	done     chan struct{}
	stopOnce sync.Once

	stats struct {
		appends, ops, records, writes, syncs, rewritten, removed atomic.Uint64
	}

	// Test hooks: the data sync of a file, and truncation.
	fsync    func(*os.File) error
	truncate func(*os.File, int64) error
}

// SharedStats counts a Shared log's work since it was opened.
type SharedStats struct {
	Appends   uint64 // StoreLogs and Append calls whose entries were written
	Ops       uint64 // calls that wrote records: appends, deletions, Set, Drop
	Records   uint64 // records written, rewritten ones included
	Writes    uint64 // writes to segment files (one per group commit)
	Syncs     uint64 // fdatasyncs of segment files; 0 with NoSync
	Rewritten uint64 // live records Reclaim copied forward out of an old segment
	Removed   uint64 // segment files Reclaim removed
	Segments  int    // segment files now
}

// OpenShared opens the shared log in dir, creating dir and the log if
// needed. It checks every record, rebuilds each group's index, and cuts
// a torn tail off the last segment; damage is an error naming the file,
// the offset and the group (doc.go, Shared log). A folder holding a
// Store's files is refused with ErrNotShared.
func OpenShared(dir string, opts Options) (*Shared, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		if first, ok := parseWalName(e.Name()); ok {
			firsts = append(firsts, first)
		} else if _, ok := parseSegName(e.Name()); ok || e.Name() == stableName {
			return nil, fmt.Errorf("raftlog: %s: %w (it has %s)", dir, ErrNotShared, e.Name())
		}
	}
	slices.Sort(firsts)
	s := &Shared{
		dir:      dir,
		opts:     opts,
		groups:   map[uint32]*GroupLog{},
		shadow:   map[*GroupLog]walShadow{},
		pending:  map[*GroupLog]struct{}{},
		kick:     make(chan struct{}, 1),
		wake:     make(chan struct{}),
		stop:     make(chan struct{}),
		done:     make(chan struct{}),
		fsync:    fdatasync,
		truncate: (*os.File).Truncate,
		nextSeq:  1,
	}
	if err := s.load(firsts); err != nil {
		s.closeFiles()
		return nil, err
	}
	// Records a process that crashed had written but not synced are in
	// the page cache, read above as if on disk: sync them before they
	// count as durable.
	if n := len(s.segs); n > 0 {
		g := s.segs[n-1]
		if g.size > 0 {
			if err := s.syncData(g.f); err != nil {
				s.closeFiles()
				return nil, fmt.Errorf("raftlog: %w", err)
			}
		}
		g.synced = g.size
	}
	s.synced.Store(s.nextSeq - 1)
	for _, g := range s.groups {
		g.durable.Store(g.last())
	}
	go s.maintain()
	s.kickReclaim()
	return s, nil
}

// load opens the segments named by firsts (sorted), replays their records
// into the groups' indexes, and cuts the last segment after its last good
// record.
func (s *Shared) load(firsts []uint64) error {
	for i, first := range firsts {
		g, err := openWalSeg(s.dir, first, uint32(i+1), 0)
		if err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
		if i > 0 {
			prev := s.segs[i-1]
			if prev.next == prev.first {
				g.f.Close()
				return fmt.Errorf("raftlog: %s: %w: empty, and not the last segment", prev.path, ErrCorrupt)
			}
			if g.first != prev.next {
				g.f.Close()
				return fmt.Errorf("raftlog: %s: offset 0: %w: starts at record %d, but %s ends at %d",
					g.path, ErrCorrupt, g.first, filepath.Base(prev.path), prev.next-1)
			}
		}
		s.segs = append(s.segs, g)
		bad, err := g.scan(func(r walRec) error { return s.replay(g, r) })
		if err != nil {
			return fmt.Errorf("raftlog: %s: %w", g.path, err)
		}
		g.synced = g.size // the last one is synced by OpenShared
		if isLast := i == len(firsts)-1; bad != nil && (!isLast || !bad.torn) {
			return fmt.Errorf("raftlog: %s: offset %d: %s: %w: %s", g.path, bad.off, bad.group, ErrCorrupt, bad.reason)
		}
	}
	// Every group's entries must run without a gap: a gap left after
	// replaying is an entry whose only copy was in a segment that is
	// gone (removed by hand, or lost).
	ids := make([]uint32, 0, len(s.groups))
	for id := range s.groups {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		g := s.groups[id]
		for k, l := range g.locs {
			if l.seg != 0 {
				continue
			}
			// Both ends are present (put puts the record it has there):
			// name the record after the gap.
			j := k + 1
			for g.locs[j].seg == 0 {
				j++
			}
			at := g.locs[j]
			return fmt.Errorf("raftlog: %s: offset %d: group %d: %w: entry %d follows %d, %d-%d missing: a segment that held them is gone",
				s.segOf(at).path, at.off, id, ErrCorrupt, g.first+uint64(j), g.first+uint64(k)-1, g.first+uint64(k), g.first+uint64(j)-1)
		}
	}
	if n := len(s.segs); n > 0 {
		g := s.segs[n-1]
		s.nextSeq = g.next
		if g.alloc > g.size {
			// A write that never completed, so never acknowledged, or
			// preallocated zeros: cut, so that no byte of an unfinished
			// write stays behind zeros the next records overwrite. Only
			// now, all checked: a log refused is left as it was.
			if err := s.truncate(g.f, g.size); err != nil {
				return fmt.Errorf("raftlog: %s: cutting a torn tail at %d: %w", g.path, g.size, err)
			}
			if err := s.syncData(g.f); err != nil {
				return fmt.Errorf("raftlog: %w", err)
			}
			g.alloc = g.size
		}
	}
	return nil
}

// replay applies record r of segment seg to its group's index (doc.go,
// Shared log: a record puts or deletes by index, whatever came before).
func (s *Shared) replay(seg *walSeg, r walRec) error {
	g := s.groupLocked(r.group)
	g.lastSeq = r.seq
	l := loc{seg: seg.ord, n: r.n, off: r.off}
	p := r.payload
	switch r.kind {
	case walEntry:
		return s.replayPut(g, bodyIndex(p), l)
	case walFront:
		s.killBelow(g, binary.LittleEndian.Uint64(p))
	case walBack:
		s.killFrom(g, binary.LittleEndian.Uint64(p))
	case walSet:
		k := binary.LittleEndian.Uint32(p)
		s.setKey(g, string(p[4:4+k]), bytes.Clone(p[4+k:]), l)
	case walDrop:
		s.dropGroup(g)
	}
	return nil
}

// Close closes the log's files. Calls waiting for a write or a sync
// return ErrClosed, as do later calls.
func (s *Shared) Close() error {
	s.stopOnce.Do(func() { close(s.stop) })
	<-s.done
	s.qmu.Lock()
	s.qclosed = true
	for _, op := range s.queue {
		op.finish(ErrClosed) // under qmu: submitWrite relies on it
	}
	s.queue = nil
	s.qmu.Unlock()
	s.smu.Lock()
	defer s.unlockSync()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	var err error
	if n := len(s.segs); n > 0 {
		// The zeros preallocated past the last record: OpenShared would
		// cut them, but a closed log leaves its files exact.
		if g := s.segs[n-1]; g.alloc > g.size {
			err = s.truncate(g.f, g.size)
		}
	}
	return errors.Join(err, s.closeFiles())
}

// closeFiles closes every file; the caller holds wmu (or is OpenShared).
func (s *Shared) closeFiles() error {
	s.mu.Lock()
	segs := s.segs
	s.segs, s.closed = nil, true
	s.mu.Unlock()
	var errs []error
	for _, g := range segs {
		errs = append(errs, g.f.Close())
	}
	return errors.Join(errs...)
}

// Group returns group id's log, the same value for the same id, created
// empty when the shared log holds nothing of it. Nothing is written until
// the group stores something.
func (s *Shared) Group(id uint32) (*GroupLog, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	return s.groupLocked(id), nil
}

// groupLocked returns group id's log, creating it; the caller holds mu
// (or is OpenShared).
func (s *Shared) groupLocked(id uint32) *GroupLog {
	g := s.groups[id]
	if g == nil {
		g = &GroupLog{s: s, id: id}
		s.groups[id] = g
	}
	return g
}

// Groups returns the groups that hold entries or stable keys, in
// ascending order: after a restart, the groups this process hosted.
func (s *Shared) Groups() []uint32 {
	s.mu.RLock()
	defer s.mu.RUnlock()
	var ids []uint32
	for id, g := range s.groups {
		if len(g.locs) > 0 || len(g.keys) > 0 {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	return ids
}

// Drop deletes group id's entries and stable keys, durably, for a group
// the process no longer hosts (a replica moved away). A GroupLog of it
// stays usable, empty.
func (s *Shared) Drop(id uint32) error {
	g, err := s.Group(id)
	if err != nil {
		return err
	}
	return s.submitSync(&walOp{g: g, kind: opDrop})
}

// Stats returns the log's counters.
func (s *Shared) Stats() SharedStats {
	s.mu.RLock()
	n := len(s.segs)
	s.mu.RUnlock()
	return SharedStats{
		Appends:   s.stats.appends.Load(),
		Ops:       s.stats.ops.Load(),
		Records:   s.stats.records.Load(),
		Writes:    s.stats.writes.Load(),
		Syncs:     s.stats.syncs.Load(),
		Rewritten: s.stats.rewritten.Load(),
		Removed:   s.stats.removed.Load(),
		Segments:  n,
	}
}

func (s *Shared) syncData(f *os.File) error {
	if s.opts.NoSync {
		return nil
	}
	s.stats.syncs.Add(1)
	return s.fsync(f)
}

func (s *Shared) syncDir() error {
	if s.opts.NoSync {
		return nil
	}
	return SyncDir(s.dir)
}

// breakOn breaks the log after a failed fdatasync of records already
// written, and returns the error every write returns from then on.
func (s *Shared) breakOn(err error) error {
	e := fmt.Errorf("raftlog: %w: %w", ErrSyncFailed, err)
	s.broken.CompareAndSwap(nil, &e)
	return *s.broken.Load()
}

func (s *Shared) brokenErr() error {
	if e := s.broken.Load(); e != nil {
		return *e
	}
	return nil
}
