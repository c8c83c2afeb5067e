package groups

import (
	"context"
	"errors"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
)

// moveSide is a slot move's source or target as its driver reaches it:
// through this node's replica of the group (localSide), or, for a group
// it holds no replica of, through the group's leader (remoteSide). The
// steps are the same log entries either way, so a move between two
// groups that share no node is driven like any other.
type moveSide interface {
	ImportSlots(ctx context.Context, id uint64, start, end int) error
	FreezeSlots(ctx context.Context, id uint64, start, end int) (int64, error)
	ImportChunk(ctx context.Context, id uint64, clock int64, recs []engine.Record) error
	CommitImport(ctx context.Context, id uint64, clock int64) error
	ReleaseSlots(ctx context.Context, id uint64) (int, error)
	// MoveStatus is move id's progress as the side has applied it.
	MoveStatus(ctx context.Context, id uint64) (ownership.Progress, bool, error)
	// ExportPage reads the source's records of [start, end] after the key
	// after, once the side has applied move id's freeze, up to about
	// budget bytes (a replica here answers them all); more says the page
	// was cut.
	ExportPage(ctx context.Context, id uint64, start, end int, after string, budget int) ([]engine.Record, int64, bool, error)
}

// localSide is a group through this node's replica.
type localSide struct{ *cluster.Node }

func (s localSide) MoveStatus(_ context.Context, id uint64) (ownership.Progress, bool, error) {
	p, ok := s.Move(id)
	return p, ok, nil
}

var errFreezeNotHere = errors.New("freeze not applied here yet")

func (s localSide) ExportPage(ctx context.Context, id uint64, start, end int, after string, _ int) ([]engine.Record, int64, bool, error) {
	// Export once this replica has applied the freeze: the range's
	// records no longer change.
	if _, ok := s.Move(id); !ok && !plantedNoFreeze() {
		return nil, 0, false, errFreezeNotHere
	}
	recs, clock, err := s.ExportSlots(ctx, start, end, after)
	return recs, clock, false, err
}

// remoteSide is a group this node holds no replica of, through its leader.
type remoteSide struct{ *cluster.Remote }

// moveSide returns group g's side for a move's driver: its replica here,
// else its remote in a placed cluster; nil when neither is there yet.
func (h *Host) moveSide(gs *groupSet, g uint32) moveSide {
	if m := gs.byID[g]; m != nil {
		return localSide{m.node}
	}
	if rg := h.remote(gs, g); rg != nil {
		return remoteSide{rg.r}
	}
	return nil
}
