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

// The Raft log and stable store of every group a process hosts are one
// raftlog.Shared log, in <parent>/wal, where parent is the folder that
// holds the groups' folders (a sharded process's --dir/raft, whose
// meta, g1, g2... hold each group's snapshots) or, for a one-group
// node, the node's own folder. Each group writes through its GroupLog,
// so concurrent appends of several groups share one write and one
// fdatasync (raftlog, doc.go, Shared log).
//
// Versions before it kept a raftlog.Store per group in <Dir>/raft-log,
// and versions before that raft-boltdb's <Dir>/raft.db. On the first
// start after an upgrade openGroupLog converts what the group's folder
// holds into its GroupLog, once: raft.db is first copied into a Store
// (migrateBolt, and renamed raft.db.migrated, which may be deleted once
// the node runs), then raft-log is renamed raft-log.converting, copied
// (entries, term, vote), and removed. A crash during the copy leaves
// raft-log.converting, and the next start drops the group's partial
// copy and copies again.

const (
	// WALDirName is the shared log's folder in the groups' parent folder.
	WALDirName  = "wal"
	logDirName  = "raft-log"
	convertName = "raft-log.converting"
	boltName    = "raft.db"

	// logSegmentSize is the size of the log's segment files. Reclaiming
	// frees whole segments only (rewriting a lagging group's few live
	// records forward), so up to a segment or two of dead records stays
	// on disk beside what Raft keeps: small segments keep that small
	// (data folders on small volumes hold the log and two snapshots per
	// group), and starting one costs a file creation and a folder fsync
	// every 8 MiB of log.
	logSegmentSize = 8 << 20

	migrateBatch = 512 // entries per write while migrating
)

// stableKeys are the keys hashicorp/raft keeps in its stable store
// (raft.go: keyCurrentTerm, keyLastVoteTerm, keyLastVoteCand).
var stableKeys = []string{"CurrentTerm", "LastVoteTerm", "LastVoteCand"}

// OpenLog opens the shared Raft log of a process in parent/wal, for
// Config.Log: noSync and hooks are Config.NoSync and Config.LogHooks.
// Close it after every node that writes to it has closed.
func OpenLog(parent string, noSync bool, hooks raftlog.Hooks) (*raftlog.Shared, error) {
	wal, err := raftlog.OpenShared(filepath.Join(parent, WALDirName),
		raftlog.Options{NoSync: noSync, SegmentSize: logSegmentSize, Hooks: hooks})
	if err != nil {
		return nil, fmt.Errorf("raft log: %w", err)
	}
	return wal, nil
}

// SharedLog is a process's shared Raft log (OpenLog), for the packages
// that hold one without using raftlog: Drop deletes a group's entries and
// keys (a replica the process no longer hosts, its node closed), Close
// closes it after every node that writes to it.
type SharedLog = raftlog.Shared

// openGroupLog returns group's log in wal, converting the log dir holds
// from an earlier version first (above).
func openGroupLog(wal *raftlog.Shared, group uint32, dir string, noSync bool, log *slog.Logger) (*raftlog.GroupLog, error) {
	g, err := wal.Group(group)
	if err != nil {
		return nil, err
	}
	conv := filepath.Join(dir, convertName)
	if exists, err := present(conv); err != nil {
		return nil, err
	} else if exists {
		// A conversion a crash interrupted: its copy may be partial.
		if err := wal.Drop(group); err != nil {
			return nil, err
		}
		return g, convertStore(conv, dir, g, noSync, log)
	}
	old, bolt := filepath.Join(dir, logDirName), filepath.Join(dir, boltName)
	hasOld, err := present(old)
	if err != nil {
		return nil, err
	}
	hasBolt, err := present(bolt)
	if err != nil {
		return nil, err
	}
	if !hasOld && !hasBolt {
		return g, nil
	}
	if has, err := hasLogState(g); err != nil {
		return nil, err
	} else if has {
		// raft-log or raft.db written by an older version after the
		// conversion (a downgrade and an upgrade).
		log.Warn("old raft log ignored: the shared log holds this group's state already; remove it",
			"dir", dir, "group", group)
		return g, nil
	}
	opts := raftlog.Options{NoSync: noSync, SegmentSize: logSegmentSize}
	var s *raftlog.Store
	if hasBolt {
		s, err = openBoltStore(dir, opts, log)
	} else {
		s, err = raftlog.Open(old, opts)
	}
	if err != nil {
		// A damaged Store is refused here, left as it was.
		return nil, fmt.Errorf("group %d: %w", group, err)
	}
	if err := s.Close(); err != nil {
		return nil, err
	}
	if err := os.Rename(old, conv); err != nil {
		return nil, err
	}
	if err := syncDir(dir, noSync); err != nil {
		return nil, err
	}
	return g, convertStore(conv, dir, g, noSync, log)
}

