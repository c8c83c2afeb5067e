package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
)

// smallEntries are group id's entries from..to with a few bytes of data
// each: many records in few bytes, for tests that reopen at every byte.
func smallEntries(id uint32, from, to uint64) []*raft.Log {
	logs := gentries(id, from, to)
	for _, l := range logs {
		l.Data = []byte(fmt.Sprintf("g%d-%d", id, l.Index))
		l.Extensions = nil
	}
	return logs
}

// lastWrite stores in each of gs, in one write of the shared log (each
// group's StoreLogs queued as concurrent callers' would be, the last
// one's call writing them all), and returns the write's byte range and
// the end offset of each record in it, in order.
func lastWrite(t *testing.T, s *Shared, m model, gs []*GroupLog, batch map[uint32][]*raft.Log) (start, end int64, recs []walRecEnd) {
	t.Helper()
	s.wmu.Lock()
	tail := s.segs[len(s.segs)-1]
	start = tail.size
	s.wmu.Unlock()
	writes := s.Stats().Writes
	ops := make([]*walOp, 0, len(gs)-1)
	for _, g := range gs[:len(gs)-1] {
		op := &walOp{g: g, kind: opAppend, logs: batch[g.ID()]}
		if err := s.enqueue(op); err != nil {
			t.Fatal(err)
		}
		ops = append(ops, op)
	}
	last := gs[len(gs)-1]
	if err := last.StoreLogs(batch[last.ID()]); err != nil {
		t.Fatal(err)
	}
	for _, op := range ops {
		if op.state.Load() != opWritten || op.err != nil {
			t.Fatalf("a queued StoreLogs was not written with the last: %v", op.err)
		}
	}
	if w := s.Stats().Writes - writes; w != 1 {
		t.Fatalf("the last StoreLogs of %d groups took %d writes, want 1", len(gs), w)
	}
	s.mu.RLock()
	end = tail.size
	for _, g := range gs {
		for _, l := range batch[g.ID()] {
			at := g.locs[l.Index-g.first]
			recs = append(recs, walRecEnd{g.ID(), l, at.off + int64(at.n)})
		}
	}
	s.mu.RUnlock()
	slices.SortFunc(recs, func(a, b walRecEnd) int { return int(a.end - b.end) })
	for _, g := range gs {
		m[g.ID()] = append(m[g.ID()], batch[g.ID()]...)
	}
	return start, end, recs
}

type walRecEnd struct {
	group uint32
	l     *raft.Log
	end   int64
}

// upTo is the model before the last write plus its records that end at
// or before cut.
func upTo(before model, recs []walRecEnd, cut int64) model {
	want := model{}
	for id, logs := range before {
		want[id] = slices.Clone(logs)
	}
	for _, r := range recs {
		if r.end <= cut {
			want[r.group] = append(want[r.group], r.l)
		}
	}
	return want
}

func (m model) clone() model {
	c := model{}
	for id, logs := range m {
		c[id] = slices.Clone(logs)
	}
	return c
}

