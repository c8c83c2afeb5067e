package raftlog

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// GroupLog is one Raft group's log and stable store inside a Shared log:
// a raft.LogStore, raft.MonotonicLogStore and raft.StableStore, plus the
// deferred writes (Append, Sync, Durable) Store offers. Every method
// writes through the shared log, and its fdatasyncs are shared with the
// other groups'. Readers (GetLog, FirstIndex, LastIndex, Get) never wait
// for an fdatasync.
type GroupLog struct {
	s  *Shared
	id uint32

	// Changed under the Shared's wmu and mu both; read under either.
	first   uint64 // index of locs[0]; 0 when the log is empty
	locs    []loc  // where each entry's record lies, first to last
	keys    map[string]keyVal
	lastSeq uint64 // seq of the group's last record written: what Sync waits for

	// Under the Shared's pmu.
	marks   []mark        // writes of entries not yet synced, oldest first
	durable atomic.Uint64 // written under pmu

	wroteAt atomic.Int64 // when the group last queued entries, Unix ns (lingers)
}

// loc is where a record lies: a segment (its ord), a length and an
// offset. 16 bytes per entry in memory. seg 0 is an entry not seen yet,
// only while OpenShared replays.
type loc struct {
	seg uint32
	n   uint32
	off int64
}

// keyVal is a stable key's value and the record that holds it.
type keyVal struct {
	val []byte
	at  loc
}

// mark is the last entry (index) of one write and its record's seq: once
// the log is synced through seq, the group is durable through index.
type mark struct{ seq, index uint64 }

var (
	_ raft.LogStore          = (*GroupLog)(nil)
	_ raft.MonotonicLogStore = (*GroupLog)(nil)
	_ raft.StableStore       = (*GroupLog)(nil)
)

// ID is the group's number, as its records name it.
func (g *GroupLog) ID() uint32 { return g.id }

// last is the index of the group's last entry, 0 when it has none; the
// caller holds wmu or mu.
func (g *GroupLog) last() uint64 {
	if len(g.locs) == 0 {
		return 0
	}
	return g.first + uint64(len(g.locs)) - 1
}

// FirstIndex implements raft.LogStore: 0 when the log is empty.
func (g *GroupLog) FirstIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if g.s.closed {
		return 0, ErrClosed
	}
	return g.first, nil
}

// LastIndex implements raft.LogStore: 0 when the log is empty.
func (g *GroupLog) LastIndex() (uint64, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if g.s.closed {
		return 0, ErrClosed
	}
	return g.last(), nil
}

// IsMonotonic implements raft.MonotonicLogStore: StoreLogs refuses a gap
// (except into an empty log), so Raft must delete the whole log after
// installing a snapshot rather than leave one.
func (g *GroupLog) IsMonotonic() bool { return true }

// GetLog implements raft.LogStore: raft.ErrLogNotFound outside
// [FirstIndex, LastIndex]. out's Data and Extensions are fresh slices.
func (g *GroupLog) GetLog(index uint64, out *raft.Log) error {
	s := g.s
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return ErrClosed
	}
	if len(g.locs) == 0 || index < g.first || index > g.last() {
		return raft.ErrLogNotFound
	}
	l := g.locs[index-g.first]
	seg := s.segOf(l)
	if seg == nil {
		return fmt.Errorf("raftlog: group %d: entry %d: %w: its segment is gone", g.id, index, ErrCorrupt)
	}
	rec := make([]byte, l.n)
	if _, err := seg.f.ReadAt(rec, l.off); err != nil {
		return fmt.Errorf("raftlog: group %d: reading entry %d: %w", g.id, index, err)
	}
	if err := decodeWalEntry(rec, g.id, index, out); err != nil {
		return fmt.Errorf("raftlog: %s: offset %d: group %d: %w", seg.path, l.off, g.id, err)
	}
	return nil
}

