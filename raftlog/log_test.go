package raftlog

import (
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	bounds(t, s, 0, 0)
	var l raft.Log
	if err := s.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on an empty log: %v", err)
	}
	// Every type, zero and non-zero times, nil and empty and large data.
	logs := entries(1, 80, 3)
	logs[3].Data = make([]byte, 1<<20)
	for i := range logs[3].Data {
		logs[3].Data[i] = byte(i * 7)
	}
	logs[4].Data = []byte{}
	logs[5].AppendedAt = time.Unix(0, -5) // before the epoch
	store(t, s, logs[:1])
	store(t, s, logs[1:])
	check := func(s *Store) {
		t.Helper()
		bounds(t, s, 1, 80)
		for _, want := range logs {
			var got raft.Log
			if err := s.GetLog(want.Index, &got); err != nil {
				t.Fatal(err)
			}
			sameLog(t, &got, want)
		}
	}
	check(s)

	// out.Data is the caller's: changing it changes nothing stored.
	if err := s.GetLog(2, &l); err != nil {
		t.Fatal(err)
	}
	l.Data[0] ^= 0xff
	l.Data = append(l.Data, 1, 2, 3)
	check(s)

	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLog(entry(81, 3)); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close: %v", err)
	}
	check(open(t, dir, Options{}))
}

// TestRotation stores many batches across many segments, then reopens.
func TestRotation(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 2000}
	s := open(t, dir, opts)
	next := uint64(1)
	for b := range 60 {
		n := uint64(1 + b%9)
		store(t, s, entries(next, next+n-1, 2))
		next += n
	}
	last := next - 1
	holds(t, s, 1, last, func(uint64) uint64 { return 2 })
	files := segFiles(t, dir)
	if len(files) < 5 {
		t.Fatalf("%d segments, want several", len(files))
	}
	for _, f := range files[:len(files)-1] {
		if sz := fileSize(t, f); sz < opts.SegmentSize {
			t.Fatalf("%s: %d bytes, rotated before %d", f, sz, opts.SegmentSize)
		}
	}
	s.Close()
	s = open(t, dir, opts)
	holds(t, s, 1, last, func(uint64) uint64 { return 2 })
	store(t, s, entries(last+1, last+3, 2))
	holds(t, s, 1, last+3, func(uint64) uint64 { return 2 })
}

// TestNotConsecutive: StoreLogs refuses anything but LastIndex+1,
// LastIndex+2, ..., and stores nothing of a refused batch.
func TestNotConsecutive(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if err := s.StoreLog(&raft.Log{Index: 0}); !errors.Is(err, ErrNotConsecutive) {
		t.Fatalf("index 0: %v", err)
	}
	store(t, s, entries(10, 20, 1))
	size := fileSize(t, segFiles(t, dir)[0])
	for _, bad := range [][]*raft.Log{
		entries(22, 25, 1),                       // a gap
		entries(20, 25, 1),                       // an overlap
		entries(5, 9, 1),                         // before the start
		append(entries(21, 23, 1), entry(25, 1)), // a gap inside
		append(entries(21, 23, 1), entry(23, 1)), // a repeat inside
	} {
		if err := s.StoreLogs(bad); !errors.Is(err, ErrNotConsecutive) {
			t.Fatalf("StoreLogs %d..%d: %v, want ErrNotConsecutive", bad[0].Index, bad[len(bad)-1].Index, err)
		}
	}
	holds(t, s, 10, 20, term1)
	if got := fileSize(t, segFiles(t, dir)[0]); got != size {
		t.Fatalf("the segment grew from %d to %d bytes with nothing stored", size, got)
	}
	s.Close()
	s = open(t, dir, Options{})
	holds(t, s, 10, 20, term1)
	store(t, s, entries(21, 22, 1))
	holds(t, s, 10, 22, term1)
}

// ends returns the end offset of every record in the last segment of dir.
func recordEnds(t *testing.T, s *Store) []int64 {
	t.Helper()
	g := s.segs[len(s.segs)-1]
	var ends []int64
	for i := range g.offsets {
		_, end := g.span(g.first + uint64(i))
		ends = append(ends, end)
	}
	return ends
}

