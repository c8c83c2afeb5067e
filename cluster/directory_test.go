package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/engine"
)

var testPeers = []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}

func mustMeta(t *testing.T, d *Directory, op []byte) (*Directory, uint64) {
	t.Helper()
	nd, v, err := applyMeta(d, op, 0)
	if err != nil {
		t.Fatalf("applyMeta(%x): %v", op, err)
	}
	return nd, v
}

func TestDirectoryChanges(t *testing.T) {
	d := emptyDirectory()
	init3 := appendPeers(binary.AppendUvarint([]byte{metaInit}, 3), testPeers)
	d, _ = mustMeta(t, d, init3)
	if d.Epoch != 1 || len(d.Groups) != 3 || d.Groups[2].ID != 3 || !reflect.DeepEqual(d.Groups[0].Peers, testPeers) {
		t.Fatalf("after init: epoch %d groups %+v", d.Epoch, d.Groups)
	}
	runs := SlotRuns(d.Slots)
	want := []SlotRun{{0, 5461, 1}, {5462, 10922, 2}, {10923, 16383, 3}}
	if !reflect.DeepEqual(runs, want) {
		t.Fatalf("slots %v, want %v (Redis's split of three masters)", runs, want)
	}
	// A second init does nothing: the first wins.
	d2, _ := mustMeta(t, d, appendPeers(binary.AppendUvarint([]byte{metaInit}, 5), testPeers))
	if d2 != d {
		t.Fatal("a second init changed the directory")
	}
	d, _ = mustMeta(t, d, appendString(appendString([]byte{metaRegister}, "n1"), "127.0.0.1:6379"))
	if d.Epoch != 2 || d.Nodes["n1"] != "127.0.0.1:6379" {
		t.Fatalf("after register: %+v", d)
	}
	same, _ := mustMeta(t, d, appendString(appendString([]byte{metaRegister}, "n1"), "127.0.0.1:6379"))
	if same != d {
		t.Fatal("registering the same address again changed the directory")
	}
	d, g := mustMeta(t, d, appendPeers([]byte{metaAddGroup}, testPeers[:1]))
	if g != 4 || d.Group(4) == nil || d.Epoch != 3 || len(SlotRuns(d.Slots)) != 3 {
		t.Fatalf("add group: id %d, directory %+v", g, d)
	}
	d, _ = mustMeta(t, d, appendString([]byte{metaForget}, "n1"))
	if _, ok := d.Nodes["n1"]; ok || d.Epoch != 4 {
		t.Fatalf("forget: %+v", d)
	}
	for _, bad := range [][]byte{nil, {99}, {metaInit}, binary.AppendUvarint([]byte{metaInit}, 0), {metaAddGroup}, {metaRegister, 5}} {
		if _, _, err := applyMeta(emptyDirectory(), bad, 0); err == nil {
			t.Errorf("op %x accepted", bad)
		}
	}
	// The encoding round-trips.
	enc := appendDirectory(nil, d)
	back, err := decodeDirectory(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(appendDirectory(nil, back), enc) || !reflect.DeepEqual(back.Slots, d.Slots) || !reflect.DeepEqual(back.Groups, d.Groups) {
		t.Fatalf("round trip: %+v, want %+v", back, d)
	}
	if _, err := decodeDirectory(enc[:len(enc)-1]); err == nil {
		t.Fatal("a truncated directory decoded")
	}
}

// TestDirectoryReplicated: directory changes go through the log of a
// three-node group from any node, and a snapshot carries the directory to
// a restarted replica.
func TestDirectoryReplicated(t *testing.T) {
	c := newCluster(t, 3, nil)
	leader := c.leader()
	var follower *tnode
	for _, tn := range c.nodes {
		if tn != leader {
			follower = tn
		}
	}
	ctx := context.Background()
	if err := follower.n.InitDirectory(ctx, 2, testPeers); err != nil {
		t.Fatal(err)
	}
	if err := follower.n.RegisterNode(ctx, "n2", "127.0.0.1:7002"); err != nil {
		t.Fatal(err)
	}
	g, err := follower.n.AddGroup(ctx, testPeers)
	if err != nil || g != 3 {
		t.Fatalf("AddGroup: %d, %v", g, err)
	}
	d := leader.n.Directory()
	if d.Epoch != 3 || len(d.Groups) != 3 || d.Nodes["n2"] != "127.0.0.1:7002" {
		t.Fatalf("leader's directory: %+v", d)
	}
	snap, err := leader.n.fsm.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	s := snap.(*fsmSnapshot)
	var buf bytes.Buffer
	if err := writeSnapshot(&buf, s.clock, s.applied, s.policies, s.recs, s.dir, s.slots); err != nil {
		t.Fatal(err)
	}
	eng := engine.New(1)
	defer eng.Close()
	restored := newFSM(eng)
	if err := restored.Restore(readCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got := restored.directory(); !reflect.DeepEqual(appendDirectory(nil, got), appendDirectory(nil, d)) {
		t.Fatalf("restored directory %+v, want %+v", got, d)
	}
}
