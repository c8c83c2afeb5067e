package raftlog

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/hashicorp/raft"
)

// DefaultSegmentSize is Options.SegmentSize's default: 64 MiB.
const DefaultSegmentSize = 64 << 20

var (
	// ErrKeyNotFound is Get's and GetUint64's error for a missing key. Its
	// text is what hashicorp/raft compares (raft-boltdb's is the same).
	ErrKeyNotFound = errors.New("not found")
	// ErrNotConsecutive is StoreLogs' error for entries that do not
	// continue the log one index at a time; nothing was stored.
	ErrNotConsecutive = errors.New("log entries not consecutive")
	// ErrGap is DeleteRange's error for a range that is neither the front,
	// the back nor the whole of the log.
	ErrGap = errors.New("deletion would leave a gap in the log")
	// ErrCorrupt is a record or file that does not check out.
	ErrCorrupt = errors.New("corrupt")
	// ErrTooLarge is StoreLogs' error for an entry above 4 GiB.
	ErrTooLarge = errors.New("log entry above 4 GiB")
	// ErrClosed is the error of every method after Close.
	ErrClosed = errors.New("log store closed")
	// ErrSyncFailed wraps the error of every write after an fdatasync of
	// records already in the log failed (Sync, or a segment change after
	// Append): what reached the disk is unknown until the store is opened
	// again, which rereads it.
	ErrSyncFailed = errors.New("an fdatasync of the log failed")
)

// Options configures a Store or a Shared log.
type Options struct {
	// NoSync skips every fdatasync and fsync: for tests only (doc.go).
	NoSync bool
	// SegmentSize is the size past which StoreLogs starts a new segment
	// file; 0: DefaultSegmentSize. Deletion from the front frees whole
	// segments only, so up to this much disk is held beyond what Raft
	// keeps.
	SegmentSize int64
	// Hooks are called at the steps of a StoreLogs: for tests that end
	// the process between them.
	Hooks Hooks
}

// Hooks are called by StoreLogs with the file and the byte range [start,
// end) its records were written to; nil ones are skipped. A Shared log
// calls them around each fdatasync of a segment, with the range it
// makes durable (every group's records written since the last sync).
type Hooks struct {
	BeforeSync func(f *os.File, start, end int64) // written, not yet synced
	AfterSync  func(f *os.File, start, end int64) // synced, not yet returned
}

// Store is Raft's log and stable store in one folder (doc.go). Its
// methods are safe for concurrent use; GetLog, FirstIndex and LastIndex
// do not wait for a StoreLogs' fdatasync.
type Store struct {
	dir  string
	opts Options

	// wmu serialises the writers (StoreLogs, DeleteRange, Close). The
	// fields below mu change only under both, so a writer reads them
	// under wmu alone and readers under mu.RLock.
	wmu    sync.Mutex
	mu     sync.RWMutex
	segs   []*segment // by first index; the last one is appended to
	first  uint64     // 0 when empty; may be past segs[0].first after a front deletion
	last   uint64     // 0 when empty
	closed bool

	// Owned by the writer (wmu).
	buf          []byte  // StoreLogs' records
	rel          []int64 // their offsets in buf
	truncPending bool    // the tail file may be longer than its good size: truncate before writing
	stale        []string
	broken       error  // set when a sync of published records failed: every write fails (ErrSyncFailed)
	gen          uint64 // counts back deletions, which a Sync that overlaps one must not count as synced

	// durable is the last index whose record is synced (Append, Sync):
	// written under wmu, read by anyone.
	durable atomic.Uint64

	stable *stableFile

	// Test hooks: the data sync of a file, and truncation.
	fsync    func(*os.File) error
	truncate func(*os.File, int64) error
}

var (
	_ raft.LogStore          = (*Store)(nil)
	_ raft.MonotonicLogStore = (*Store)(nil)
	_ raft.StableStore       = (*Store)(nil)
)

