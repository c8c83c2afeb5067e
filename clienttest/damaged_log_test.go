package clienttest

import (
	"context"
	le "encoding/binary"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
)

// TestClusterDamagedLogRebuilt: a bit flipped in a follower's Raft log,
// with valid records after it, is damage: the node refuses to start with
// one line naming the file, the offset and the group (it used to cut the
// log there, dropping the acknowledged entries after it); the way out
// docs/cluster.md gives (remove it, empty its folder, join again) rebuilds
// the replica from the others.
func TestClusterDamagedLogRebuilt(t *testing.T) {
	c := startCluster(t, binary())
	leader := c.waitLeader(20 * time.Second)
	cl := clusterClient(t, leader.respAddr)
	ctx := context.Background()
	for i := range 300 {
		if _, _, err := allowOnce(ctx, cl, fmt.Sprintf("dmg-%d", i%30), 1000, 1); err != nil {
			t.Fatalf("RL.ALLOW: %v", err)
		}
	}
	c.converge(20 * time.Second)
	var f *cnode
	for _, n := range c.nodes {
		if n != leader {
			f = n
			break
		}
	}
	c.stop(f)

	seg := flipFirstRecord(t, f.dir)

	cmd := exec.Command(c.bin, "--node-id", f.id, "--addr", f.respAddr, "--raft-addr", f.raftAddr,
		"--dir", f.dir, "--log-level", "warn", "--peers", c.peers)
	refused(t, cmd, seg, "offset 0:", "not a torn write", "group 0")

	// The way out: remove it, empty its folder, join again.
	removeAndSetAside(t, leader, f, 5*time.Second)
	f.joinVia = leader.respAddr
	c.launch(f)
	c.waitLeader(20 * time.Second)
	c.converge(30 * time.Second)
}

// removeAndSetAside is the operator's way out for node f's damaged log
// (docs/cluster-mode.md): RL.CLUSTER REMOVE it through leader (within
// timeout), move its folder aside (removed at the test's end) and leave
// an empty one in its place for the node to join again with.
func removeAndSetAside(t *testing.T, leader, f *cnode, timeout time.Duration) {
	t.Helper()
	if v, err := rawDo(leader.respAddr, timeout, "RL.CLUSTER", "REMOVE", f.id); err != nil || v.kind != '+' {
		t.Fatalf("RL.CLUSTER REMOVE %s: %v %v", f.id, v, err)
	}
	aside := f.dir + ".damaged"
	if err := os.Rename(f.dir, aside); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(aside) })
	if err := os.MkdirAll(f.dir, 0o755); err != nil {
		t.Fatal(err)
	}
}

// flipFirstRecord flips a bit in the body of the first record of the last
// segment of the shared Raft log in the data folder dir, which must have
// a record after it, and returns the segment's path.
func flipFirstRecord(t *testing.T, dir string) string {
	t.Helper()
	segs, err := filepath.Glob(filepath.Join(dir, "raft", "wal", "wal-*.seg"))
	if err != nil || len(segs) == 0 {
		t.Fatalf("no log segments in %s: %v", dir, err)
	}
	sort.Strings(segs)
	seg := segs[len(segs)-1]
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	first := int(le.LittleEndian.Uint32(data))
	if first == 0 || 8+first+8 >= len(data) || le.LittleEndian.Uint32(data[8+first:]) == 0 {
		t.Fatalf("%s holds fewer than two records", seg)
	}
	data[8+20] ^= 0x40 // inside the first record's body
	if err := os.WriteFile(seg, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return seg
}

// refused runs cmd, a node that must refuse to start, and checks that it
// exits within 30 s with one line that names each of want.
func refused(t *testing.T, cmd *exec.Cmd, want ...string) {
	t.Helper()
	cmd.Env = cleanEnv()
	done := make(chan struct{})
	var out []byte
	var runErr error
	go func() {
		out, runErr = cmd.CombinedOutput()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("the node with a damaged log is still running 30 s later")
	}
	if runErr == nil {
		t.Fatalf("the node with a damaged log started:\n%s", out)
	}
	var line string
	for _, l := range strings.Split(string(out), "\n") {
		if strings.Contains(l, "corrupt") {
			line = l
		}
	}
	for _, w := range want {
		if !strings.Contains(line, w) {
			t.Errorf("the refusal does not name %q:\n%s", w, out)
		}
	}
	t.Logf("refused: %s", strings.TrimSpace(string(out)))
}
