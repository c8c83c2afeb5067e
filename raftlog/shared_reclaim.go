package raftlog

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"slices"
)

// Reclaiming segments (doc.go, Shared log).
//
// Segments go from the oldest only: a deletion record deletes entries
// written before it, so it lies in their segment or a later one; removing
// the oldest first, no deletion record is ever gone while an entry it
// deleted is still on disk. Each segment counts the bytes of its records
// some group still needs (live): entries inside their group's log and
// the current value of each stable key. The oldest segment goes:
//
//   - at once, once nothing in it is live (and the deletions that made
//     it so are synced);
//   - after its live records are rewritten forward into the segment
//     being written (same bytes, a new seq, synced before the old file
//     goes) when they are few (at most a quarter of it), or when the
//     log's files pass twice its live bytes plus two segments.
//
// Rewriting was chosen over bounding how far a group may lag: a group
// that lags is one that writes little (an idle group, or one whose
// snapshots are rare), so the records that pin an old segment are few
// and cheap to copy, whereas a bound would have to fail a group's
// appends or force its snapshot from inside the log store, which knows
// neither the state machine nor when Raft may compact. The space rule
// caps what a group with a long, live log can hold: the log's files stay
// within twice the live bytes plus two segments, and each byte rewritten
// frees at least as many dead ones. Otherwise the oldest segment waits:
// its groups' next snapshots delete most of it anyway.

// fewLive is the share of a segment (1/fewLive) its live records may
// fill and still be rewritten forward whatever the log's size.
const fewLive = 4

// maintain runs Reclaim each time kickReclaim wakes it, until Close. An
// error is dropped here: a failed fdatasync has broken the log, which
// every write then reports, and anything else (a file that would not go)
// is tried again at the next wake.
func (s *Shared) maintain() {
	defer close(s.done)
	for {
		select {
		case <-s.stop:
			return
		case <-s.kick:
		}
		s.Reclaim()
	}
}

// Reclaim removes the oldest segments no group needs, rewriting their
// few live records forward first (see above), and returns when the
// oldest segment must stay. It runs by itself after a segment is started
// and after a group's front or whole log is deleted; calling it waits for
// it. Syncs wait while it runs.
func (s *Shared) Reclaim() error {
	s.smu.Lock()
	defer s.unlockSync()
	s.mu.RLock()
	rounds := len(s.segs)
	s.mu.RUnlock()
	for range rounds { // each round removes a segment, or returns
		s.wmu.Lock()
		if s.closed {
			s.wmu.Unlock()
			return ErrClosed
		}
		if err := s.brokenErr(); err != nil {
			s.wmu.Unlock()
			return err
		}
		if len(s.segs) < 2 {
			s.wmu.Unlock()
			return nil
		}
		h := s.segs[0]
		if h.live > 0 {
			if !s.worthMovingLocked(h) {
				s.wmu.Unlock()
				return nil
			}
			if err := s.moveLocked(h); err != nil {
				s.wmu.Unlock()
				return err
			}
		}
		s.wmu.Unlock()
		// The moved records, and the deletions that left the rest of h
		// dead, reach the disk before h goes.
		if err := s.syncLocked(); err != nil {
			return err
		}
		if err := s.removeHead(h); err != nil {
			return err
		}
	}
	return nil
}

// worthMovingLocked reports whether h's live records are to be rewritten
// forward now (see above); the caller holds wmu.
func (s *Shared) worthMovingLocked(h *walSeg) bool {
	var total, live int64
	for _, g := range s.segs {
		total += g.size
		live += g.live
	}
	return h.live <= h.size/fewLive || total > 2*live+2*s.opts.SegmentSize
}

