package ownership

import (
	"bytes"
	"encoding/binary"
	"reflect"
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
