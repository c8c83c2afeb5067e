package raftlog

import (
	"errors"
	"os"
	"sync/atomic"
	"testing"
)

// TestAppendDefersSync: appended records are in the log at once, durable
// once synced; StoreLogs and a segment change sync what Append left; a
// machine crash (the file cut where the last sync ended) loses exactly
// the records above Durable.
func TestAppendDefersSync(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4000}
	s := open(t, dir, opts)
	var syncs atomic.Int64
	s.fsync = func(f *os.File) error { syncs.Add(1); return fdatasync(f) }

	if err := s.Append(entries(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	holds(t, s, 1, 5, term1)
	if d := s.Durable(); d != 0 || syncs.Load() != 0 {
		t.Fatalf("after Append: Durable %d, %d syncs; want 0, 0", d, syncs.Load())
	}
	if d, err := s.Sync(); d != 5 || err != nil || s.Durable() != 5 || syncs.Load() != 1 {
		t.Fatalf("Sync = %d, %v (Durable %d, %d syncs); want 5, nil, one sync", d, err, s.Durable(), syncs.Load())
	}
	if d, err := s.Sync(); d != 5 || err != nil || syncs.Load() != 1 {
		t.Fatalf("Sync with nothing new = %d, %v, %d syncs; want 5 and no sync", d, err, syncs.Load())
	}
	// StoreLogs syncs what Append left before it.
	if err := s.Append(entries(6, 8, 1)); err != nil {
		t.Fatal(err)
	}
	store(t, s, entries(9, 9, 1))
	if d := s.Durable(); d != 9 {
		t.Fatalf("after StoreLogs: Durable %d, want 9", d)
	}

	// Appends that cross into new segments: each full segment is synced
	// when the log moves past it, so only the last holds unsynced records.
	next := uint64(10)
	for len(segFiles(t, dir)) < 3 {
		if err := s.Append(entries(next, next+3, 1)); err != nil {
			t.Fatal(err)
		}
		next += 4
	}
	last := next - 1
	tail := s.segs[len(s.segs)-1]
	if d := s.Durable(); d != tail.first-1 {
		t.Fatalf("after appends over 3 segments: Durable %d, want %d (the end of the segment before the last)", d, tail.first-1)
	}
	// The machine crashes: what was not synced is gone.
	synced := tail.synced
	crashed := copyDir(t, dir)
	if err := os.Truncate(segFiles(t, crashed)[2], synced); err != nil {
		t.Fatal(err)
	}
	c := open(t, crashed, opts)
	holds(t, c, 1, tail.first-1, term1)
	if d := c.Durable(); d != tail.first-1 {
		t.Fatalf("reopened after the crash: Durable %d, want %d", d, tail.first-1)
	}
	// Without the crash, all of it, synced at open.
	if d, err := s.Sync(); d != last || err != nil {
		t.Fatalf("Sync = %d, %v; want %d", d, err, last)
	}
	s = reopen(t, s, dir, opts)
	holds(t, s, 1, last, term1)
	if d := s.Durable(); d != last {
		t.Fatalf("reopened: Durable %d, want %d", d, last)
	}
}

// TestSyncFailureBreaks: a failed Sync of appended records breaks the
// store (every write fails, Durable stays); reopening reads what is on
// disk.
func TestSyncFailureBreaks(t *testing.T) {
	for _, how := range []string{"Sync", "StoreLogs"} {
		dir := t.TempDir()
		s := open(t, dir, Options{})
		var fail atomic.Bool
		s.fsync = func(f *os.File) error {
			if fail.Load() {
				return errInjected
			}
			return fdatasync(f)
		}
		store(t, s, entries(1, 3, 1))
		if err := s.Append(entries(4, 6, 1)); err != nil {
			t.Fatal(err)
		}
		fail.Store(true)
		var err error
		if how == "Sync" {
			_, err = s.Sync()
		} else {
			err = s.StoreLogs(entries(7, 7, 1))
		}
		if !errors.Is(err, ErrSyncFailed) || !errors.Is(err, errInjected) {
			t.Fatalf("%s with the sync failing: %v, want ErrSyncFailed wrapping the injected error", how, err)
		}
		fail.Store(false)
		for _, w := range []func() error{
			func() error { return s.Append(entries(7, 7, 1)) },
			func() error { return s.StoreLogs(entries(7, 7, 1)) },
			func() error { _, err := s.Sync(); return err },
		} {
			if err := w(); !errors.Is(err, ErrSyncFailed) {
				t.Fatalf("a write after the failed sync: %v, want ErrSyncFailed", err)
			}
		}
		if d := s.Durable(); d != 3 {
			t.Fatalf("Durable %d after the failed sync, want 3", d)
		}
		s = reopen(t, s, dir, Options{})
		holds(t, s, 1, 6, term1) // the page cache kept them: the process did not crash
		if d := s.Durable(); d != 6 {
			t.Fatalf("reopened: Durable %d, want 6", d)
		}
		store(t, s, entries(7, 7, 1))
	}
}

// TestSyncAcrossDeleteBack: a back deletion that lands while a Sync's
// fdatasync runs keeps Durable below the deleted records, even once new
// records took their indexes.
func TestSyncAcrossDeleteBack(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	store(t, s, entries(1, 4, 1))
	if err := s.Append(entries(5, 8, 1)); err != nil {
		t.Fatal(err)
	}
	inSync, release := make(chan struct{}), make(chan struct{})
	var once atomic.Bool
	s.fsync = func(f *os.File) error {
		if once.CompareAndSwap(false, true) {
			close(inSync)
			<-release
		}
		return fdatasync(f)
	}
	done := make(chan error)
	go func() { _, err := s.Sync(); done <- err }()
	<-inSync
	if err := s.DeleteRange(6, 8); err != nil {
		t.Fatal(err)
	}
	if err := s.Append(entries(6, 9, 2)); err != nil {
		t.Fatal(err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if d := s.Durable(); d > 5 {
		t.Fatalf("Durable %d after a Sync that overlapped the deletion of 6-8, want at most 5", d)
	}
	if d, err := s.Sync(); d != 9 || err != nil {
		t.Fatalf("the next Sync = %d, %v; want 9", d, err)
	}
	holds(t, s, 1, 9, func(i uint64) uint64 { return map[bool]uint64{true: 2, false: 1}[i >= 6] })
}

// TestAppendNoSync: with NoSync, appended records count as durable at once.
func TestAppendNoSync(t *testing.T) {
	s := open(t, t.TempDir(), Options{NoSync: true})
	if err := s.Append(entries(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	if d := s.Durable(); d != 3 {
		t.Fatalf("Durable %d, want 3", d)
	}
}