// Open opens the store in dir, creating dir and the store if needed. It
// checks every record and cuts a torn tail off the last segment; damage
// elsewhere is an error naming the file and offset (doc.go).
func Open(dir string, opts Options) (*Store, error) {
	if opts.SegmentSize <= 0 {
		opts.SegmentSize = DefaultSegmentSize
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	s := &Store{dir: dir, opts: opts, fsync: fdatasync, truncate: (*os.File).Truncate}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	var firsts []uint64
	for _, e := range entries {
		if first, ok := parseSegName(e.Name()); ok {
			firsts = append(firsts, first)
		} else if strings.HasSuffix(e.Name(), ".tmp") {
			os.Remove(filepath.Join(dir, e.Name())) // a rewrite of the stable file that did not finish
		}
	}
	slices.Sort(firsts)
	s.stable, err = openStable(dir, s.syncData, s.syncDir)
	if err != nil {
		return nil, err
	}
	if err := s.load(firsts); err != nil {
		s.closeFiles()
		return nil, err
	}
	// Records a process that crashed had appended but not synced are in
	// the page cache, read back above as if on disk: sync them before
	// they count as durable.
	if n := len(s.segs); n > 0 {
		if err := s.syncData(s.segs[n-1].f); err != nil {
			s.closeFiles()
			return nil, fmt.Errorf("raftlog: %w", err)
		}
	}
	s.durable.Store(s.last)
	return s, nil
}

// load opens the segments named by firsts (sorted) and sets the log's
// bounds. It removes segments lying wholly before the stored first index
// and an empty last segment.
func (s *Store) load(firsts []uint64) error {
	stored := s.stable.storedFirst()
	removed := false
	remove := func(path string) error {
		removed = true
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
		return nil
	}
	// A segment whose successor starts at or before the stored first
	// index holds deleted records only: a deletion whose removals a
	// crash interrupted.
	for len(firsts) > 1 && firsts[1] <= stored {
		if err := remove(filepath.Join(s.dir, segName(firsts[0]))); err != nil {
			return err
		}
		firsts = firsts[1:]
	}
	for i, first := range firsts {
		g, err := openSegment(s.dir, first, 0)
		if err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
		s.segs = append(s.segs, g)
		bad, err := g.scan()
		if err != nil {
			return fmt.Errorf("raftlog: %w", err)
		}
		g.synced = g.size // the last one is synced by Open
		isLast := i == len(firsts)-1
		if bad != nil && (!isLast || !bad.torn) {
			return fmt.Errorf("raftlog: %s: offset %d: %w: %s", g.path, bad.off, ErrCorrupt, bad.reason)
		}
		if isLast && g.alloc > g.size {
			// A write that never completed, so never acknowledged, or
			// preallocated zeros: cut, so that no byte of an unfinished
			// write stays behind zeros the next records overwrite.
			if err := s.truncate(g.f, g.size); err != nil {
				return fmt.Errorf("raftlog: cutting a torn tail at %d: %w", g.size, err)
			}
			if err := s.syncData(g.f); err != nil {
				return fmt.Errorf("raftlog: %w", err)
			}
			g.alloc = g.size
		}
		if i > 0 {
			prev := s.segs[i-1]
			if len(prev.offsets) == 0 {
				return fmt.Errorf("raftlog: %s: %w: empty, and not the last segment", prev.path, ErrCorrupt)
			}
			if g.first != prev.last()+1 {
				return fmt.Errorf("raftlog: %s: offset 0: %w: starts at index %d, but %s ends at %d",
					g.path, ErrCorrupt, g.first, filepath.Base(prev.path), prev.last())
			}
		}
	}
	// An empty last segment: created, then its first write failed.
	if n := len(s.segs); n > 0 && len(s.segs[n-1].offsets) == 0 {
		g := s.segs[n-1]
		g.f.Close()
		s.segs = s.segs[:n-1]
		if err := remove(g.path); err != nil {
			return err
		}
	}
	if n := len(s.segs); n > 0 {
		if last := s.segs[n-1].last(); stored > last {
			// A deletion of the whole log that a crash interrupted.
			for _, g := range s.segs {
				g.f.Close()
				if err := remove(g.path); err != nil {
					return err
				}
			}
			s.segs = nil
		} else {
			s.first, s.last = max(stored, s.segs[0].first), last
		}
	}
	if removed {
		return s.syncDir()
	}
	return nil
}

// Close closes the store's files. Later calls return ErrClosed.
func (s *Store) Close() error {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.closed {
		return nil
	}
	var err error
	if s.truncPending {
		err = s.repair()
	}
	if n := len(s.segs); err == nil && n > 0 {
		// The zeros preallocated past the last record: Open would cut
		// them, but a closed store leaves its files exact.
		if g := s.segs[n-1]; g.alloc > g.size {
			err = s.truncate(g.f, g.size)
		}
	}
	return errors.Join(err, s.closeFiles())
}

// closeFiles closes every file; the caller holds wmu (or is Open).
func (s *Store) closeFiles() error {
	s.mu.Lock()
	segs := s.segs
	s.segs, s.first, s.last, s.closed = nil, 0, 0, true
	s.mu.Unlock()
	var errs []error
	for _, g := range segs {
		errs = append(errs, g.f.Close())
	}
	if s.stable != nil {
		errs = append(errs, s.stable.close())
	}
	return errors.Join(errs...)
}

func (s *Store) syncData(f *os.File) error {
	if s.opts.NoSync {
		return nil
	}
	return s.fsync(f)
}

func (s *Store) syncDir() error {
	if s.opts.NoSync {
		return nil
	}
	return SyncDir(s.dir)
}

// SyncDir makes the creations, renames and removals in the folder dir
// durable (fsync of the folder).
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("raftlog: %w", err)
	}
	return nil
}

// Set implements raft.StableStore.
func (s *Store) Set(key, val []byte) error { return s.stable.set(key, val) }

// Get implements raft.StableStore: ErrKeyNotFound for a missing key.
func (s *Store) Get(key []byte) ([]byte, error) { return s.stable.get(key) }

// SetUint64 implements raft.StableStore: val is stored as 8 bytes,
// big-endian.
func (s *Store) SetUint64(key []byte, val uint64) error {
	return s.stable.set(key, binary.BigEndian.AppendUint64(nil, val))
}

// GetUint64 implements raft.StableStore: ErrKeyNotFound for a missing
// key, an error for a value that is not 8 bytes.
func (s *Store) GetUint64(key []byte) (uint64, error) {
	v, err := s.stable.get(key)
	if err != nil {
		return 0, err
	}
	if len(v) != 8 {
		return 0, fmt.Errorf("raftlog: %w: %q holds %d bytes, not a uint64", ErrCorrupt, key, len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}