// moveLocked rewrites the live records of h, the oldest segment, at the
// end of the log, and points their groups at the copies; the caller
// holds wmu. A copy is the record's bytes with the next seq (and its
// CRC): replaying puts it over the original, and once h is removed the
// copy is all there is.
func (s *Shared) moveLocked(h *walSeg) error {
	s.mu.RLock()
	gs := make([]*GroupLog, 0, len(s.groups))
	for _, g := range s.groups {
		gs = append(gs, g)
	}
	s.mu.RUnlock()
	slices.SortFunc(gs, func(a, b *GroupLog) int { return cmp.Compare(a.id, b.id) })

	buf, plan := s.buf[:0], s.plan[:0]
	seq := s.nextSeq
	move := func(g *GroupLog, l loc, kind walKind, index uint64, key string, val []byte) error {
		start := len(buf)
		buf = slices.Grow(buf, int(l.n))[:start+int(l.n)]
		rec := buf[start:]
		if _, err := h.f.ReadAt(rec, l.off); err != nil {
			return fmt.Errorf("raftlog: %s: offset %d: group %d: %w", h.path, l.off, g.id, err)
		}
		bad := ""
		if n := binary.LittleEndian.Uint32(rec); int64(n) != int64(len(rec))-headerSize || len(rec) < headerSize+walPrefixSize {
			bad = fmt.Sprintf("length %d in a record of %d bytes", n, len(rec))
		} else if torn, why := walCheck(rec[:headerSize], rec[headerSize:]); torn+why != "" {
			bad = torn + why
		} else if gid, k := binary.LittleEndian.Uint32(rec[headerSize+8:]), walKind(rec[headerSize+12]); gid != g.id || k != kind {
			bad = fmt.Sprintf("record of group %d, kind %d, where group %d's kind %d belongs", gid, k, g.id, kind)
		}
		if bad != "" {
			return fmt.Errorf("raftlog: %s: offset %d: group %d: %w: %s", h.path, l.off, g.id, ErrCorrupt, bad)
		}
		binary.LittleEndian.PutUint64(rec[headerSize:], seq)
		walSeal(rec)
		plan = append(plan, walPlan{g: g, kind: kind, index: index, key: key, val: val, rel: int64(start), n: l.n})
		seq++
		return nil
	}
	var err error
	for _, g := range gs {
		for k, l := range g.locs {
			if l.seg == h.ord {
				if err = move(g, l, walEntry, g.first+uint64(k), "", nil); err != nil {
					break
				}
			}
		}
		keys := make([]string, 0, len(g.keys))
		for key, kv := range g.keys {
			if kv.at.seg == h.ord {
				keys = append(keys, key)
			}
		}
		slices.Sort(keys)
		for _, key := range keys {
			if err != nil {
				break
			}
			err = move(g, g.keys[key].at, walSet, 0, key, g.keys[key].val)
		}
		if err != nil {
			break
		}
	}
	if err == nil {
		err = s.commitLocked(buf, plan)
	}
	if err == nil {
		s.stats.rewritten.Add(uint64(len(plan)))
	}
	clear(plan)
	s.plan = plan[:0]
	if cap(buf) <= 16<<20 {
		s.buf = buf[:0]
	}
	return err
}

// removeHead removes h, the oldest segment, whose records no group needs
// any more and whose removal the synced records allow; the caller holds
// smu. The file goes first and the folder is synced after each one, so
// that the files on disk always run on without a gap.
func (s *Shared) removeHead(h *walSeg) error {
	s.wmu.Lock()
	if len(s.segs) < 2 || s.segs[0] != h || h.live != 0 {
		s.wmu.Unlock()
		return fmt.Errorf("raftlog: %s: %w: not removable (%d live bytes)", h.path, ErrCorrupt, h.live)
	}
	if err := os.Remove(h.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		s.wmu.Unlock()
		return fmt.Errorf("raftlog: %w", err)
	}
	s.mu.Lock()
	s.segs = append([]*walSeg(nil), s.segs[1:]...)
	s.mu.Unlock()
	s.wmu.Unlock()
	h.f.Close()
	s.stats.removed.Add(1)
	return s.syncDir()
}
