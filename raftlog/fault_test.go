package raftlog

import (
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/internal/testfs"
)

var errInjected = errors.New("injected fault")

// TestSyncFails: a failed fdatasync fails the StoreLogs and the segment is
// cut back; when the cut fails too, it is redone before the next write.
// Either way the next StoreLogs continues from the last good entry, and
// after reopening the log holds exactly the StoreLogs that succeeded.
func TestSyncFails(t *testing.T) {
	for _, truncFails := range []bool{false, true} {
		dir := t.TempDir()
		opts := Options{SegmentSize: 1500}
		s := open(t, dir, opts)
		next := uint64(1)
		var failSync, failTrunc atomic.Bool
		s.fsync = func(f *os.File) error {
			if failSync.Load() {
				return errInjected
			}
			return fdatasync(f)
		}
		s.truncate = func(f *os.File, size int64) error {
			if failTrunc.Load() {
				return errInjected
			}
			return f.Truncate(size)
		}
		for round := range 12 {
			store(t, s, entries(next, next+2, 1))
			next += 3
			tail := s.segs[len(s.segs)-1]
			good := tail.size
			failSync.Store(true)
			failTrunc.Store(truncFails)
			if err := s.StoreLogs(entries(next, next+2, 9)); !errors.Is(err, errInjected) {
				t.Fatalf("round %d: StoreLogs with fdatasync failing: %v", round, err)
			}
			holds(t, s, 1, next-1, term1)
			if s.segs[len(s.segs)-1] != tail {
				tail = s.segs[len(s.segs)-1] // a new segment was started for the write
				good = 0
			}
			size := fileSize(t, tail.path)
			if truncFails != (size > good) {
				t.Fatalf("round %d: tail file %d bytes, good size %d, the cut failing: %v", round, size, good, truncFails)
			}
			failTrunc.Store(false)
			if truncFails && round%2 == 0 {
				// The next write cannot cut either: still nothing stored.
				failTrunc.Store(true)
				if err := s.StoreLogs(entries(next, next, 9)); !errors.Is(err, errInjected) {
					t.Fatalf("round %d: %v", round, err)
				}
				failTrunc.Store(false)
			}
			failSync.Store(false)
		}
		store(t, s, entries(next, next, 1))
		s = reopen(t, s, dir, opts)
		holds(t, s, 1, next, term1)
	}
}

// TestFullDisk fills a real file system: StoreLogs fails and leaves the
// store as it was, succeeds again once there is room, and after
// reopening the log holds exactly the StoreLogs that succeeded.
func TestFullDisk(t *testing.T) {
	mnt := t.TempDir()
	testfs.MountTmpfs(t, mnt, "4m")
	dir := filepath.Join(mnt, "log")
	opts := Options{SegmentSize: 256 << 10}
	s := open(t, dir, opts)
	big := func(from, to, term uint64) []*raft.Log {
		logs := entries(from, to, term)
		for _, l := range logs {
			l.Data = make([]byte, 20<<10+l.Index) // more than a page: needs new room
			for i := range l.Data {
				l.Data[i] = byte(l.Index + uint64(i))
			}
		}
		return logs
	}
	var want []*raft.Log
	next := uint64(1)
	put := func(n uint64) error {
		logs := big(next, next+n-1, 1)
		err := s.StoreLogs(logs)
		if err == nil {
			want = append(want, logs...)
			next += n
		}
		return err
	}
	check := func(s *Store) {
		t.Helper()
		bounds(t, s, want[0].Index, next-1)
		for _, w := range want {
			var got raft.Log
			if err := s.GetLog(w.Index, &got); err != nil {
				t.Fatal(err)
			}
			sameLog(t, &got, w)
		}
	}
	for range 10 {
		if err := put(3); err != nil {
			t.Fatal(err)
		}
	}
	for round := range 4 {
		filler := testfs.FillUp(t, mnt)
		// Records first fill the zeros written ahead of them (writing
		// there needs no new room); then StoreLogs fails.
		var err error
		for tries := 0; err == nil; tries++ {
			if tries == 2000 {
				t.Fatalf("round %d: 2000 StoreLogs on a full disk succeeded", round)
			}
			err = put(uint64(1 + round))
		}
		if !errors.Is(err, syscall.ENOSPC) {
			t.Fatalf("round %d: StoreLogs on a full disk: %v, want ENOSPC", round, err)
		}
		t.Logf("round %d, full: %v", round, err)
		check(s)
		// The stable store writes in place: it needs no new room.
		if err := s.SetUint64([]byte("CurrentTerm"), uint64(10+round)); err != nil {
			t.Fatalf("round %d: SetUint64 on a full disk: %v", round, err)
		}
		if err := os.Remove(filler); err != nil {
			t.Fatal(err)
		}
		for range 3 + round*5 { // into new segments too
			if err := put(2); err != nil {
				t.Fatalf("round %d: StoreLogs after freeing the disk: %v", round, err)
			}
		}
		check(s)
		// Compaction frees room: most of the log goes.
		first, _ := s.FirstIndex()
		if err := s.DeleteRange(first, next-8); err != nil {
			t.Fatal(err)
		}
		want = want[len(want)-7:]
	}
	s.Close()
	s = open(t, dir, opts)
	check(s)
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 13 {
		t.Fatalf("CurrentTerm %d, %v; want 13", v, err)
	}
}