// TestSharedCrashAtEveryByte cuts the last write, four groups' entries
// in one write, at every byte, and reopens: every group keeps all it
// had before that write and, of the write, the records that are whole
// from its start; the rest is cut. Two ways a crash leaves the write:
// the file cut there, or zeros from there on (the preallocated file,
// the bytes after never written). After the reopen a new write
// continues the log, and a second crash, files as they are, shows none
// of the torn bytes.
func TestSharedCrashAtEveryByte(t *testing.T) {
	dir := t.TempDir()
	opts := Options{}
	s := openShared(t, dir, opts)
	m := model{}
	gs := []*GroupLog{group(t, s, 1), group(t, s, 2), group(t, s, 3), group(t, s, 4)}
	for _, g := range gs {
		m.store(t, g, smallEntries(g.ID(), 1, 6))
	}
	m.deleteRange(t, gs[0], 1, 2)
	m.deleteRange(t, gs[1], 5, 6)
	m.store(t, gs[1], entries(5, 5, 9))
	if err := gs[2].SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	before := m.clone()
	batch := map[uint32][]*raft.Log{}
	for _, g := range gs {
		last, _ := g.LastIndex()
		batch[g.ID()] = smallEntries(g.ID(), last+1, last+2)
	}
	start, end, recs := lastWrite(t, s, m, gs, batch)
	s.wmu.Lock()
	path := s.segs[len(s.segs)-1].path
	s.wmu.Unlock()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(data)) != end || len(recs) != 8 {
		t.Fatalf("segment of %d bytes, %d records in the last write; want %d and 8", len(data), len(recs), end)
	}
	t.Logf("the last write: bytes %d-%d, %d records", start, end, len(recs))
	checkKey := func(r *Shared) {
		t.Helper()
		if v, err := group(t, r, 3).GetUint64([]byte("CurrentTerm")); v != 3 || err != nil {
			t.Fatalf("group 3's CurrentTerm %d, %v; want 3", v, err)
		}
	}
	for cut := start; cut <= end; cut++ {
		for _, zeros := range []bool{false, true} {
			img := data[:cut:cut]
			if zeros {
				img = append(img, make([]byte, end-cut+4096)...)
			}
			if err := os.WriteFile(path, img, 0o644); err != nil {
				t.Fatal(err)
			}
			want := upTo(before, recs, cut)
			r, err := OpenShared(dir, opts)
			if err != nil {
				t.Fatalf("cut at %d (zeros after: %v): %v", cut, zeros, err)
			}
			want.check(t, r)
			checkKey(r)
			if (cut-start)%17 == 0 {
				// A new write, then a second crash with the files as
				// they are, preallocated zeros and all.
				g := group(t, r, 1)
				last, _ := g.LastIndex()
				want.store(t, g, smallEntries(1, last+1, last+1))
				crashed := copyDir(t, dir)
				r2 := openShared(t, crashed, opts)
				want.check(t, r2)
				checkKey(r2)
				r2.Close()
				os.RemoveAll(crashed)
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// walOffsets returns the offset of every record in the shared segment
// at path, and each record's group.
func walOffsets(t *testing.T, path string) (offs []int64, groups []uint32) {
	t.Helper()
	first, ok := parseWalName(filepath.Base(path))
	if !ok {
		t.Fatalf("%s: not a shared segment", path)
	}
	g, err := openWalSeg(filepath.Dir(path), first, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer g.f.Close()
	bad, err := g.scan(func(r walRec) error {
		offs = append(offs, r.off)
		groups = append(groups, r.group)
		return nil
	})
	if bad != nil || err != nil {
		t.Fatalf("%s: %v %v", path, bad, err)
	}
	return offs, groups
}

// damaged fails unless OpenShared of dir refuses it as damaged, naming
// path and every string of want, and leaves path's bytes as they were.
func damaged(t *testing.T, dir, path string, opts Options, want ...string) {
	t.Helper()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenShared(dir, opts)
	if err == nil {
		s.Close()
		t.Fatalf("OpenShared of a damaged log succeeded")
	}
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("OpenShared says %v, want ErrCorrupt naming %s", err, path)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Fatalf("OpenShared says %v, want it to say %q", err, w)
		}
	}
	t.Logf("refused: %v", err)
	after, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("a refused open changed %s (%d bytes, then %d)", path, len(before), len(after))
	}
}

func flip(t *testing.T, path string, off int64, bit byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	data[off] ^= bit
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestSharedDamage: a flipped bit in the middle of a segment, the last
// one included when valid records follow it, a record whose CRC is right
// but whose seq is not the next one, and a missing segment make
// OpenShared fail naming the file, the offset and the group, without
// changing the file; a torn, zeroed or garbage tail is cut.
func TestSharedDamage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4096}
	s := openShared(t, dir, opts)
	m := model{}
	for i := uint64(1); i <= 30; i += 3 {
		for id := uint32(1); id <= 3; id++ {
			m.store(t, group(t, s, id), gentries(id, i, i+2))
		}
	}
	s.Close()
	files := walFiles(t, dir)
	if len(files) < 3 {
		t.Fatalf("%d segments, want several", len(files))
	}
	in := func(d, path string) string { return filepath.Join(d, filepath.Base(path)) }
	lastOffs, lastGroups := walOffsets(t, files[len(files)-1])
	if len(lastOffs) < 4 {
		t.Fatalf("%d records in the last segment, want 4 or more", len(lastOffs))
	}

	t.Run("earlier segment", func(t *testing.T) {
		offs, groups := walOffsets(t, files[1])
		size := fileSize(t, files[1])
		for _, off := range []int64{0, 4, 9, 17, size / 2, size - 1} {
			d := copyDir(t, dir)
			path := in(d, files[1])
			flip(t, path, off, 0x10)
			k := len(offs) - 1
			for offs[k] > off {
				k--
			}
			who := fmt.Sprintf("group %d", groups[k])
			if at := off - offs[k]; at >= headerSize+8 && at < headerSize+12 {
				who = "(unchecked)" // the flipped bit is in the group field
			}
			damaged(t, d, path, opts, fmt.Sprintf("offset %d:", offs[k]), who)
		}
	})
	t.Run("last segment, valid records after", func(t *testing.T) {
		for _, k := range []int{0, len(lastOffs) / 2} {
			d := copyDir(t, dir)
			path := in(d, files[len(files)-1])
			flip(t, path, lastOffs[k]+headerSize+walPrefixSize+10, 4) // in the entry's term
			damaged(t, d, path, opts, fmt.Sprintf("offset %d:", lastOffs[k]),
				fmt.Sprintf("group %d (unchecked)", lastGroups[k]), "not a torn write")
		}
	})
	t.Run("right CRC, wrong seq", func(t *testing.T) {
		d := copyDir(t, dir)
		path := in(d, files[len(files)-1])
		rec := walBegin(nil, 5, 2, walEntry) // seq 5 is long past
		rec = walEnd(appendEntry(rec, entry(31, gterm(2))), 0)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(rec)
		f.Close()
		damaged(t, d, path, opts, fmt.Sprintf("offset %d:", fileSize(t, files[len(files)-1])), "group 2:", "record 5 where")
	})
	t.Run("missing segment", func(t *testing.T) {
		d := copyDir(t, dir)
		os.Remove(in(d, files[1]))
		damaged(t, d, in(d, files[2]), opts, "offset 0:")
	})

	// The last record of the last segment, and what a crash leaves of
	// it: cut off, the rest of the log intact.
	lastRec := lastOffs[len(lastOffs)-1]
	lastGroup := lastGroups[len(lastGroups)-1]
	want := m.clone()
	want[lastGroup] = want[lastGroup][:len(want[lastGroup])-1]
	for name, spoil := range map[string]func(data []byte) []byte{
		"torn":         func(data []byte) []byte { return data[:lastRec+headerSize+20] },
		"short header": func(data []byte) []byte { return data[:lastRec+5] },
		"zeroed":       func(data []byte) []byte { clear(data[lastRec+30:]); return append(data, make([]byte, 4096)...) },
		"flipped":      func(data []byte) []byte { data[len(data)-3] ^= 1; return data },
		"garbage after": func(data []byte) []byte {
			return append(data[:lastRec], bytes.Repeat([]byte{0xde, 0xad, 0xbe, 0xef}, 100)...)
		},
		"huge length": func(data []byte) []byte {
			return append(data[:lastRec], 0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8)
		},
	} {
		t.Run(name, func(t *testing.T) {
			d := copyDir(t, dir)
			path := in(d, files[len(files)-1])
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, spoil(data), 0o644); err != nil {
				t.Fatal(err)
			}
			r := openShared(t, d, opts)
			want.check(t, r)
			if got := fileSize(t, path); got != lastRec {
				t.Fatalf("last segment %d bytes after the reopen, want %d (cut at the torn record)", got, lastRec)
			}
			g := group(t, r, lastGroup)
			last, _ := g.LastIndex()
			w := want.clone()
			w.store(t, g, gentries(lastGroup, last+1, last+1))
			r = reopenShared(t, r, d, opts)
			w.check(t, r)
		})
	}
}