// StoreLog implements raft.LogStore.
func (g *GroupLog) StoreLog(l *raft.Log) error { return g.StoreLogs([]*raft.Log{l}) }

// StoreLogs implements raft.LogStore: the entries are written with
// whatever other groups have queued, in one write, and StoreLogs returns
// once an fdatasync covers them. They must be consecutive and continue
// LastIndex+1, or start anywhere above 0 in an empty log; otherwise
// ErrNotConsecutive, and nothing is stored.
func (g *GroupLog) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	return g.s.submitSync(&walOp{g: g, kind: opAppend, logs: logs})
}

// Append stores logs as StoreLogs does but returns once they are written,
// before their fdatasync: they are in the log at once (GetLog, LastIndex,
// the next append continues them) and durable once a later sync of the
// shared log, any group's, covers them; Durable tells how far.
func (g *GroupLog) Append(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	return g.s.submitWrite(&walOp{g: g, kind: opAppend, logs: logs})
}

// Sync makes every record the group has written durable, with everything
// else written to the shared log, and returns the group's Durable. A
// sync already running is waited for, and a sync that covered the
// group's records since is enough. A failed fdatasync breaks the log for
// every group: every write after it fails with ErrSyncFailed.
func (g *GroupLog) Sync() (uint64, error) {
	s := g.s
	s.mu.RLock()
	closed, target := s.closed, g.lastSeq
	s.mu.RUnlock()
	if closed {
		return 0, ErrClosed
	}
	if err := s.brokenErr(); err != nil {
		return g.durable.Load(), err
	}
	err := s.syncTo(target)
	return g.durable.Load(), err
}

// Durable is the group's last index whose record is synced: every entry
// up to it survives a crash of the machine. Entries appended (Append) and
// not synced yet lie above it; it is 0 when the log is empty.
func (g *GroupLog) Durable() uint64 { return g.durable.Load() }

// DeleteRange implements raft.LogStore; the range is inclusive and
// clamped to the log. It must be the front, the back or the whole of the
// log; otherwise ErrGap. The deletion is a record in the shared log,
// synced before DeleteRange returns, so that neither a restart nor a
// crash brings the deleted entries back.
func (g *GroupLog) DeleteRange(lo, hi uint64) error {
	return g.s.submitSync(&walOp{g: g, kind: opDelete, lo: lo, hi: hi})
}

// Set implements raft.StableStore: a record in the shared log, synced
// before Set returns.
func (g *GroupLog) Set(key, val []byte) error {
	return g.s.submitSync(&walOp{g: g, kind: opSet, key: string(key), val: bytes.Clone(val)})
}

// Get implements raft.StableStore: ErrKeyNotFound for a missing key.
func (g *GroupLog) Get(key []byte) ([]byte, error) {
	g.s.mu.RLock()
	defer g.s.mu.RUnlock()
	if g.s.closed {
		return nil, ErrClosed
	}
	kv, ok := g.keys[string(key)]
	if !ok {
		return nil, ErrKeyNotFound
	}
	return bytes.Clone(kv.val), nil
}