// TestCrashAtAnyLength cuts the last segment at lengths within the last
// batch (a torn write) and reopens: every earlier record is there,
// the log ends at the last whole record, and a new StoreLogs continues it.
func TestCrashAtAnyLength(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 3000}
	s := open(t, dir, opts)
	next := uint64(1)
	// At least 20 batches, and the last segment holding some but with
	// room, so that the last batch goes there, after other records.
	for b := 0; b < 20 || s.segs[len(s.segs)-1].size >= opts.SegmentSize; b++ {
		n := uint64(1 + b%4)
		store(t, s, entries(next, next+n-1, 1))
		next += n
	}
	prevLast := next - 1
	g := s.segs[len(s.segs)-1]
	start := g.size
	store(t, s, entries(next, next+4, 1)) // the batch the crash tears
	end := g.size
	if s.segs[len(s.segs)-1] != g || g.first >= next {
		t.Fatal("the last batch should go to the last segment, after other records")
	}
	ends := recordEnds(t, s)
	lastSeg := g.path
	s.Close()
	if len(segFiles(t, dir)) < 3 {
		t.Fatal("want several segments")
	}

	// Every record boundary and the bytes around it and around the end
	// of its header, and every 13th byte between.
	cuts := map[int64]bool{}
	for _, b := range append([]int64{start}, ends...) {
		for _, c := range []int64{b - 1, b, b + 1, b + headerSize - 1, b + headerSize, b + headerSize + 1} {
			if c >= start && c <= end {
				cuts[c] = true
			}
		}
	}
	for c := start; c <= end; c += 13 {
		cuts[c] = true
	}
	// Three ways a crash leaves the torn batch: the file cut at cut; the
	// file as StoreLogs preallocated it, zeros from cut on (the bytes
	// past cut never reached the disk); and only the bytes before cut
	// lost (the batch's first page never written, later ones were).
	// After a new StoreLogs and a reopen, none of the torn bytes may
	// show.
	for k, cut := range slices.Sorted(maps.Keys(cuts)) {
		d := copyDir(t, dir)
		path := filepath.Join(d, filepath.Base(lastSeg))
		switch k % 3 {
		case 0:
			if err := os.Truncate(path, cut); err != nil {
				t.Fatal(err)
			}
		case 1:
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			data = append(data[:cut:cut], make([]byte, end-cut+4096)...)
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
		case 2:
			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			clear(data[start:max(cut, start+headerSize)])
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			cut = start // nothing of the batch is whole from its start
		}
		want := prevLast // the last record whose end is within cut
		for i, e := range ends {
			if e <= cut && e > start {
				want = g.first + uint64(i)
			}
		}
		r := open(t, d, opts)
		holds(t, r, 1, want, term1)
		store(t, r, entries(want+1, want+2, 2))
		// A second crash: the files as they are, preallocation and all.
		crashed := copyDir(t, d)
		r.Close()
		r = open(t, crashed, opts)
		holds(t, r, 1, want+2, func(i uint64) uint64 {
			if i > want {
				return 2
			}
			return 1
		})
		r.Close()
		os.RemoveAll(d)
	}
}

// TestLostSector: a crash that lost a sector in the middle of the last
// batch, later sectors having reached the disk, is a torn write: the
// records from the first broken one on are cut, not refused.
func TestLostSector(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	store(t, s, entries(1, 10, 1))
	g := s.segs[0]
	start := g.size
	store(t, s, entries(11, 60, 1))
	ends := recordEnds(t, s)
	s.Close()
	path := g.path
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// The second whole sector of the batch never reached the disk.
	lost := (start/sectorSize + 2) * sectorSize
	clear(data[lost : lost+sectorSize])
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	want := uint64(0)
	for i, e := range ends {
		if e <= lost {
			want = g.first + uint64(i)
		}
	}
	if want <= 10 || ends[len(ends)-1] < lost+3*sectorSize {
		t.Fatalf("the lost sector should fall inside the batch, whole records after it: last whole record %d", want)
	}
	r := open(t, dir, Options{})
	holds(t, r, 1, want, term1)
	r.Close()
}

