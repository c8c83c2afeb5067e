package ownership

import (
	"bytes"
	"encoding/binary"
	"reflect"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/cluster/internal/codec"
)

var testPeers = []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}

func mustMeta(t *testing.T, d *Directory, op []byte) (*Directory, uint64) {
	t.Helper()
	nd, v, err := d.Apply(op, 0)
	if err != nil {
		t.Fatalf("Apply(%x): %v", op, err)
	}
	return nd, v
}

func TestDirectoryChanges(t *testing.T) {
	d := EmptyDirectory()
	init3 := appendPeers(binary.AppendUvarint([]byte{opInit}, 3), testPeers)
	d, _ = mustMeta(t, d, init3)
	if d.Epoch != 1 || len(d.Groups) != 3 || d.Groups[2].ID != 3 || !reflect.DeepEqual(d.Groups[0].Peers, testPeers) {
		t.Fatalf("after init: epoch %d groups %+v", d.Epoch, d.Groups)
	}
	runs := Runs(d.Slots)
	want := []Run{{0, 5461, 1}, {5462, 10922, 2}, {10923, 16383, 3}}
	if !reflect.DeepEqual(runs, want) {
		t.Fatalf("slots %v, want %v (Redis's split of three masters)", runs, want)
	}
	// A second init does nothing: the first wins.
	d2, _ := mustMeta(t, d, appendPeers(binary.AppendUvarint([]byte{opInit}, 5), testPeers))
	if d2 != d {
		t.Fatal("a second init changed the directory")
	}
	d, _ = mustMeta(t, d, codec.AppendString(codec.AppendString([]byte{opRegister}, "n1"), "127.0.0.1:6379"))
	if d.Epoch != 2 || d.Nodes["n1"] != "127.0.0.1:6379" {
		t.Fatalf("after register: %+v", d)
	}
	same, _ := mustMeta(t, d, codec.AppendString(codec.AppendString([]byte{opRegister}, "n1"), "127.0.0.1:6379"))
	if same != d {
		t.Fatal("registering the same address again changed the directory")
	}
	d, g := mustMeta(t, d, appendPeers([]byte{opAddGroup}, testPeers[:1]))
	if g != 4 || d.Group(4) == nil || d.Epoch != 3 || len(Runs(d.Slots)) != 3 {
		t.Fatalf("add group: id %d, directory %+v", g, d)
	}
	d, _ = mustMeta(t, d, codec.AppendString([]byte{opForget}, "n1"))
	if _, ok := d.Nodes["n1"]; ok || d.Epoch != 4 {
		t.Fatalf("forget: %+v", d)
	}
	for _, bad := range [][]byte{nil, {99}, {opInit}, binary.AppendUvarint([]byte{opInit}, 0), {opAddGroup}, {opRegister, 5}} {
		if _, _, err := EmptyDirectory().Apply(bad, 0); err == nil {
			t.Errorf("op %x accepted", bad)
		}
	}
	// The encoding round-trips.
	enc := AppendDirectory(nil, d)
	back, err := DecodeDirectory(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(AppendDirectory(nil, back), enc) || !reflect.DeepEqual(back.Slots, d.Slots) || !reflect.DeepEqual(back.Groups, d.Groups) {
		t.Fatalf("round trip: %+v, want %+v", back, d)
	}
	if _, err := DecodeDirectory(enc[:len(enc)-1]); err == nil {
		t.Fatal("a truncated directory decoded")
	}
}

// TestNodeStates: a node's dead and draining bits are recorded once
// (applying the same op twice equals once), survive the encoding, make
// the node unplaceable, and go with the node when it is forgotten.
func TestNodeStates(t *testing.T) {
	peers := []Peer{{"n1", "a:1"}, {"n2", "a:2"}, {"n3", "a:3"}, {"n4", "a:4"}}
	d, _ := mustMeta(t, EmptyDirectory(), InitPlacedOp(2, 3, peers))
	for _, p := range peers {
		d, _ = mustMeta(t, d, RegisterOp(p.ID, p.Addr))
	}
	if changed := must1(t, &d, NodeStateOp("n9", NodeDead)); changed != 0 {
		t.Fatal("a node the directory does not know got a state")
	}
	if changed := must1(t, &d, NodeStateOp("n2", NodeDraining)); changed != 1 || d.Placeable("n2") || !d.Placeable("n1") {
		t.Fatalf("draining n2: changed %d, states %v", changed, d.States)
	}
	epoch := d.Epoch
	if changed := must1(t, &d, NodeStateOp("n2", NodeDraining)); changed != 0 || d.Epoch != epoch {
		t.Fatal("the same state applied twice changed the directory")
	}
	must1(t, &d, NodeStateOp("n3", NodeDead|NodeDraining))
	var spare string // the node group 1 lacks
	for _, p := range peers {
		if !slices.Contains(d.Group(1).Replicas, p.ID) {
			spare = p.ID
		}
	}
	must1(t, &d, AddLearnerOp(1, spare, ""))
	must1(t, &d, PromotedOp(1, spare))
	if d.ReplicasAdded != 1 {
		t.Fatalf("replicas added %d, want 1", d.ReplicasAdded)
	}
	enc := AppendDirectory(nil, d)
	back, err := DecodeDirectory(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back.States, d.States) || back.ReplicasAdded != 1 || !bytes.Equal(AppendDirectory(nil, back), enc) {
		t.Fatalf("round trip: states %v added %d, want %v 1", back.States, back.ReplicasAdded, d.States)
	}
	if changed := must1(t, &d, NodeStateOp("n3", 0)); changed != 1 || !d.Placeable("n3") {
		t.Fatal("clearing n3's state did not make it placeable")
	}
	d, _ = mustMeta(t, d, ForgetOp("n2"))
	if _, ok := d.States["n2"]; ok {
		t.Fatal("a forgotten node kept its state")
	}
	if _, _, err := d.Apply([]byte{opNodeState, 2, 'n', '1', 7}, 0); err == nil {
		t.Fatal("an unknown state bit was accepted")
	}
}

func must1(t *testing.T, d **Directory, op []byte) uint64 {
	t.Helper()
	nd, v := mustMeta(t, *d, op)
	*d = nd
	return v
}
