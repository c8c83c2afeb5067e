package cluster

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/status"
)

// Raft snapshot statistics (RL metrics and INFO persistence). Raft calls
// the FSM's Snapshot, then Persist on what it returned, then Release, and
// Restore; the wrappers here time those calls and count the bytes written,
// so the FSM itself keeps no statistics. Every snapshot Raft takes
// (threshold, user-requested, any other path through Raft's takeSnapshot)
// starts with the FSM's Snapshot and ends with Release, so each is counted
// once: taken when Persist succeeds, failed when the capture or Persist
// fails or Release comes without a Persist (the snapshot store could not
// create its files, or Raft gave up before writing).

// snapStats are the counters; the wrappers write them, status readers
// copy them.
type snapStats struct {
	mu  sync.Mutex
	st  status.RaftSnapshots
	now func() time.Time
}

func newSnapStats() *snapStats {
	s := &snapStats{now: time.Now}
	s.st.LastSnapshot = s.now()
	s.st.LastDuration, s.st.LastRestoreDuration = -1, -1
	return s
}

func (s *snapStats) status() status.RaftSnapshots {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st
}

// statsFSM is the FSM Raft sees: fsm with its snapshots measured.
type statsFSM struct {
	*fsm
	stats *snapStats
}

// Snapshot starts the clock: a snapshot's duration runs from the capture
// between two entries to the end of its Persist.
func (f statsFSM) Snapshot() (raft.FSMSnapshot, error) {
	start := f.stats.now()
	snap, err := f.fsm.Snapshot()
	if err != nil {
		f.stats.mu.Lock()
		f.stats.st.Failures++
		f.stats.mu.Unlock()
		return nil, err
	}
	return &statsSnapshot{FSMSnapshot: snap, start: start, stats: f.stats}, nil
}

// Restore counts restores (at start-up from the latest snapshot, and when
// the leader sends one to a follower that is too far behind).
func (f statsFSM) Restore(rc io.ReadCloser) error {
	start := f.stats.now()
	err := f.fsm.Restore(rc)
	if err == nil {
		f.stats.mu.Lock()
		f.stats.st.Restored++
		f.stats.st.LastRestoreDuration = f.stats.now().Sub(start)
		f.stats.mu.Unlock()
	}
	return err
}

type statsSnapshot struct {
	raft.FSMSnapshot
	start     time.Time
	stats     *snapStats
	persisted bool // Persist ran and counted the outcome; Raft calls Persist and Release on one goroutine
}

func (s *statsSnapshot) Persist(sink raft.SnapshotSink) error {
	s.persisted = true
	cs := &countingSink{SnapshotSink: sink}
	err := s.FSMSnapshot.Persist(cs)
	end := s.stats.now()
	s.stats.mu.Lock()
	defer s.stats.mu.Unlock()
	if err != nil {
		s.stats.st.Failures++
		return err
	}
	s.stats.st.Taken++
	s.stats.st.LastSnapshot = end
	s.stats.st.LastDuration = end.Sub(s.start)
	s.stats.st.LastBytes = cs.n
	return nil
}

// Release counts a snapshot that Raft dropped before Persist as failed.
func (s *statsSnapshot) Release() {
	if !s.persisted {
		s.persisted = true
		s.stats.mu.Lock()
		s.stats.st.Failures++
		s.stats.mu.Unlock()
	}
	s.FSMSnapshot.Release()
}

// countingSink counts the bytes of a snapshot as they are written.
type countingSink struct {
	raft.SnapshotSink
	n int64
}

func (c *countingSink) Write(p []byte) (int, error) {
	n, err := c.SnapshotSink.Write(p)
	c.n += int64(n)
	return n, err
}
