package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// TestRaftSnapshotStatus: a snapshot shows up in the node's snapshot
// status with its size (the bytes of the file Raft keeps) and duration; a
// restart restores it and counts the restore.
func TestRaftSnapshotStatus(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.SnapshotThreshold = 1 << 20 // only the snapshots asked for below
		cfg.SnapshotInterval = time.Hour
	})
	l := c.leader()
	st := l.n.RaftSnapshotStatus()
	if st.Taken != 0 || st.Restored != 0 || st.LastDuration != -1 || st.LastRestoreDuration != -1 || st.LastBytes != 0 {
		t.Fatalf("before any snapshot: %+v", st)
	}
	started := st.LastSnapshot
	for i := range 50 {
		drain(t, l, fmt.Sprintf("k%d", i), 3)
	}
	if err := l.n.raft.Snapshot().Error(); err != nil {
		t.Fatal(err)
	}
	st = l.n.RaftSnapshotStatus()
	if st.Taken != 1 || st.Failures != 0 || st.LastDuration <= 0 || !st.LastSnapshot.After(started) || st.LastIndex == 0 {
		t.Fatalf("after a snapshot: %+v", st)
	}
	// The size is the snapshot's data as Raft's file store keeps it.
	files, _ := filepath.Glob(filepath.Join(l.dir, "snapshots", "*", "state.bin"))
	if len(files) != 1 {
		t.Fatalf("snapshot files: %v", files)
	}
	fi, err := os.Stat(files[0])
	if err != nil || fi.Size() != st.LastBytes {
		t.Fatalf("snapshot file %d bytes (%v), status says %d", fi.Size(), err, st.LastBytes)
	}
	t.Logf("snapshot of 50 keys: %d bytes in %v at index %d", st.LastBytes, st.LastDuration, st.LastIndex)

	// A restart restores it.
	l.stop()
	c.start(l, false)
	c.leader()
	st = l.n.RaftSnapshotStatus()
	if st.Restored != 1 || st.LastRestoreDuration < 0 || st.Taken != 0 || st.LastIndex == 0 {
		t.Fatalf("after a restart: %+v", st)
	}
	if !denied(t, l, "k49", 3) {
		t.Fatal("restored state lost k49")
	}
}
