package clienttest

import (
	"archive/tar"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A process writes the Raft log of every group it hosts, meta included,
// through one shared log (raft/wal): one write and one fdatasync for the
// groups waiting at that moment (cluster/logstore.go, raftlog's Shared).

// TestShardedLogWriteCrashes is TestClusterLogWriteCrashes with three
// data groups per process (--groups 3; each process leads about one
// group and follows the others, and each of its log writes holds several
// groups' records): one node after another is armed to end itself at its
// 100th log sync from its start, with the batch half on disk (torn), lost
// whole before its sync (unsynced), lost 50 ms into the sync (late), and
// synced but not yet acknowledged (synced), as six clients send INCRBY
// and MULTI/INCRBY/EXPIRE/EXEC through every node. Per counter the
// history is linearizable (porcupine, each key on its own), the replicas
// of every group converge, and each counter holds every acknowledged
// increment. (Arming every node at once crashed all three together each
// round; the unknown outcomes that left were too many for porcupine.)
func TestShardedLogWriteCrashes(t *testing.T) {
	const keys = 64
	c := startSharded(t, 3, "--cluster-redirect", "forward")
	ld := startIncrLoad(t, c, 6, keys, "swalctr")
	for i, step := range []string{"torn", "unsynced", "late", "synced"} {
		n := c.nodes[i%len(c.nodes)]
		c.kill9(n)
		// The 100th: a process's first syncs (four groups' terms and
		// votes, catching up) come before it answers PING.
		n.env = []string{fmt.Sprintf("RLSERVER_TEST_CRASH_LOG=%s:100", step)}
		c.launch(n)
		n.env = nil
		crashed := c.relaunchCrashed(t, 15*time.Second, step+" on "+n.id)
		t.Logf("%s: %v crashed and restarted", step, crashed)
		c.waitGroups(3, 30*time.Second)
	}
	endIncrLoad(t, c, ld, "swalctr", keys)
	for _, n := range c.nodes {
		if v := nodeInfoInt(n, "raft_log_fsyncs"); v <= 0 {
			t.Errorf("%s: raft_log_fsyncs %d", n.id, v)
		}
	}
}

// TestShardedDamagedLogRebuilt: a bit flipped in a sharded process's
// shared Raft log, with valid records after it, is damage: the process
// refuses to start with one line naming the file, the offset and the
// group. The log holds every group's records, so the way out replaces
// the whole node (docs/cluster-mode.md, A damaged log): RL.CLUSTER REMOVE
// it from a live node, move its folder aside, start it with an empty
// folder, a new --node-id and --join. The placement then gives the new
// node a replica of every group, each rebuilt from the others, and
// nothing acknowledged is lost. (A sharded node rejoining under its old
// id replays its own removal from the groups' logs and refuses
// commands: removed.go.)
func TestShardedDamagedLogRebuilt(t *testing.T) {
	c := startSharded(t, 3, "--cluster-redirect", "forward")
	c.waitPreferred(3, 30*time.Second)
	ctx := context.Background()
	cl := clusterClient(t, c.nodes[0].respAddr)
	// SET, not INCRBY: a write whose outcome is unknown (an election
	// under a loaded machine) is sent again and means the same.
	want := map[string]int64{}
	for i := range 60 {
		k := fmt.Sprintf("dmg:%d", i%20)
		var err error
		for try := 0; try < 5; try++ {
			if err = cl.Set(ctx, k, i+1, 0).Err(); err == nil {
				break
			}
			t.Logf("SET %s: %v; again", k, err)
			time.Sleep(200 * time.Millisecond)
		}
		if err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		want[k] = int64(i + 1)
	}
	c.converge(30 * time.Second)
	f := c.nodes[2]
	c.stop(f)
	seg := flipFirstRecord(t, f.dir)
	args := append([]string{"--node-id", f.id, "--addr", f.respAddr, "--raft-addr", f.raftAddr,
		"--dir", f.dir, "--log-level", "warn", "--peers", c.peers}, clusterArgs...)
	refused(t, exec.Command(c.bin, append(args, c.extra...)...), seg, "offset 0:", "not a torn write", "group ")

	leader := c.waitLeader(20 * time.Second)
	removeAndSetAside(t, leader, f, 10*time.Second)
	f.id, f.joinVia = "n4", leader.respAddr
	c.launch(f)
	pollUntil(t, 60*time.Second, f.id+" to hold a replica of every group", func() bool {
		gs := groupsOf(f)
		if len(gs) != 3 {
			return false
		}
		for _, g := range gs {
			if g.role != "leader" && g.role != "follower" {
				return false
			}
		}
		return true
	})
	c.converge(60 * time.Second)
	fc := clusterClient(t, f.respAddr)
	for k, v := range want {
		// A read is sent again on an error (an election on a loaded
		// machine answers UNKNOWN or TRYAGAIN); a wrong value is not.
		got, err := fc.Get(ctx, k).Int64()
		for try := 0; err != nil && try < 10; try++ {
			time.Sleep(300 * time.Millisecond)
			got, err = fc.Get(ctx, k).Int64()
		}
		if err != nil || got != v {
			t.Errorf("%s through the rebuilt node: %d, %v; want %d", k, got, err, v)
		}
	}
}

// TestUpgradeFromPerGroupLogs: data folders written by the version before
// the shared log (testdata/pergroup-logs.tar.gz: a one-group node and a
// sharded node with three data groups, each group's log a raftlog.Store
// in its own raft-log folder, made by that version's rlserver with 30
// counters incremented twice, old:i = 2(i+1)) start, convert each group's
// log into the shared log once, remove the old folders, and serve every
// value, after a restart too.
func TestUpgradeFromPerGroupLogs(t *testing.T) {
	for _, tc := range []struct {
		name   string
		args   []string
		groups []string // the groups' folders under raft/
	}{
		{"pergroup-single", nil, []string{"."}},
		{"pergroup-sharded", []string{"--groups", "3", "--cluster-redirect", "forward"}, []string{"meta", "g1", "g2", "g3"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			untarGz(t, filepath.Join("testdata", "pergroup-logs.tar.gz"), root)
			dir := filepath.Join(root, tc.name)
			args := append([]string{"--node-id", "n1", "--bootstrap", "--raft-addr",
				net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), "--log-level", "info"}, tc.args...)
			check := func(s *pserver) {
				t.Helper()
				cl := goRedis(t, s)
				ctx := context.Background()
				for i := range 30 {
					k := "old:" + strconv.Itoa(i)
					var got int64
					var err error
					pollUntil(t, 20*time.Second, "GET "+k, func() bool {
						got, err = cl.Get(ctx, k).Int64()
						return err == nil
					})
					if got != int64(2*(i+1)) {
						t.Fatalf("%s = %d, want %d", k, got, 2*(i+1))
					}
				}
			}
			s := startIn(t, dir, opts{args: args})
			check(s)
			s.stopClean(t)
			if n := strings.Count(s.stderr.String(), "raft log converted"); n != len(tc.groups) {
				t.Fatalf("%d conversions logged, want %d:\n%s", n, len(tc.groups), s.stderr)
			}
			for _, g := range tc.groups {
				if _, err := os.Stat(filepath.Join(dir, "raft", g, "raft-log")); !os.IsNotExist(err) {
					t.Fatalf("%s/raft-log is still there: %v", g, err)
				}
			}
			if segs, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "wal-*.seg")); len(segs) == 0 {
				t.Fatal("no shared log")
			}
			s = startIn(t, dir, opts{args: args})
			check(s)
			s.stopClean(t)
			if strings.Contains(s.stderr.String(), "raft log converted") {
				t.Fatalf("converted again:\n%s", s.stderr)
			}
		})
	}
}

// untarGz extracts the gzipped tar file at path into dir.
func untarGz(t *testing.T, path, dir string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	tr := tar.NewReader(z)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Clean("/"+h.Name))
		switch h.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(p, 0o755)
		case tar.TypeReg:
			var b []byte
			if b, err = io.ReadAll(tr); err == nil {
				err = os.WriteFile(p, b, 0o644)
			}
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
