package cluster

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rlserver/rlserver/raftlog"
)

// The Raft log and stable store are a raftlog store in <Dir>/raft-log.
// Versions before it kept both in raft-boltdb's <Dir>/raft.db; on the
// first start after an upgrade openLogStore copies that store over (the
// log, the term and the vote) and renames it raft.db.migrated, which may
// be deleted once the node runs.

const (
	logDirName = "raft-log"
	boltName   = "raft.db"

	// logSegmentSize is the size of the log's segment files. Compaction
	// after a snapshot frees whole segments only, so up to one segment of
	// compacted entries stays on disk beside what Raft keeps: small
	// segments keep that small (data folders on small volumes hold the
	// log and two snapshots), and starting one costs a file creation and
	// a folder fsync every 8 MiB of log.
	logSegmentSize = 8 << 20

	migrateBatch = 512 // entries per StoreLogs while migrating
)

// stableKeys are the keys hashicorp/raft keeps in its stable store
// (raft.go: keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand).
var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// openLogStore opens dir's Raft log and stable store, migrating dir's
// raft.db into it first when there is one and the store holds no state.
func openLogStore(dir string, noSync bool, hooks raftlog.Hooks, log *slog.Logger) (*raftlog.Store, error) {
	opts := raftlog.Options{NoSync: noSync, SegmentSize: logSegmentSize, Hooks: hooks}
	path := filepath.Join(dir, logDirName)
	bolt := filepath.Join(dir, boltName)
	if _, err := os.Stat(bolt); errors.Is(err, fs.ErrNotExist) {
		return raftlog.Open(path, opts)
	} else if err != nil {
		return nil, err
	}
	if _, err := os.Stat(path); err == nil {
		s, err := raftlog.Open(path, opts)
		if err != nil {
			return nil, err
		}
		has, err := hasLogState(s)
		if err != nil {
			s.Close()
			return nil, err
		}
		if has {
			// A crash between the two renames below, or raft.db written
			// by an older version after the migration.
			log.Warn("raft.db ignored: the raft log folder holds state already; remove or rename raft.db",
				"raft_db", bolt, "raft_log", path)
			return s, nil
		}
		s.Close()
		if err := os.RemoveAll(path); err != nil {
			return nil, err
		}
	}
	if err := migrateBolt(bolt, path, opts, log); err != nil {
		return nil, fmt.Errorf("migrating %s: %w", bolt, err)
	}
	return raftlog.Open(path, opts)
}

// hasLogState reports whether s holds a log entry or a term.
func hasLogState(s *raftlog.Store) (bool, error) {
	last, err := s.LastIndex()
	if err != nil || last > 0 {
		return last > 0, err
	}
	_, err = s.Get([]byte(stableKeys[0]))
	if errors.Is(err, raftlog.ErrKeyNotFound) {
		return false, nil
	}
	return err == nil, err
}

// migrateBolt copies raft-boltdb's store at bolt into a new raftlog
// store at path: into a temporary folder, synced, then renamed, so that a
// crash leaves either no store at path (and the next start migrates
// again) or a whole one. Then bolt is renamed with ".migrated".
func migrateBolt(bolt, path string, opts raftlog.Options, log *slog.Logger) error {
	tmp := path + ".migrating"
	if err := os.RemoveAll(tmp); err != nil {
		return err
	}
	src, err := raftboltdb.New(raftboltdb.Options{Path: bolt, NoSync: true}) // read only: nothing to sync
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := raftlog.Open(tmp, opts)
	if err != nil {
		return err
	}
	from, first, last, err := copyBolt(src, dst)
	if cerr := dst.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.RemoveAll(tmp)
		return err
	}
	dir := filepath.Dir(path)
	if err := os.Rename(tmp, path); err != nil {
		return err
	}
	if err := syncDir(dir, opts.NoSync); err != nil {
		return err
	}
	if err := src.Close(); err != nil {
		return err
	}
	if err := os.Rename(bolt, bolt+".migrated"); err != nil {
		return err
	}
	if err := syncDir(dir, opts.NoSync); err != nil {
		return err
	}
	// first > from: the entries from..first-1 were left out (copyBolt).
	log.Info("raft log migrated from raft-boltdb", "from", bolt, "to", path, "renamed_to", bolt+".migrated",
		"first_index", first, "last_index", last, "raft_db_first_index", from)
	return nil
}

// copyBolt copies src's log and stable keys into dst, and returns src's
// first index and the range copied (0, 0, 0 for an empty log).
//
// raft-boltdb is not a monotonic store, so hashicorp/raft kept a
// follower's older entries when it installed a snapshot, and then
// appended after a gap: its log can be 1-50 then 201-300, with the
// snapshot covering everything up to 200. raftlog takes no gaps; only
// the entries after the last gap count (the snapshot covers the rest),
// so only those are copied.
func copyBolt(src *raftboltdb.BoltStore, dst *raftlog.Store) (from, first, last uint64, err error) {
	for _, k := range stableKeys {
		v, err := src.Get([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return 0, 0, 0, err
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return 0, 0, 0, err
		}
	}
	from, err = src.FirstIndex()
	if err != nil {
		return 0, 0, 0, err
	}
	last, err = src.LastIndex()
	if err != nil || last == 0 {
		return 0, 0, 0, err
	}
	var l raft.Log
	first = last
	for first > from {
		err := src.GetLog(first-1, &l)
		if errors.Is(err, raft.ErrLogNotFound) {
			break
		}
		if err != nil {
			return 0, 0, 0, err
		}
		first--
	}
	batch := make([]*raft.Log, 0, migrateBatch)
	for i := first; i <= last; i++ {
		e := new(raft.Log)
		if err := src.GetLog(i, e); err != nil {
			return 0, 0, 0, fmt.Errorf("index %d: %w", i, err)
		}
		batch = append(batch, e)
		if len(batch) == migrateBatch || i == last {
			if err := dst.StoreLogs(batch); err != nil {
				return 0, 0, 0, err
			}
			batch = batch[:0]
		}
	}
	return from, first, last, nil
}

// syncDir makes renames in dir durable.
func syncDir(dir string, noSync bool) error {
	if noSync {
		return nil
	}
	return raftlog.SyncDir(dir)
}