// TestConcurrent runs one writer, readers of random indexes and a
// compactor from the front together (go test -race).
func TestConcurrent(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{SegmentSize: 4000, NoSync: true})
	store(t, s, entries(1, 10, 1))
	const last = 3000
	var wg sync.WaitGroup
	done := make(chan struct{})
	errc := make(chan error, 16)
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(done)
		for i := uint64(11); i <= last; i += 3 {
			if err := s.StoreLogs(entries(i, min(i+2, last), 1)); err != nil {
				errc <- err
				return
			}
		}
	}()
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			first, _ := s.FirstIndex()
			lastIdx, _ := s.LastIndex()
			if lastIdx > first+200 {
				if err := s.DeleteRange(first, first+uint64(rand.IntN(100))); err != nil {
					errc <- err
					return
				}
			}
		}
	}()
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var l raft.Log
			for {
				select {
				case <-done:
					return
				default:
				}
				first, _ := s.FirstIndex()
				lastIdx, _ := s.LastIndex()
				i := first + uint64(rand.IntN(int(lastIdx-first+1)))
				err := s.GetLog(i, &l)
				if errors.Is(err, raft.ErrLogNotFound) {
					if now, _ := s.FirstIndex(); now > i {
						continue // compacted meanwhile
					}
				}
				if err != nil {
					errc <- err
					return
				}
				if l.Index != i || len(l.Data) != len(entry(i, 1).Data) {
					errc <- errors.New("GetLog returned another entry")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	s = reopen(t, s, dir, Options{SegmentSize: 4000})
	holds(t, s, first, last, term1)
}

// TestDeleteAllWhenSyncFails: Raft deletes the whole log after installing
// a snapshot and does not retry; the log is emptied even when storing
// the deletion fails, and a first index the failed write may have left
// on disk does not hide what is stored next, below it.
func TestDeleteAllWhenSyncFails(t *testing.T) {
	s, dir, opts := filled(t, 100)
	var fail atomic.Bool
	s.fsync = func(f *os.File) error {
		if fail.Load() {
			return errInjected
		}
		return fdatasync(f)
	}
	fail.Store(true)
	if err := s.DeleteRange(1, 100); !errors.Is(err, errInjected) {
		t.Fatalf("DeleteRange with fdatasync failing: %v", err)
	}
	holds(t, s, 0, 0, term1)
	if n := len(segFiles(t, dir)); n != 0 {
		t.Fatalf("%d segments left", n)
	}
	if err := s.StoreLogs(entries(50, 52, 2)); !errors.Is(err, errInjected) {
		t.Fatalf("StoreLogs with fdatasync failing: %v", err)
	}
	fail.Store(false)
	store(t, s, entries(50, 52, 2))
	s = reopen(t, s, dir, opts)
	holds(t, s, 50, 52, func(uint64) uint64 { return 2 })
}
