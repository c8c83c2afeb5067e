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
			dir := t.TempDir()
			bolt := filepath.Join(dir, "raft.db")
			boltStore(t, bolt, tc.ranges, tc.kv)
			var logBuf lockedBuffer
			log := slog.New(slog.NewTextHandler(&logBuf, nil))
			check := func(s *raftlog.Store) {
				t.Helper()
				first, _ := s.FirstIndex()
				last, _ := s.LastIndex()
				if first != tc.first || last != tc.last {
					t.Fatalf("log %d-%d, want %d-%d", first, last, tc.first, tc.last)
				}
				for i := tc.first; i <= tc.last && i > 0; i++ {
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
					want, ok := tc.kv[k]
					switch {
					case !ok && (err == nil || err.Error() != "not found"):
						t.Fatalf("%s: %q, %v; want not found", k, v, err)
					case ok && (err != nil || !bytes.Equal(v, want)):
						t.Fatalf("%s: %q, %v; want %q", k, v, err, want)
					}
				}
			}
			s, err := openLogStore(dir, false, raftlog.Hooks{}, log)
			if err != nil {
				t.Fatal(err)
			}
			check(s)
			if _, err := os.Stat(bolt); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("raft.db still there: %v", err)
			}
			if _, err := os.Stat(bolt + ".migrated"); err != nil {
				t.Fatal(err)
			}
			if _, err := os.Stat(filepath.Join(dir, "raft-log.migrating")); !errors.Is(err, fs.ErrNotExist) {
				t.Fatalf("the temporary folder is still there: %v", err)
			}
			s.Close()
			s, err = openLogStore(dir, false, raftlog.Hooks{}, log)
			if err != nil {
				t.Fatal(err)
			}
			check(s)
			s.Close()
			if n := strings.Count(logBuf.String(), "raft log migrated"); n != 1 {
				t.Fatalf("%d migration lines, want 1:\n%s", n, logBuf.String())
			}
			t.Log(strings.TrimSpace(logBuf.String()))
		})
	}
}

// TestMigrateBoltKeepsState: a raft.db beside a raft-log folder that
// holds state is left alone, with a warning; beside an empty one (a
// crash in the middle of a migration) it is migrated.
func TestMigrateBoltKeepsState(t *testing.T) {
	dir := t.TempDir()
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
	s, err = openLogStore(dir, true, raftlog.Hooks{}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	if first, _ := s.FirstIndex(); first != 7 {
		t.Fatalf("first index %d: raft-log was replaced", first)
	}
	s.Close()
	if _, err := os.Stat(bolt); err != nil {
		t.Fatalf("raft.db: %v", err)
	}
	if !strings.Contains(logBuf.String(), "raft.db ignored") {
		t.Fatalf("no warning: %s", logBuf.String())
	}

	// An empty raft-log folder, and a half-done temporary one.
	os.RemoveAll(filepath.Join(dir, "raft-log"))
	os.MkdirAll(filepath.Join(dir, "raft-log"), 0o755)
	os.MkdirAll(filepath.Join(dir, "raft-log.migrating"), 0o755)
	os.WriteFile(filepath.Join(dir, "raft-log.migrating", "log-00000000000000000001.seg"), []byte("junk"), 0o644)
	s, err = openLogStore(dir, true, raftlog.Hooks{}, slog.New(slog.NewTextHandler(&logBuf, nil)))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if last, _ := s.LastIndex(); last != 10 {
		t.Fatalf("last index %d after migrating, want 10", last)
	}
}

// downgrade turns the Raft store of a stopped node's folder into what
// the versions before raftlog kept: raft-boltdb's raft.db.
func downgrade(t *testing.T, dir string) {
	t.Helper()
	path := filepath.Join(dir, logDirName)
	s, err := raftlog.Open(path, raftlog.Options{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	b, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(dir, boltName), NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	first, _ := s.FirstIndex()
	last, _ := s.LastIndex()
	for i := first; i <= last && i > 0; i++ {
		var l raft.Log
		if err := s.GetLog(i, &l); err != nil {
			t.Fatal(err)
		}
		if err := b.StoreLog(&l); err != nil {
			t.Fatal(err)
		}
	}
	for _, k := range stableKeys {
		if v, err := s.Get([]byte(k)); err == nil {
			if err := b.Set([]byte(k), v); err != nil {
				t.Fatal(err)
			}
		}
	}
	s.Close()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// TestClusterMigratesBolt: a three-node cluster whose nodes all kept
// raft-boltdb stores (an upgrade) starts from them: nothing decided is
// lost, and the terms carry over.
func TestClusterMigratesBolt(t *testing.T) {
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
		s, err := raftlog.Open(filepath.Join(tn.dir, logDirName), raftlog.Options{NoSync: true})
		if err != nil {
			t.Fatal(err)
		}
		terms[tn.id], err = s.GetUint64([]byte("CurrentTerm"))
		s.Close()
		if err != nil {
			t.Fatal(err)
		}
		downgrade(t, tn.dir)
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
		if _, err := os.Stat(filepath.Join(tn.dir, boltName+".migrated")); err != nil {
			t.Fatal(err)
		}
	}
	c.leader()
	for i := range 20 {
		if !denied(t, c.nodes[i%3], fmt.Sprintf("k%d", i), 3) {
			t.Fatalf("k%d was drained before the upgrade, and is not now", i)
		}
	}
	c.converged()
}
