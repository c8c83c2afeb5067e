package cluster

import (
	"bytes"
	"context"
	"reflect"
	"testing"

	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
)

var testPeers = []Peer{{ID: "n1", Addr: "127.0.0.1:1"}, {ID: "n2", Addr: "127.0.0.1:2"}}

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
	var buf bufSink
	if err := snap.Persist(&buf); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	eng := engine.New(1)
	defer eng.Close()
	restored := newFSM(eng)
	if err := restored.Restore(readCloser{bytes.NewReader(buf.Bytes())}); err != nil {
		t.Fatal(err)
	}
	if got := restored.directory(); !reflect.DeepEqual(ownership.AppendDirectory(nil, got), ownership.AppendDirectory(nil, d)) {
		t.Fatalf("restored directory %+v, want %+v", got, d)
	}
}
