package cluster

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/rlserver/rlserver/internal/testfs"
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

func tmpFolders(t *testing.T, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "*.tmp"))
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestRaftSnapshotFailureCounted pins issue 23's bug 5: when the snapshot
// store cannot create its files (a full disk), Raft logged "failed to take
// snapshot" but the failure counter stayed at 0 (the FSM snapshot's
// Persist never ran), and the snapshot's ".tmp" folder stayed behind. Now
// each failed snapshot is counted, no ".tmp" folder remains, a snapshot
// succeeds once space is freed, and a ".tmp" folder left by a crash is
// removed when the node opens.
func TestRaftSnapshotFailureCounted(t *testing.T) {
	c := newCluster(t, 1, func(cfg *Config) {
		cfg.SnapshotThreshold = 1 << 20 // only the snapshots asked for below
		cfg.SnapshotInterval = time.Hour
	})
	l := c.leader()
	snapDir := filepath.Join(l.dir, "snapshots")
	testfs.MountTmpfs(t, snapDir, "1m")
	filler := testfs.FillUp(t, snapDir)
	for i := range 20 {
		drain(t, l, fmt.Sprintf("k%d", i), 3)
	}
	for i := range 2 {
		if err := l.n.raft.Snapshot().Error(); err == nil {
			t.Fatal("a snapshot into a full file system succeeded")
		}
		if st := l.n.RaftSnapshotStatus(); st.Failures != int64(i+1) || st.Taken != 0 {
			t.Fatalf("after %d failed snapshots: %+v", i+1, st)
		}
		if m := tmpFolders(t, snapDir); len(m) != 0 {
			t.Fatalf("unfinished snapshot folders left: %v", m)
		}
		drain(t, l, fmt.Sprintf("more%d", i), 1) // something new to snapshot
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if err := l.n.raft.Snapshot().Error(); err != nil {
		t.Fatalf("snapshot after freeing space: %v", err)
	}
	if st := l.n.RaftSnapshotStatus(); st.Failures != 2 || st.Taken != 1 {
		t.Fatalf("after freeing space: %+v", st)
	}

	// A crash in the middle of a snapshot leaves a ".tmp" folder: the
	// next open removes it and keeps the finished snapshot.
	l.stop()
	leftover := filepath.Join(snapDir, "2-99999-1700000000000.tmp")
	if err := os.MkdirAll(leftover, 0o755); err != nil {
		t.Fatal(err)
	}
	c.start(l, false)
	c.leader()
	if m := tmpFolders(t, snapDir); len(m) != 0 {
		t.Fatalf("unfinished snapshot folders left after a restart: %v", m)
	}
	if st := l.n.RaftSnapshotStatus(); st.Restored != 1 {
		t.Fatalf("the finished snapshot was not restored: %+v", st)
	}
}
