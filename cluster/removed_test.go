package cluster

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// TestRemovedNodeRefuses: a follower removed from the configuration, and a
// leader that removed itself, find out (Removed, ClusterStatus) and refuse
// commands with ErrRemoved; the others keep serving.
func TestRemovedNodeRefuses(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	drain(t, l, "before", 3) // every node has seen itself listed
	var f *tnode
	for _, tn := range c.nodes {
		if tn != l {
			f = tn
			break
		}
	}
	if err := l.n.Remove(context.Background(), f.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the follower to see its removal", f.n.Removed)
	res := make([]engine.Result, 1)
	req := []engine.Request{allow(t, "k", 3, 1e-6, 1)}
	if err := f.n.Do(context.Background(), req, res); !errors.Is(err, ErrRemoved) {
		t.Fatalf("Do on the removed follower: %v", err)
	}
	if !f.n.ClusterStatus().Removed {
		t.Fatal("ClusterStatus of the removed follower: not removed")
	}
	drain(t, l, "after", 3)

	// The leader removes itself: Raft makes it step down once the change is
	// committed (ShutdownOnRemove is off), and it finds out like a follower.
	if err := l.n.Remove(context.Background(), l.id); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the leader to see its removal", l.n.Removed)
	if err := l.n.Do(context.Background(), req, res); !errors.Is(err, ErrRemoved) {
		t.Fatalf("Do on the removed leader: %v", err)
	}
}
