package cluster

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/hashicorp/raft"
)

// Raft's file snapshot store writes a snapshot into "<name>.tmp" and
// renames it when done. A snapshot that fails (a full disk while creating
// its files, a write or close error) or is interrupted (a crash) leaves the
// ".tmp" folder behind: nothing removes it, and Raft warns about it on every
// later snapshot. tidyStore removes those folders: when the node opens,
// after a failed Create, and when a sink is cancelled or fails to close.
// It never removes the folder of a sink still open (Raft writes a snapshot
// it takes and one a leader installs at the same time, on two goroutines).

const tmpSuffix = ".tmp" // raft's file_snapshot.go

// tidyStore is the snapshot store Raft sees: the file store, with the
// ".tmp" folders of failed snapshots removed.
type tidyStore struct {
	raft.SnapshotStore
	dir string // the store's folder: Config.Dir/snapshots
	log *slog.Logger

	mu   sync.Mutex
	open map[string]bool // IDs of sinks created and not yet closed or cancelled
}

func newTidyStore(s raft.SnapshotStore, dir string, log *slog.Logger) *tidyStore {
	t := &tidyStore{SnapshotStore: s, dir: dir, log: log, open: map[string]bool{}}
	t.mu.Lock()
	t.sweep()
	t.mu.Unlock()
	return t
}

// Create holds t.mu while the file store makes the folder, so a sweep
// never sees a folder whose sink is not yet registered.
func (t *tidyStore) Create(version raft.SnapshotVersion, index, term uint64, configuration raft.Configuration,
	configurationIndex uint64, trans raft.Transport) (raft.SnapshotSink, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	sink, err := t.SnapshotStore.Create(version, index, term, configuration, configurationIndex, trans)
	if err != nil {
		t.sweep()
		return nil, err
	}
	t.open[sink.ID()] = true
	return &tidySink{SnapshotSink: sink, store: t}, nil
}

// sweep removes every ".tmp" folder that belongs to no open sink. The
// caller holds t.mu.
func (t *tidyStore) sweep() {
	ents, err := os.ReadDir(t.dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), tmpSuffix)
		if !ok || !e.IsDir() || t.open[name] {
			continue
		}
		t.remove(e.Name())
	}
}

// remove deletes one ".tmp" folder. The caller holds t.mu.
func (t *tidyStore) remove(folder string) {
	p := filepath.Join(t.dir, folder)
	if _, err := os.Lstat(p); err != nil {
		return
	}
	if err := os.RemoveAll(p); err != nil {
		t.log.Warn("cannot remove an unfinished raft snapshot", "path", p, "err", err)
		return
	}
	t.log.Info("removed an unfinished raft snapshot", "path", p)
}

// done unregisters a sink; failed says its folder may have stayed behind
// (a failed Close, or any Cancel: the file store's Cancel keeps the folder
// when flushing its buffer fails, as it does on a full disk).
func (t *tidyStore) done(id string, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if !t.open[id] {
		return
	}
	delete(t.open, id)
	if failed {
		t.remove(id + tmpSuffix)
	}
}

type tidySink struct {
	raft.SnapshotSink
	store *tidyStore
}

// Close finishes the snapshot (the file store renames the folder). Raft
// calls Close or Cancel again after the FSM's Persist did: the file store
// ignores the second call, and so does done.
func (s *tidySink) Close() error {
	err := s.SnapshotSink.Close()
	s.store.done(s.ID(), err != nil)
	return err
}

func (s *tidySink) Cancel() error {
	err := s.SnapshotSink.Cancel()
	s.store.done(s.ID(), true)
	return err
}
