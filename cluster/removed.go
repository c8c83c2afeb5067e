package cluster

import (
	"context"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/rlserver/rlserver/cluster/internal/codec"
)

// A node removed from the configuration (RL.CLUSTER REMOVE) must stop
// serving: otherwise it forwards to a leader that no longer counts it, then
// sits without a leader, or stands for election again and again (the
// members reject its votes, with a warning each time). Raft tells a
// follower nothing about its removal beyond the configuration entry the
// leader sends it last (best effort, often uncommitted in its view), and
// shuts down a leader that removed itself unless ShutdownOnRemove is off
// (it is: the former leader steps down and is found here like a
// follower). So watchRemoval polls the latest configuration.
//
// A node counts as removed when its latest configuration has lacked it for
// removalGrace after an earlier one (in this run) listed it: a node that
// rejoins under the id of a removed one, with an empty folder, replays
// its predecessor's history (listed, then removed, then added again),
// and its log lists it again within a few appends. A node that has never seen itself
// listed is not removed: one waiting to be added, or one catching up after
// a join (it replays older configurations without itself first). A removed
// node that is restarted with its data is therefore not recognised: it
// waits without a leader (not ready, CLUSTERDOWN). One case is mistaken for
// a removal: a joining node that received the configuration adding it
// before a new leader dropped that uncommitted entry; its join did not
// succeed, and it must be restarted with an empty folder to join again.
// (Raft does not export the index of its latest configuration, which
// would tell the two apart.)
//
// Once removed, the node logs why at WARN, shuts its Raft down (no more
// elections) and answers every replicated command with ErrRemoved; the
// process keeps running, not ready, until it is stopped.

// removalPoll is how often the configuration is read: an atomic load in
// Raft, so cheap.
const removalPoll = 100 * time.Millisecond

func (n *Node) watchRemoval() {
	defer n.wg.Done()
	t := time.NewTicker(removalPoll)
	defer t.Stop()
	wasListed := false
	var unlistedSince time.Time
	for first := true; ; first = false {
		if !first {
			select {
			case <-n.closing:
				return
			case <-t.C:
			}
		}
		f := n.raft.GetConfiguration()
		if f.Error() != nil {
			continue
		}
		conf := f.Configuration()
		listed := false
		for _, s := range conf.Servers {
			listed = listed || string(s.ID) == n.cfg.NodeID
		}
		wasListed = wasListed || listed || n.listed.Load()
		if listed || !wasListed || len(conf.Servers) == 0 {
			unlistedSince = time.Time{}
			continue
		}
		// Unlisted after being listed: removed, unless this is a node
		// catching up through an earlier incarnation's history (same id,
		// removed, then joined again with an empty folder), whose log
		// lists it again a few appends later.
		if unlistedSince.IsZero() {
			unlistedSince = time.Now()
		}
		if time.Since(unlistedSince) >= removalGrace {
			n.markRemoved(conf)
			return
		}
	}
}

// removalGrace is how long a node's latest configuration must lack it
// before it counts itself removed (the leader's notice is at once).
const removalGrace = 2 * time.Second

func (n *Node) markRemoved(conf raft.Configuration) {
	ids := make([]string, 0, len(conf.Servers))
	for _, s := range conf.Servers {
		ids = append(ids, string(s.ID))
	}
	if !n.removed.CompareAndSwap(false, true) {
		return // found by the other path (watchRemoval, or the leader's notice)
	}
	n.log.Warn("this node was removed from the cluster: it refuses commands until it is stopped; to add it again, stop it, empty its data folder and join it",
		"node_id", n.cfg.NodeID, "members", ids)
	// Raft's shutdown errors from here on are expected (hclog.go).
	n.shutting.Store(true)
	n.raft.Shutdown().Error()
}

// listingFSM is the FSM Raft sees: statsFSM, told of every committed
// configuration (Raft's ConfigurationStore), so that a node removed before
// watchRemoval's first look at a configuration listing it still knows it
// was listed.
type listingFSM struct {
	statsFSM
	n *Node
}

func (f listingFSM) StoreConfiguration(_ uint64, conf raft.Configuration) {
	for _, s := range conf.Servers {
		if string(s.ID) == f.n.cfg.NodeID {
			f.n.listed.Store(true)
		}
	}
}

// Removed reports whether this node saw itself removed from the cluster's
// configuration (it then refuses commands with ErrRemoved).
func (n *Node) Removed() bool { return n.removed.Load() }

