package cluster

import (
	"context"
	"errors"
	"slices"
	"time"

	"github.com/hashicorp/raft"
)

// Non-voting members and a group's membership made to follow a record.
//
// A replica that joins a group of a placed cluster (groups/placement.go)
// joins as a non-voter: it receives the log (a snapshot, then entries)
// without counting toward elections or commits, and is promoted to
// voter once it has caught up, so the group never waits on a member that
// is still copying its state. A node past the meta group's voter count
// stays a non-voter of the meta group for good: it reads the directory
// from its own replica.

// joinNonvoter, after msgJoin's node id and address: join as a
// non-voter.
const joinNonvoter byte = 1

// JoinNonvoter adds a node as a non-voting member, through the leader.
// A node that is a member already keeps its role.
func (n *Node) JoinNonvoter(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return ErrBadAddress
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.retryChange(ctx, func() error { return n.changeMembershipAs(ctx, id, raftAddr, false, true) })
}

// member returns id's entry in the latest configuration.
func (n *Node) member(id string) (raft.Server, bool) {
	cf := n.raft.GetConfiguration()
	if cf.Error() != nil {
		return raft.Server{}, false
	}
	for _, s := range cf.Configuration().Servers {
		if string(s.ID) == id {
			return s, true
		}
	}
	return raft.Server{}, false
}

// waitConfig waits for a configuration change's outcome.
func (n *Node) waitConfig(ctx context.Context, f raft.IndexFuture) error {
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		switch {
		case err == nil:
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			return errNotLeader
		default:
			return ErrMembership
		}
	case <-ctx.Done():
		return ErrUnknownOutcome
	}
}

// Membership is what a group's configuration should be: its voters and
// at most one learner (a node being added, as a non-voter until it is
// promoted), with the Raft addresses of both.
type Membership struct {
	Voters  []string
	Learner string
	Addrs   map[string]string // node id -> Raft address
}

// FollowMembership makes one change, on the leader, that brings the
// configuration closer to m: adds the learner as a non-voter, promotes a
// listed voter that is a non-voter, or removes a member m does not list.
// A member is removed only once every listed voter is a voter of the
// configuration, so a group loses an old replica only after the new one
// votes. It reports whether it changed anything; ErrNotAppended on a
// node that does not lead.
func (n *Node) FollowMembership(ctx context.Context, m Membership) (bool, error) {
	if n.raft.State() != raft.Leader {
		return false, exported(errNotLeader)
	}
	cf := n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		return false, exported(errNotLeader)
	}
	servers := cf.Configuration().Servers
	role := map[string]raft.ServerSuffrage{}
	for _, s := range servers {
		role[string(s.ID)] = s.Suffrage
	}
	if role[n.cfg.NodeID] != raft.Voter {
		// A non-voter that leads (handed the leadership by mistake):
		// give it to a voter, which carries the change on.
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return false, exported(errNotLeader)
		}
		return true, nil
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	if l := m.Learner; l != "" && m.Addrs[l] != "" {
		if _, ok := role[l]; !ok {
			n.readded(l) // removed.go
			return true, exported(n.waitConfig(ctx, n.raft.AddNonvoter(raft.ServerID(l), raft.ServerAddress(m.Addrs[l]), 0, n.cfg.CommitTimeout)))
		}
	}
	allVote := true
	for _, v := range m.Voters {
		switch r, ok := role[v]; {
		case !ok:
			allVote = false
			if a := m.Addrs[v]; a != "" {
				// A voter the configuration lacks (a group created
				// before placement, or a learner promoted while it was
				// away): added as a voter.
				n.readded(v) // removed.go
				return true, exported(n.waitConfig(ctx, n.raft.AddVoter(raft.ServerID(v), raft.ServerAddress(a), 0, n.cfg.CommitTimeout)))
			}
		case r != raft.Voter:
			s := serverOf(servers, v)
			return true, exported(n.waitConfig(ctx, n.raft.AddVoter(s.ID, s.Address, 0, n.cfg.CommitTimeout)))
		}
	}
	if !allVote {
		return false, nil
	}
	for _, s := range servers {
		id := string(s.ID)
		if slices.Contains(m.Voters, id) || id == m.Learner {
			continue
		}
		if id == n.cfg.NodeID {
			// The leader itself leaves: hand leadership to a listed
			// voter first; the next leader removes this node.
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				return false, exported(errNotLeader)
			}
			return true, nil
		}
		if err := n.waitConfig(ctx, n.raft.RemoveServer(s.ID, 0, n.cfg.CommitTimeout)); err != nil {
			return true, exported(err)
		}
		n.log.Info("member removed to follow the placement", "node_id", id)
		go n.tellRemoved(id, s.Address)
		return true, nil
	}
	return false, nil
}

func serverOf(servers []raft.Server, id string) raft.Server {
	for _, s := range servers {
		if string(s.ID) == id {
			return s
		}
	}
	return raft.Server{}
}

// CaughtUp reports whether this replica is a member that follows a
// leader it heard from within the last heartbeat timeout and has applied
// everything within lag entries of the commit index it knows.
func (n *Node) CaughtUp(lag uint64) bool {
	if n.removed.Load() || n.raft.State() == raft.Shutdown {
		return false
	}
	if _, ok := n.member(n.cfg.NodeID); !ok {
		return false
	}
	if n.raft.State() == raft.Leader {
		return true
	}
	if addr, _ := n.raft.LeaderWithID(); addr == "" || time.Since(n.raft.LastContact()) > n.cfg.HeartbeatTimeout {
		return false
	}
	commit := n.raft.CommitIndex()
	return commit > 0 && n.raft.AppliedIndex()+lag >= commit
}

// Voter reports whether this node is a voter of the latest configuration.
func (n *Node) Voter() bool {
	s, ok := n.member(n.cfg.NodeID)
	return ok && s.Suffrage == raft.Voter
}

// ChangeDirectory proposes a directory op (ownership.*Op) through the
// meta group's leader and returns its result.
func (n *Node) ChangeDirectory(ctx context.Context, op []byte) (uint64, error) {
	return n.proposeMeta(ctx, op)
}

// DemoteVoter makes a voter a non-voter, on the leader (a member of the
// meta group that stopped answering, once another took its vote).
func (n *Node) DemoteVoter(ctx context.Context, id string) error {
	if n.raft.State() != raft.Leader {
		return exported(errNotLeader)
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return exported(n.waitConfig(ctx, n.raft.DemoteVoter(raft.ServerID(id), 0, n.cfg.CommitTimeout)))
}
