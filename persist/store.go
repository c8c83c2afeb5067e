package persist

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// FileName is the snapshot's name inside the data folder.
const FileName = "snapshot.rls"

// tempPrefix starts the name of a snapshot being written; a crash can
// leave one behind, and Open removes it.
const tempPrefix = FileName + ".tmp-"

// Store keeps one snapshot file in a folder and replaces it atomically: a
// crash at any moment leaves either the previous snapshot or the new one,
// whole. Its methods are not safe for concurrent use; Saver serializes
// them.
type Store struct {
	dir  string
	path string

	// BeforeRename, when set, runs after a new snapshot is written and
	// synced to its temporary file and before it replaces the old one.
	// It exists for fault-injection tests (a crash mid-save).
	BeforeRename func(tempPath string)
}

// Open returns the store of folder dir, which must exist, and removes the
// temporary files that an interrupted save left there.
func Open(dir string) (*Store, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	s := &Store{dir: abs, path: filepath.Join(abs, FileName)}
	stale, err := filepath.Glob(filepath.Join(abs, tempPrefix+"*"))
	if err != nil {
		return nil, err
	}
	for _, f := range stale {
		if err := os.Remove(f); err != nil {
			return nil, fmt.Errorf("removing an interrupted save: %w", err)
		}
	}
	return s, nil
}

// Path is the snapshot file's absolute path.
func (s *Store) Path() string { return s.path }

// Write replaces the snapshot with h and recs, which must be sorted by key
// (SortRecords). It writes a temporary file in the same folder, syncs it,
// renames it over the snapshot and syncs the folder, so the new snapshot
// is durable when Write returns and a crash before that leaves the old
// one. It returns the file's size.
func (s *Store) Write(h Header, recs []engine.Record) (size int64, err error) {
	return s.write(h, func(e *Encoder) error {
		for i := range recs {
			if err := e.Write(recs[i]); err != nil {
				return err
			}
		}
		return nil
	})
}

// write is Write with the records given by records.
func (s *Store) write(h Header, records func(*Encoder) error) (size int64, err error) {
	f, err := os.CreateTemp(s.dir, tempPrefix+"*")
	if err != nil {
		return 0, err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(tmp)
		}
	}()
	w := bufio.NewWriterSize(f, 1<<20)
	e, err := NewEncoder(w, h)
	if err != nil {
		return 0, err
	}
	if err := records(e); err != nil {
		return 0, err
	}
	if err := e.Close(); err != nil {
		return 0, err
	}
	if err := w.Flush(); err != nil {
		return 0, err
	}
	if err := f.Sync(); err != nil {
		return 0, err
	}
	if err := f.Close(); err != nil {
		return 0, err
	}
	if s.BeforeRename != nil {
		s.BeforeRename(tmp)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		return 0, err
	}
	// The rename is durable only once the folder is synced. If that fails,
	// the new file is in place but may not survive a power loss.
	if err := syncDir(s.dir); err != nil {
		return e.Bytes(), fmt.Errorf("syncing folder %s: %w", s.dir, err)
	}
	return e.Bytes(), nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// Read reads and checks the whole snapshot. It returns an error wrapping
// fs.ErrNotExist when there is none, and ErrCorrupt, ErrTruncated or
// ErrNewerVersion (the text names the file) when it cannot be used; then
// it returns no records.
func (s *Store) Read() (Header, []engine.Record, error) {
	f, err := os.Open(s.path)
	if err != nil {
		return Header{}, nil, err
	}
	defer f.Close()
	h, recs, err := decode(f, countHint(f))
	if err != nil {
		return Header{}, nil, fmt.Errorf("%s: %w", s.path, err)
	}
	return h, recs, nil
}

// countHint reads the record count in f's trailer, unchecked, so the
// decoder can make room for all records at once; 0 when it looks wrong.
func countHint(f *os.File) int {
	fi, err := f.Stat()
	if err != nil || fi.Size() < int64(headerLen+trailerLen) {
		return 0
	}
	var t [trailerLen]byte
	if _, err := f.ReadAt(t[:], fi.Size()-trailerLen); err != nil || t[0] != endTag {
		return 0
	}
	n := binary.BigEndian.Uint64(t[1:9])
	if n > uint64(fi.Size()/minRecord) {
		return 0
	}
	return int(n)
}

// LoadStats describes a load.
type LoadStats struct {
	Found    bool          // a snapshot file existed
	Records  int           // records in the file
	Bytes    int64         // the file's size
	Clock    int64         // the snapshot's clock (ns since the epoch)
	Duration time.Duration // read, check and import
	Policies [][]string    // the policies' definitions (Header.Policies), for the caller to install
}

// Importer is the state a snapshot loads into: *engine.Engine.
type Importer interface {
	Import(ctx context.Context, nowNanos int64, recs []engine.Record) error
}

// Load reads the snapshot, checks all of it, and only then imports it into
// dst at max(nowNanos, the snapshot's clock), so the clock never runs
// backwards across a restart. A missing file is not an error (Found is
// false). A damaged file is ErrCorrupt or ErrTruncated, and a record the
// engine refuses is ErrCorrupt too; then nothing is imported and the file
// is left as it is.
func (s *Store) Load(ctx context.Context, dst Importer, nowNanos int64) (LoadStats, error) {
	start := time.Now()
	var st LoadStats
	if fi, err := os.Stat(s.path); err == nil {
		st.Bytes = fi.Size()
	}
	h, recs, err := s.Read()
	if errors.Is(err, fs.ErrNotExist) {
		return st, nil
	}
	st.Found = true
	if err != nil {
		return st, err
	}
	st.Records, st.Clock, st.Policies = len(recs), h.ClockNanos, h.Policies
	if err := dst.Import(ctx, max(nowNanos, h.ClockNanos), recs); err != nil {
		if errors.Is(err, engine.ErrBadRecord) {
			return st, fmt.Errorf("%s: %w: %v", s.path, ErrCorrupt, err)
		}
		return st, err
	}
	st.Duration = time.Since(start)
	return st, nil
}

// MoveAside renames a damaged snapshot to its name plus ".corrupt-" and
// the UTC time (and a counter if that name is taken), so the next start
// finds none, and returns the new path.
func (s *Store) MoveAside(now time.Time) (string, error) {
	base := s.path + ".corrupt-" + now.UTC().Format("20060102T150405Z")
	to := base
	for i := 2; ; i++ {
		if _, err := os.Lstat(to); errors.Is(err, fs.ErrNotExist) {
			break
		}
		to = fmt.Sprintf("%s-%d", base, i)
	}
	if err := os.Rename(s.path, to); err != nil {
		return "", err
	}
	return to, syncDir(s.dir)
}

// SortRecords sorts recs by key (bytewise), the order snapshots are in.
func SortRecords(recs []engine.Record) {
	slices.SortFunc(recs, func(a, b engine.Record) int { return strings.Compare(a.Key, b.Key) })
}