// Raft sends a removed follower the configuration without it only as a
// best effort (one last append, not retried), so the leader also tells it:
// tellRemoved sends msgRemoved to the node's Raft address, retrying for up
// to removedNotice until the node answers (it may be unreachable: then
// it learns nothing, as before, and serves no one through the log).
//
// A notice is for the process that was removed, but it goes to an id and
// an address. A new process under the same id and address (the node
// replaced: an empty folder, joined again) replays its predecessor's
// configurations as it catches up, the first of which lists it, so it
// cannot tell that a notice still being retried is not for it: it would
// count itself removed a few appends into its catch-up and stop there.
// So the notice stops once the id is a member again: this node adding it
// cancels the notice first (readded), waiting for a try in flight, and
// each try checks this node's latest configuration, which covers an add
// by another leader (except a try already under way when this node
// receives that entry). A process that has not seen itself listed yet
// ignores a notice as well (handleRemoved).
const removedNotice = 10 * time.Second

// removedNoticeRetry is the pause between two tries of a notice (a
// variable for the tests).
var removedNoticeRetry = 200 * time.Millisecond

// removalNotice is a notice tellRemoved is sending; mu is held during
// each try.
type removalNotice struct {
	mu        sync.Mutex
	cancelled bool
}

func (n *Node) tellRemoved(id string, addr raft.ServerAddress) {
	rn := &removalNotice{}
	n.noticeMu.Lock()
	old := n.notices[id]
	if n.notices == nil {
		n.notices = map[string]*removalNotice{}
	}
	n.notices[id] = rn
	n.noticeMu.Unlock()
	old.cancel()
	defer func() {
		n.noticeMu.Lock()
		if n.notices[id] == rn {
			delete(n.notices, id)
		}
		n.noticeMu.Unlock()
	}()
	stop := time.Now().Add(removedNotice)
	for time.Now().Before(stop) {
		if n.tryRemovedNotice(rn, id, addr) {
			return
		}
		select {
		case <-n.closing:
			return
		case <-time.After(removedNoticeRetry):
		}
	}
}

// tryRemovedNotice sends the notice rn once, unless it was cancelled or
// id is a member again, and reports whether the notice is done with.
func (n *Node) tryRemovedNotice(rn *removalNotice, id string, addr raft.ServerAddress) bool {
	rn.mu.Lock()
	defer rn.mu.Unlock()
	if rn.cancelled {
		return true
	}
	if _, ok := n.member(id); ok {
		return true
	}
	p, err := dialPeer(addr, n.cfg.Group, n.dialTimeout(), n.cfg.DialTLS)
	if err != nil {
		return false
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), n.dialTimeout())
	defer cancel()
	r, err := p.call(ctx, msgRemoved, codec.AppendString(nil, id))
	return err == nil && r.status == statusOK
}

// cancel stops the notice; a try under way ends first. A nil notice is
// none.
func (rn *removalNotice) cancel() {
	if rn == nil {
		return
	}
	rn.mu.Lock()
	rn.cancelled = true
	rn.mu.Unlock()
}

// readded cancels the removal notice being sent for id, if any: this node
// is about to add id to the configuration again, and no notice may reach
// the process that joins under it. Call it before the change is handed
// to Raft.
func (n *Node) readded(id string) {
	n.noticeMu.Lock()
	rn := n.notices[id]
	delete(n.notices, id)
	n.noticeMu.Unlock()
	rn.cancel()
}

// listedNow reports whether this process has seen itself in a
// configuration: a process that has not is a new incarnation (an empty
// folder joining again under the same id), which a notice still being
// retried for the removed one must not stop.
func (n *Node) listedNow() bool {
	if n.listed.Load() {
		return true
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == n.cfg.NodeID {
			return true
		}
	}
	return false
}

// handleRemoved answers msgRemoved: the leader removed this node (ignored,
// but answered, by a process that never saw itself listed).
func (n *Node) handleRemoved(id string) byte {
	if id != n.cfg.NodeID {
		return statusBadRequest
	}
	if !n.removed.Load() && n.listedNow() {
		go func() {
			conf := raft.Configuration{}
			if f := n.raft.GetConfiguration(); f.Error() == nil {
				conf = f.Configuration()
			}
			n.markRemoved(conf)
		}()
	}
	return statusOK
}