// present reports whether path exists.
func present(path string) (bool, error) {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return err == nil, err
}

// convertStore copies the Store at path (entries, term and vote) into g,
// synced, then removes path. A damaged Store is refused with its file
// and offset, and nothing is copied.
func convertStore(path, dir string, g *raftlog.GroupLog, noSync bool, log *slog.Logger) error {
	src, err := raftlog.Open(path, raftlog.Options{NoSync: noSync, SegmentSize: logSegmentSize})
	if err != nil {
		return fmt.Errorf("group %d: converting its log: %w", g.ID(), err)
	}
	first, last, err := copyLog(src, g)
	if cerr := src.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("group %d: converting its log %s: %w", g.ID(), path, err)
	}
	if err := os.RemoveAll(path); err != nil {
		return err
	}
	if err := syncDir(dir, noSync); err != nil {
		return err
	}
	log.Info("raft log converted into the process's shared log", "from", filepath.Join(dir, logDirName),
		"group", g.ID(), "first_index", first, "last_index", last)
	return nil
}

// logSource is a log store being copied: a raftlog.Store or raft-boltdb.
type logSource interface {
	raft.LogStore
	Get(key []byte) ([]byte, error)
}

// logDest is where a log is copied to: a raftlog.Store or GroupLog.
type logDest interface {
	StoreLogs(logs []*raft.Log) error
	Set(key, val []byte) error
}

// copyLog copies src's entries from..last and stable keys into dst, and
// returns the range copied (0, 0 for an empty log).
func copyLog(src logSource, dst logDest) (first, last uint64, err error) {
	first, err = src.FirstIndex()
	if err != nil {
		return 0, 0, err
	}
	last, err = src.LastIndex()
	if err != nil {
		return 0, 0, err
	}
	if last > 0 {
		if err := copyEntries(src, dst, first, last); err != nil {
			return 0, 0, err
		}
	}
	if err := copyKeys(src, dst); err != nil {
		return 0, 0, err
	}
	return first, last, nil
}

func copyKeys(src logSource, dst logDest) error {
	for _, k := range stableKeys {
		v, err := src.Get([]byte(k))
		if errors.Is(err, raftboltdb.ErrKeyNotFound) || errors.Is(err, raftlog.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if err := dst.Set([]byte(k), v); err != nil {
			return err
		}
	}
	return nil
}

func copyEntries(src logSource, dst logDest, first, last uint64) error {
	batch := make([]*raft.Log, 0, migrateBatch)
	for i := first; i <= last; i++ {
		e := new(raft.Log)
		if err := src.GetLog(i, e); err != nil {
			return fmt.Errorf("index %d: %w", i, err)
		}
		batch = append(batch, e)
		if len(batch) == migrateBatch || i == last {
			if err := dst.StoreLogs(batch); err != nil {
				return err
			}
			batch = batch[:0]
		}
	}
	return nil
}

// hasLogState reports whether s holds a log entry or a term.
func hasLogState(s interface {
	LastIndex() (uint64, error)
	Get(key []byte) ([]byte, error)
}) (bool, error) {
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

// openBoltStore opens dir's per-group Store, migrating dir's raft.db into
// it first when the Store holds no state.
func openBoltStore(dir string, opts raftlog.Options, log *slog.Logger) (*raftlog.Store, error) {
	path := filepath.Join(dir, logDirName)
	bolt := filepath.Join(dir, boltName)
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
	if err := copyKeys(src, dst); err != nil {
		return 0, 0, 0, err
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
	return from, first, last, copyEntries(src, dst, first, last)
}

// syncDir makes renames in dir durable.
func syncDir(dir string, noSync bool) error {
	if noSync {
		return nil
	}
	return raftlog.SyncDir(dir)
}
