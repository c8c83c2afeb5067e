package raftlog

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// filled returns a store in a new folder holding 1..last (term 1) over
// segments of about 1000 bytes, stored in batches of 3.
func filled(t *testing.T, last uint64) (*Store, string, Options) {
	t.Helper()
	dir := t.TempDir()
	opts := Options{SegmentSize: 1000}
	s := open(t, dir, opts)
	for i := uint64(1); i <= last; i += 3 {
		store(t, s, entries(i, min(i+2, last), 1))
	}
	if len(s.segs) < 5 {
		t.Fatalf("%d segments, want several", len(s.segs))
	}
	return s, dir, opts
}

func reopen(t *testing.T, s *Store, dir string, opts Options) *Store {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return open(t, dir, opts)
}

func TestDeleteFront(t *testing.T) {
	s, dir, opts := filled(t, 100)
	files := len(segFiles(t, dir))

	// Inside the first segment: no file goes.
	g := s.segs[0]
	if err := s.DeleteRange(1, g.first+1); err != nil {
		t.Fatal(err)
	}
	holds(t, s, g.first+2, 100, term1)
	if n := len(segFiles(t, dir)); n != files {
		t.Fatalf("%d segments, want %d", n, files)
	}
	s = reopen(t, s, dir, opts)
	holds(t, s, g.first+2, 100, term1) // the first index was stored

	// Clamped below, across whole segments, into the middle of one.
	mid := s.segs[2].first + 1
	if err := s.DeleteRange(0, mid-1); err != nil {
		t.Fatal(err)
	}
	holds(t, s, mid, 100, term1)
	if n := len(segFiles(t, dir)); n != files-2 {
		t.Fatalf("%d segments, want %d", n, files-2)
	}
	s = reopen(t, s, dir, opts)
	holds(t, s, mid, 100, term1)

	// Exactly to a segment's end.
	end := s.segs[0].last()
	if err := s.DeleteRange(mid, end); err != nil {
		t.Fatal(err)
	}
	holds(t, s, end+1, 100, term1)
	if n := len(segFiles(t, dir)); n != files-3 {
		t.Fatalf("%d segments, want %d", n, files-3)
	}
	store(t, s, entries(101, 105, 1))
	s = reopen(t, s, dir, opts)
	holds(t, s, end+1, 105, term1)
}

// TestDeleteFrontCrash: a crash after the first index was stored and
// before the segments' files were removed; Open removes them.
func TestDeleteFrontCrash(t *testing.T) {
	s, dir, opts := filled(t, 100)
	before := copyDir(t, dir)
	first := s.segs[3].first + 2
	if err := s.DeleteRange(1, first-1); err != nil {
		t.Fatal(err)
	}
	s.Close()
	for _, f := range segFiles(t, before) {
		if err := os.Link(f, filepath.Join(dir, filepath.Base(f))); err != nil && !errors.Is(err, os.ErrExist) {
			t.Fatal(err)
		}
	}
	s = open(t, dir, opts)
	holds(t, s, first, 100, term1)
	if n, want := len(segFiles(t, dir)), len(segFiles(t, before))-3; n != want {
		t.Fatalf("%d segments after Open, want %d", n, want)
	}
}

func TestDeleteBack(t *testing.T) {
	s, dir, opts := filled(t, 100)
	term := func(from uint64, t2 uint64) func(uint64) uint64 {
		return func(i uint64) uint64 {
			if i >= from {
				return t2
			}
			return 1
		}
	}

	// Inside the last segment.
	cut := s.segs[len(s.segs)-1].first + 1
	if err := s.DeleteRange(cut, 100); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 1, cut-1, term1)
	store(t, s, entries(cut, cut+2, 2))
	s = reopen(t, s, dir, opts)
	holds(t, s, 1, cut+2, term(cut, 2))

	// Across segment boundaries, clamped above.
	cut2 := s.segs[len(s.segs)-3].first + 1
	if err := s.DeleteRange(cut2, 1000); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 1, cut2-1, term1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = open(t, dir, opts) // the deleted entries stay deleted
	holds(t, s, 1, cut2-1, term1)
	store(t, s, entries(cut2, cut2+20, 3))
	s = reopen(t, s, dir, opts)
	holds(t, s, 1, cut2+20, term(cut2, 3))

	// At a segment's first record: that segment goes whole.
	g := s.segs[len(s.segs)-2]
	files := len(segFiles(t, dir))
	after := len(s.segs) - 2
	if err := s.DeleteRange(g.first, cut2+20); err != nil {
		t.Fatal(err)
	}
	if n := len(segFiles(t, dir)); n != after || n >= files {
		t.Fatalf("%d segments, want %d", n, after)
	}
	s = reopen(t, s, dir, opts)
	holds(t, s, 1, g.first-1, term(cut2, 3))
	store(t, s, entries(g.first, g.first, 4))
	holds(t, s, 1, g.first, func(i uint64) uint64 {
		if i == g.first {
			return 4
		}
		return term(cut2, 3)(i)
	})

	// A range inside the log is refused.
	if err := s.DeleteRange(5, 10); !errors.Is(err, ErrGap) {
		t.Fatalf("DeleteRange(5, 10): %v, want ErrGap", err)
	}
}

func TestDeleteAll(t *testing.T) {
	s, dir, opts := filled(t, 100)
	if err := s.DeleteRange(0, 1<<40); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 0, 0, term1)
	if n := len(segFiles(t, dir)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
	s = reopen(t, s, dir, opts)
	holds(t, s, 0, 0, term1)

	// A far index, as after a snapshot install.
	store(t, s, entries(5000, 5010, 2))
	s = reopen(t, s, dir, opts)
	holds(t, s, 5000, 5010, func(uint64) uint64 { return 2 })

	// Then a lower one: the first index left by the deletion must not
	// hide it after a restart.
	if err := s.DeleteRange(5000, 5010); err != nil {
		t.Fatal(err)
	}
	store(t, s, entries(7, 9, 3))
	s = reopen(t, s, dir, opts)
	holds(t, s, 7, 9, func(uint64) uint64 { return 3 })

	// Deleting nothing, or outside the log.
	for _, r := range [][2]uint64{{1, 6}, {10, 20}, {9, 8}} {
		if err := s.DeleteRange(r[0], r[1]); err != nil {
			t.Fatal(err)
		}
	}
	holds(t, s, 7, 9, func(uint64) uint64 { return 3 })
}

// TestDeleteAllCrash: a crash after the deletion was stored and before
// the files were removed; Open removes them and the log is empty.
func TestDeleteAllCrash(t *testing.T) {
	s, dir, opts := filled(t, 100)
	before := copyDir(t, dir)
	if err := s.DeleteRange(1, 100); err != nil {
		t.Fatal(err)
	}
	s.Close()
	files := segFiles(t, before)
	for _, f := range files[len(files)/2:] { // the newest half
		if err := os.Link(f, filepath.Join(dir, filepath.Base(f))); err != nil {
			t.Fatal(err)
		}
	}
	s = open(t, dir, opts)
	holds(t, s, 0, 0, term1)
	if n := len(segFiles(t, dir)); n != 0 {
		t.Fatalf("%d segments left after Open", n)
	}
	store(t, s, entries(101, 102, 2))
	s = reopen(t, s, dir, opts)
	holds(t, s, 101, 102, func(uint64) uint64 { return 2 })
}
