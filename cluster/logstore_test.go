package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
	"github.com/rlserver/rlserver/raftlog"
)

// lockedBuffer collects log lines from several goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func testLog(i uint64) *raft.Log {
	return &raft.Log{
		Index: i, Term: 1 + i/100, Type: raft.LogCommand,
		Data:       []byte(fmt.Sprintf("entry %d %s", i, strings.Repeat("x", int(i%300)))),
		AppendedAt: time.Unix(1700000000, int64(i)),
	}
}

// boltStore writes a raft-boltdb store at path holding the indexes in
// ranges and the stable key/values in kv.
func boltStore(t *testing.T, path string, ranges [][2]uint64, kv map[string][]byte) {
	t.Helper()
	b, err := raftboltdb.New(raftboltdb.Options{Path: path, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, r := range ranges {
		var logs []*raft.Log
		for i := r[0]; i <= r[1]; i++ {
			logs = append(logs, testLog(i))
		}
		if err := b.StoreLogs(logs); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range kv {
		if err := b.Set([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
}

// logView is what the tests read of a converted log.
type logView interface {
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	GetLog(index uint64, out *raft.Log) error
	Get(key []byte) ([]byte, error)
}

// checkLog fails t unless s holds testLog(first..last) and the keys kv.
func checkLog(t *testing.T, s logView, first, last uint64, kv map[string][]byte) {
	t.Helper()
	f, _ := s.FirstIndex()
	l, _ := s.LastIndex()
	if f != first || l != last {
		t.Fatalf("log %d-%d, want %d-%d", f, l, first, last)
	}
	for i := first; i <= last && i > 0; i++ {
		var got raft.Log
		if err := s.GetLog(i, &got); err != nil {
			t.Fatal(err)
		}
		want := testLog(i)
		if got.Index != i || got.Term != want.Term || got.Type != want.Type ||
			!bytes.Equal(got.Data, want.Data) || !got.AppendedAt.Equal(want.AppendedAt) {
			t.Fatalf("index %d: got %+v, want %+v", i, got, want)
		}
	}
	for _, k := range stableKeys {
		v, err := s.Get([]byte(k))
		want, ok := kv[k]
		switch {
		case !ok && (err == nil || err.Error() != "not found"):
			t.Fatalf("%s: %q, %v; want not found", k, v, err)
		case ok && (err != nil || !bytes.Equal(v, want)):
			t.Fatalf("%s: %q, %v; want %q", k, v, err, want)
		}
	}
}

// openTestGroupLog opens the shared log in parent and group's log in dir.
func openTestGroupLog(t *testing.T, parent, dir string, group uint32, log *slog.Logger) (*raftlog.Shared, *raftlog.GroupLog) {
	t.Helper()
	wal, err := OpenLog(parent, true, raftlog.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	g, err := openGroupLog(wal, group, dir, true, log)
	if err != nil {
		wal.Close()
		t.Fatal(err)
	}
	return wal, g
}

func gone(t *testing.T, paths ...string) {
	t.Helper()
	for _, p := range paths {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%s is still there: %v", p, err)
		}
	}
}

// TestMigrateBolt: a raft-boltdb store is copied into a Store, and that
// into the group's log in the shared log, once.
func TestMigrateBolt(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ranges      [][2]uint64
		kv          map[string][]byte
		first, last uint64
	}{
		{"log term and vote", [][2]uint64{{1, 1300}}, map[string][]byte{
			"CurrentTerm":  {0, 0, 0, 0, 0, 0, 0, 5},
			"LastVoteTerm": {0, 0, 0, 0, 0, 0, 0, 5},
			"LastVoteCand": []byte("127.0.0.1:7000"),
		}, 1, 1300},
		// A follower that installed a snapshot at 200 (raft-boltdb is not
		// monotonic, so raft kept 1-50 and appended after a gap).
		{"a gap", [][2]uint64{{1, 50}, {201, 900}}, map[string][]byte{
			"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 9},
		}, 201, 900},
		{"compacted", [][2]uint64{{3000, 3001}}, map[string][]byte{
			"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 2},
		}, 3000, 3001},
		{"term only", nil, map[string][]byte{
			"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 1},
		}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			parent := t.TempDir()
			dir := filepath.Join(parent, "g4")
			os.MkdirAll(dir, 0o755)
			bolt := filepath.Join(dir, "raft.db")
			boltStore(t, bolt, tc.ranges, tc.kv)
			var logBuf lockedBuffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			wal, g := openTestGroupLog(t, parent, dir, 4, log)
			checkLog(t, g, tc.first, tc.last, tc.kv)
			gone(t, bolt, filepath.Join(dir, "raft-log.migrating"), filepath.Join(dir, logDirName), filepath.Join(dir, convertName))
			if _, err := os.Stat(bolt + ".migrated"); err != nil {
				t.Fatal(err)
			}
			wal.Close()
			wal, g = openTestGroupLog(t, parent, dir, 4, log)
			checkLog(t, g, tc.first, tc.last, tc.kv)
			wal.Close()
			for _, line := range []string{"raft log migrated", "raft log converted"} {
				if n := strings.Count(logBuf.String(), line); n != 1 {
					t.Fatalf("%d %q lines, want 1:\n%s", n, line, logBuf.String())
				}
			}
			t.Log(strings.TrimSpace(logBuf.String()))
		})
	}
}

// TestMigrateBoltKeepsState: a raft.db beside a raft-log folder that
// holds state is left alone, with a warning, and raft-log is converted;
// beside an empty one (a crash in the middle of a migration) it is
// migrated; an old log beside a group that holds state in the shared log
// is left alone, with a warning.
func TestMigrateBoltKeepsState(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "meta")
	s, err := raftlog.Open(filepath.Join(dir, "raft-log"), raftlog.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.StoreLogs([]*raft.Log{testLog(7)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	bolt := filepath.Join(dir, "raft.db")
	boltStore(t, bolt, [][2]uint64{{1, 10}}, map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 3}})
	var logBuf lockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	wal, g := openTestGroupLog(t, parent, dir, 0, log)
	checkLog(t, g, 7, 7, nil)
	wal.Close()
	if _, err := os.Stat(bolt); err != nil {
		t.Fatalf("raft.db: %v", err)
	}
	if !strings.Contains(logBuf.String(), "raft.db ignored") {
		t.Fatalf("no warning: %s", logBuf.String())
	}
	// The group holds state now: raft.db is ignored, with a warning.
	wal, g = openTestGroupLog(t, parent, dir, 0, log)
	checkLog(t, g, 7, 7, nil)
	wal.Close()
	if !strings.Contains(logBuf.String(), "old raft log ignored") {
		t.Fatalf("no warning: %s", logBuf.String())
	}

	// A fresh shared log; an empty raft-log folder, and a half-done
	// temporary one.
	os.RemoveAll(filepath.Join(parent, WALDirName))
	os.MkdirAll(filepath.Join(dir, "raft-log"), 0o755)
	os.MkdirAll(filepath.Join(dir, "raft-log.migrating"), 0o755)
	os.WriteFile(filepath.Join(dir, "raft-log.migrating", "log-00000000000000000001.seg"), []byte("junk"), 0o644)
	wal, g = openTestGroupLog(t, parent, dir, 0, log)
	defer wal.Close()
	checkLog(t, g, 1, 10, map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 3}})
}

// writeStore writes a per-group Store (the format before the shared log)
// at path holding testLog(first..last) and kv.
func writeStore(t *testing.T, path string, first, last uint64, kv map[string][]byte) {
	t.Helper()
	s, err := raftlog.Open(path, raftlog.Options{NoSync: true, SegmentSize: 64 << 10})
	if err != nil {
		t.Fatal(err)
	}
	for i := first; i <= last && i > 0; i++ {
		if err := s.StoreLogs([]*raft.Log{testLog(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for k, v := range kv {
		if err := s.Set([]byte(k), v); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestConvertStores: three groups' Stores (several segments each) and the
// meta group's are converted into one shared log, their folders removed;
// a conversion a crash interrupted (raft-log.converting, and part of the
// copy in the shared log) is done again from the start.
func TestConvertStores(t *testing.T) {
	parent := t.TempDir()
	kv := func(term byte) map[string][]byte {
		return map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, term}, "LastVoteCand": []byte("n" + string('0'+term))}
	}
	ranges := map[uint32][2]uint64{0: {1, 40}, 1: {1, 700}, 2: {300, 900}, 3: {0, 0}}
	dirOf := func(g uint32) string { return filepath.Join(parent, fmt.Sprintf("g%d", g)) }
	for g, r := range ranges {
		writeStore(t, filepath.Join(dirOf(g), logDirName), r[0], r[1], kv(byte(g+1)))
	}
	// Group 2 crashed part-way: its folder renamed, 20 entries copied.
	if err := os.Rename(filepath.Join(dirOf(2), logDirName), filepath.Join(dirOf(2), convertName)); err != nil {
		t.Fatal(err)
	}
	wal, err := OpenLog(parent, true, raftlog.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	g2, _ := wal.Group(2)
	for i := uint64(300); i < 320; i++ {
		if err := g2.StoreLogs([]*raft.Log{testLog(i)}); err != nil {
			t.Fatal(err)
		}
	}
	wal.Close()

	var logBuf lockedBuffer
	log := slog.New(slog.NewTextHandler(&logBuf, nil))
	for round := range 2 {
		wal, err := OpenLog(parent, true, raftlog.Hooks{})
		if err != nil {
			t.Fatal(err)
		}
		for g, r := range ranges {
			gl, err := openGroupLog(wal, g, dirOf(g), true, log)
			if err != nil {
				t.Fatal(err)
			}
			first, last := r[0], r[1]
			if last == 0 {
				first = 0
			}
			checkLog(t, gl, first, last, kv(byte(g+1)))
			gone(t, filepath.Join(dirOf(g), logDirName), filepath.Join(dirOf(g), convertName))
		}
		if got := wal.Groups(); len(got) != 4 {
			t.Fatalf("round %d: groups %v", round, got)
		}
		wal.Close()
	}
	if n := strings.Count(logBuf.String(), "raft log converted"); n != 4 {
		t.Fatalf("%d conversions logged, want 4:\n%s", n, logBuf.String())
	}
}

// TestConvertDamagedStore: a Store with a flipped bit and valid records
// after it is refused, naming the file, the offset and the group, and
// left as it was; nothing of it reaches the shared log.
func TestConvertDamagedStore(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "g7")
	path := filepath.Join(dir, logDirName)
	writeStore(t, path, 1, 50, map[string][]byte{"CurrentTerm": {0, 0, 0, 0, 0, 0, 0, 2}})
	segs, _ := filepath.Glob(filepath.Join(path, "log-*.seg"))
	if len(segs) == 0 {
		t.Fatal("no segment")
	}
	seg := segs[len(segs)-1]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	data[8+20] ^= 0x40 // the first record's AppendedAt
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	wal, err := OpenLog(parent, true, raftlog.Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	defer wal.Close()
	_, err = openGroupLog(wal, 7, dir, true, slog.New(slog.DiscardHandler))
	if err == nil || !errors.Is(err, raftlog.ErrCorrupt) {
		t.Fatalf("opened: %v", err)
	}
	for _, want := range []string{"group 7", seg, "offset 0", "not a torn write"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q does not name %q", err, want)
		}
	}
	after, _ := os.ReadFile(seg)
	if !bytes.Equal(after, data) {
		t.Fatal("the damaged segment was changed")
	}
	if got := wal.Groups(); len(got) != 0 {
		t.Fatalf("groups in the shared log: %v", got)
	}
	t.Log(err)
}

// downgrade turns the Raft log of a stopped one-group node's folder into
// what an earlier version kept: raft-boltdb's raft.db (asStore false) or
// a per-group Store in raft-log (asStore true).
func downgrade(t *testing.T, dir string, asStore bool) {
	t.Helper()
	wal, err := raftlog.OpenShared(filepath.Join(dir, WALDirName), raftlog.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := wal.Group(0)
	var dst interface {
		raft.LogStore
		raft.StableStore
		Close() error
	}
	if asStore {
		dst, err = raftlog.Open(filepath.Join(dir, logDirName), raftlog.Options{NoSync: true})
	} else {
		dst, err = raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltName), NoSync: true})
	}
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := copyLog(s, dst); err != nil {
		t.Fatal(err)
	}
	wal.Close()
	if err := dst.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(dir, WALDirName)); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMigratesBolt: a three-node cluster whose nodes all kept
// raft-boltdb stores, or per-group Stores (an upgrade), starts from them:
// nothing decided is lost, and the terms carry over.
func TestClusterMigratesBolt(t *testing.T) {
	for _, asStore := range []bool{false, true} {
		t.Run(fmt.Sprintf("store=%v", asStore), func(t *testing.T) { clusterMigrates(t, asStore) })
	}
}

func clusterMigrates(t *testing.T, asStore bool) {
	c := newCluster(t, 3, nil)
	for i := range 20 {
		drain(t, c.leader(), fmt.Sprintf("k%d", i), 3)
	}
	c.converged()
	terms := map[string]uint64{}
	for _, tn := range c.nodes {
		tn.stop()
	}
	for _, tn := range c.nodes {
		wal, err := raftlog.OpenShared(filepath.Join(tn.dir, WALDirName), raftlog.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		g, _ := wal.Group(0)
		terms[tn.id], err = g.GetUint64([]byte("CurrentTerm"))
		wal.Close()
		if err != nil {
			t.Fatal(err)
		}
		downgrade(t, tn.dir, asStore)
	}
	for _, tn := range c.nodes {
		c.start(tn, false)
	}
	for _, tn := range c.nodes {
		if !tn.n.HasState() {
			t.Fatalf("%s started without state", tn.id)
		}
		if term, err := tn.n.store.GetUint64([]byte("CurrentTerm")); err != nil || term < terms[tn.id] {
			t.Fatalf("%s: term %d, %v; it was %d", tn.id, term, err, terms[tn.id])
		}
		if !asStore {
			if _, err := os.Stat(filepath.Join(tn.dir, boltName+".migrated")); err != nil {
				t.Fatal(err)
			}
		}
		gone(t, filepath.Join(tn.dir, logDirName))
	}
	c.leader()
	for i := range 20 {
		if !denied(t, c.nodes[i%3], fmt.Sprintf("k%d", i), 3) {
			t.Fatalf("k%d was drained before the upgrade, and is not now", i)
		}
	}
	c.converged()
}