// TestTailGarbage: zeros or garbage after the last record are cut off.
func TestTailGarbage(t *testing.T) {
	for name, junk := range map[string][]byte{
		"zeros":        make([]byte, 5000),
		"few zeros":    make([]byte, 3),
		"garbage":      []byte(strings.Repeat("\xde\xad\xbe\xef", 100)),
		"huge length":  {0xff, 0xff, 0xff, 0x7f, 1, 2, 3, 4, 5, 6, 7, 8},
		"short length": {5, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
	} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			s := open(t, dir, Options{SegmentSize: 1000})
			store(t, s, entries(1, 30, 1))
			s.Close()
			files := segFiles(t, dir)
			last := files[len(files)-1]
			good := fileSize(t, last)
			f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			f.Write(junk)
			f.Close()
			s = open(t, dir, Options{SegmentSize: 1000})
			holds(t, s, 1, 30, term1)
			if got := fileSize(t, last); got != good {
				t.Fatalf("%d bytes after reopening, want %d", got, good)
			}
			store(t, s, entries(31, 31, 1))
			holds(t, s, 1, 31, term1)
		})
	}
}

// TestDamage: a bad byte in an earlier segment, or a record with a right
// CRC but the wrong index, stops Open with the file and offset.
func TestDamage(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 2000}
	s := open(t, dir, opts)
	for i := uint64(1); i <= 60; i += 3 {
		store(t, s, entries(i, i+2, 1))
	}
	s.Close()
	files := segFiles(t, dir)
	if len(files) < 3 {
		t.Fatal("want several segments")
	}
	for _, off := range []int64{0, 4, 8, 40, 300} {
		d := copyDir(t, dir)
		path := filepath.Join(d, filepath.Base(files[1]))
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		data[off] ^= 0x10
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		_, err = Open(d, opts)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
			t.Fatalf("byte %d of %s flipped: Open says %v, want ErrCorrupt naming the file", off, path, err)
		}
		t.Logf("flipped byte %d: %v", off, err)
	}

	// A segment missing in the middle.
	d := copyDir(t, dir)
	os.Remove(filepath.Join(d, filepath.Base(files[1])))
	if _, err := Open(d, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), filepath.Base(files[2])) {
		t.Fatalf("a segment missing: Open says %v", err)
	}

	// A record whose CRC is right but whose index is wrong, even in the
	// last segment: no torn write makes one.
	d = copyDir(t, dir)
	last := filepath.Join(d, filepath.Base(files[len(files)-1]))
	rec, err := appendRecord(nil, entry(1000, 1))
	if err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(last, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(rec)
	f.Close()
	if _, err := Open(d, opts); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), last) {
		t.Fatalf("a record out of place: Open says %v", err)
	}

	// A flipped byte in a record of the last segment that valid records
	// follow is damage, not a torn write: Open refuses it, naming the
	// file and offset, instead of cutting the records after it.
	for _, k := range []int{0, 1} {
		d = copyDir(t, dir)
		r := open(t, d, opts)
		g := r.segs[len(r.segs)-1]
		if len(g.offsets) < 3 {
			t.Fatal("want three records in the last segment")
		}
		off := g.offsets[k]
		r.Close()
		last = filepath.Join(d, filepath.Base(files[len(files)-1]))
		data, err := os.ReadFile(last)
		if err != nil {
			t.Fatal(err)
		}
		data[off+headerSize+10] ^= 4
		os.WriteFile(last, data, 0o644)
		_, err = Open(d, opts)
		if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), last) ||
			!strings.Contains(err.Error(), fmt.Sprintf("offset %d:", off)) || !strings.Contains(err.Error(), "not a torn write") {
			t.Fatalf("a bit flipped in record %d of the last segment, valid records after it: Open says %v", k, err)
		}
		t.Logf("flipped in the last segment: %v", err)
	}

	// A flipped byte in the last segment's last record is a torn write.
	d = copyDir(t, dir)
	last = filepath.Join(d, filepath.Base(files[len(files)-1]))
	data, err := os.ReadFile(last)
	if err != nil {
		t.Fatal(err)
	}
	data[len(data)-1] ^= 1
	os.WriteFile(last, data, 0o644)
	s = open(t, d, opts)
	holds(t, s, 1, 59, term1)
}
