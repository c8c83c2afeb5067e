package server

import (
	"context"

	"github.com/rlserver/rlserver/status"
)

// SlotRouter is what the Redis Cluster protocol needs from a backend whose
// keyspace is split into hash slots (cluster mode with --groups): the
// CLUSTER commands, MOVED, CROSSSLOT and CLUSTERDOWN. A backend that does
// not implement it answers CLUSTER as a Redis without cluster support.
type SlotRouter interface {
	// Route says how this node handles a keyed command on slot: serve it
	// here through the Backend (this node leads the slot's group, or
	// forwards to its leader), or redirect the client to addr (MOVED),
	// or, with serve false and addr "", answer CLUSTERDOWN: no group owns
	// the slot, or its group has no leader this node knows of.
	Route(slot int) (serve bool, addr string)
	// Topology is the slot map with each range's owner.
	Topology() status.Topology
	// CountKeysInSlot and KeysInSlot answer CLUSTER COUNTKEYSINSLOT and
	// GETKEYSINSLOT from this node's replica of the slot's group.
	CountKeysInSlot(ctx context.Context, slot int) (int, error)
	KeysInSlot(ctx context.Context, slot int, count int) ([]string, error)
}