// TestSharedLostSector: a crash that lost a sector in the middle of the
// last write, later sectors having reached the disk, is a torn write:
// the records from the first broken one on are cut, not refused.
func TestSharedLostSector(t *testing.T) {
	dir := t.TempDir()
	opts := Options{}
	s := openShared(t, dir, opts)
	m := model{}
	gs := []*GroupLog{group(t, s, 1), group(t, s, 2), group(t, s, 3)}
	for _, g := range gs {
		m.store(t, g, gentries(g.ID(), 1, 3))
	}
	before := m.clone()
	batch := map[uint32][]*raft.Log{}
	for _, g := range gs {
		batch[g.ID()] = gentries(g.ID(), 4, 20)
	}
	start, end, recs := lastWrite(t, s, m, gs, batch)
	s.wmu.Lock()
	path := s.segs[0].path
	s.wmu.Unlock()
	s.Close()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lost := (start/sectorSize + 2) * sectorSize
	clear(data[lost : lost+sectorSize])
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if recs[len(recs)-1].end < lost+3*sectorSize || recs[0].end > lost {
		t.Fatalf("the lost sector (%d) should fall inside the write (%d-%d), whole records before and after it", lost, start, end)
	}
	r := openShared(t, dir, opts)
	upTo(before, recs, lost).check(t, r)
}

// TestSharedReplayGap: an entry record away from its group's entries,
// with a right CRC, is damage: a few entries away, a gap no write leaves;
// far away, not a reason to fill memory. A torn tail after it is not cut
// either: a refused log is left as it was.
func TestSharedReplayGap(t *testing.T) {
	for _, c := range []struct {
		index uint64
		says  string
	}{
		{6, "entry 6 follows 3, 4-5 missing"},
		{1 << 40, "more than"},
	} {
		dir := t.TempDir()
		s := openShared(t, dir, Options{})
		m := model{}
		m.store(t, group(t, s, 1), gentries(1, 1, 3))
		s.Close()
		path := walFiles(t, dir)[0]
		rec := walBegin(nil, 4, 1, walEntry)
		rec = walEnd(appendEntry(rec, entry(c.index, 1)), 0)
		f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		f.Write(rec)
		f.Write([]byte{1, 2, 3}) // a torn tail after it
		f.Close()
		damaged(t, dir, path, Options{}, "group 1:", c.says)
	}
}