// SetUint64 implements raft.StableStore: val is stored as 8 bytes,
// big-endian, as Store does.
func (g *GroupLog) SetUint64(key []byte, val uint64) error {
	return g.Set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore: ErrKeyNotFound for a missing
// key, an error for a value that is not 8 bytes.
func (g *GroupLog) GetUint64(key []byte) (uint64, error) {
	v, err := g.Get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: group %d: %w: %q holds %d bytes, not a uint64", g.id, ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// The index: how records change a group's entries and keys, at run time
// and when OpenShared replays them. Every change is by index alone
// (put at i, delete below f, delete from lo), never relative to what the
// group held before, so replaying the records that are left after old
// segments were removed gives the same entries as replaying all of them
// (doc.go, Shared log). The callers hold wmu and mu (or are OpenShared).

// maxReplayGap bounds the entries a replayed record may lie away from its
// group's entries seen so far (a group's own entries, moved forward out
// of older segments, come back after later ones). Past it the record is
// taken for damage rather than filling memory with missing entries.
const maxReplayGap = 1 << 24

// replayPut is put for a replayed record, refusing one absurdly far away.
func (s *Shared) replayPut(g *GroupLog, index uint64, l loc) error {
	if len(g.locs) > 0 {
		if last := g.last(); (index < g.first && g.first-index > maxReplayGap) || (index > last && index-last > maxReplayGap) {
			return fmt.Errorf("entry %d lies more than %d entries away from the group's %d-%d", index, maxReplayGap, g.first, last)
		}
	}
	s.put(g, index, l)
	return nil
}

// put makes l the record of g's entry at index. At run time index is
// LastIndex+1, the first of an empty log, or (Reclaim moving a record)
// an entry of the log; replaying, it may also lie past either end, and
// the entries between are missing until their records come.
func (s *Shared) put(g *GroupLog, index uint64, l loc) {
	switch last := g.last(); {
	case len(g.locs) == 0:
		g.first, g.locs = index, append(g.locs[:0], l)
	case index == last+1:
		g.locs = append(g.locs, l)
	case index >= g.first && index <= last:
		s.addLive(g.locs[index-g.first], -1)
		g.locs[index-g.first] = l
	case index < g.first:
		locs := make([]loc, g.first-index+uint64(len(g.locs)))
		locs[0] = l
		copy(locs[g.first-index:], g.locs)
		g.first, g.locs = index, locs
	default:
		g.locs = append(g.locs, make([]loc, index-last-1)...)
		g.locs = append(g.locs, l)
	}
	s.addLive(l, 1)
}

// killBelow deletes g's entries below first.
func (s *Shared) killBelow(g *GroupLog, first uint64) {
	if len(g.locs) == 0 || first <= g.first {
		return
	}
	k := first - g.first
	if k >= uint64(len(g.locs)) {
		s.killFrom(g, 0)
		return
	}
	for _, l := range g.locs[:k] {
		s.addLive(l, -1)
	}
	g.locs, g.first = g.locs[k:], first
}

// killFrom deletes g's entries from lo on; 0: all of them.
func (s *Shared) killFrom(g *GroupLog, lo uint64) {
	if len(g.locs) == 0 || lo > g.last() {
		return
	}
	k := uint64(0)
	if lo > g.first {
		k = lo - g.first
	}
	for _, l := range g.locs[k:] {
		s.addLive(l, -1)
	}
	if k == 0 {
		g.first, g.locs = 0, nil
	} else {
		g.locs = g.locs[:k]
	}
}

// setKey sets g's stable key to val, held by the record at l.
func (s *Shared) setKey(g *GroupLog, key string, val []byte, l loc) {
	if g.keys == nil {
		g.keys = map[string]keyVal{}
	}
	if old, ok := g.keys[key]; ok {
		s.addLive(old.at, -1)
	}
	g.keys[key] = keyVal{val: val, at: l}
	s.addLive(l, 1)
}

// dropGroup deletes g's entries and keys.
func (s *Shared) dropGroup(g *GroupLog) {
	s.killFrom(g, 0)
	for _, kv := range g.keys {
		s.addLive(kv.at, -1)
	}
	g.keys = nil
}

// segOf is the segment l lies in, nil for none (a missing entry's).
func (s *Shared) segOf(l loc) *walSeg {
	if l.seg == 0 || len(s.segs) == 0 || l.seg < s.segs[0].ord {
		return nil
	}
	if i := int(l.seg - s.segs[0].ord); i < len(s.segs) {
		return s.segs[i]
	}
	return nil
}

// addLive counts l's record as needed (sign 1) or no longer (-1) in its
// segment's live bytes, which Reclaim reads.
func (s *Shared) addLive(l loc, sign int64) {
	if g := s.segOf(l); g != nil {
		g.live += sign * int64(l.n)
	}
}
