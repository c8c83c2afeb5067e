package cluster

import (
	"errors"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/raftlog"
)

// A leader's own log write, in parallel with its followers'.
//
// hashicorp/raft's leader writes a new entry to its log, and only then
// hands it to the goroutines that send it to the followers, so every
// entry waited for two fdatasyncs in turn, the leader's and then a
// follower's. Raft allows the leader's write to run alongside
// replication, provided nothing acts on an entry before a majority holds
// it durably. Here the leader appends its command entries without
// syncing (raftlog's Append: they are in the log for replication at once)
// and a goroutine of the guard syncs them (syncLoop), while:
//
//   - the leader's state machine applies an entry only once it is durable
//     on the leader too (awaitDurable, called by fsm.Apply), so a result
//     reaches a client only when the entry is on disk on the leader and,
//     since Raft committed it, on at least one follower: a majority of
//     three. Raft counts the leader's copy toward the commit as soon as
//     the append returns; awaitDurable is what keeps that count honest.
//   - the commit index the leader sends its followers is capped at its
//     own durable index (durableCommitTransport), so no follower applies
//     an entry that only it has on disk. Were the leader's machine to
//     crash with the entry unsynced, a new leader without the entry could
//     be elected and the entry be replaced; nothing applied it, nobody
//     saw its result.
//   - entries of any other type (configuration changes, barriers, the
//     new leader's no-op) are written and synced in line, as before:
//     Raft acts on their commit itself, without the state machine.
//   - a failed sync of appended entries is fatal (onFatal; cmd/rlserver
//     ends the process, as for a stalled disk): after a failed fdatasync
//     the kernel may have dropped the pages, and a later sync can succeed
//     without them, so only rereading the log at start tells what is on
//     disk. A sync that stalls counts as a stalled write (stallWatch).
//
// A follower's writes are unchanged: it acknowledges an append after its
// fdatasync. Side by side on the development machine (3 nodes, 2 cores):
// README, Performance.

// deferredLog is a log store that appends without syncing
// (raftlog.Store).
type deferredLog interface {
	Append(logs []*raft.Log) error
	Sync() (uint64, error)
	Durable() uint64
}

// commandsOnly reports whether every entry of logs is a command entry.
func commandsOnly(logs []*raft.Log) bool {
	for _, l := range logs {
		if l.Type != raft.LogCommand {
			return false
		}
	}
	return true
}

// appendDeferred appends a leader's command entries and wakes syncLoop.
// A failed append stored nothing: Raft makes the leader step down, as
// for a failed StoreLogs.
func (g *diskGuard) appendDeferred(logs []*raft.Log) error {
	ticket := g.begin("log append")
	err := g.deferred.Append(logs)
	g.end(ticket)
	if err != nil {
		g.fail(err)
		return err
	}
	select {
	case g.syncKick <- struct{}{}:
	default:
	}
	return nil
}

// syncLoop runs until closing, syncing what appendDeferred appended.
func (g *diskGuard) syncLoop() {
	for {
		select {
		case <-g.closing:
			return
		case <-g.syncKick:
		}
		g.syncNow()
	}
}

// syncNow syncs the log and wakes the entries waiting for it.
func (g *diskGuard) syncNow() {
	ticket := g.begin("log sync")
	_, err := g.deferred.Sync()
	g.end(ticket)
	switch {
	case errors.Is(err, raftlog.ErrClosed):
	case err != nil:
		g.fail(err)
		g.fatal(err) // whatever the error: the entries it covered may be lost
	default:
		g.durableAdvanced()
	}
}

// durableAdvanced wakes awaitDurable's waiters, if any.
func (g *diskGuard) durableAdvanced() {
	g.dmu.Lock()
	if g.waiting {
		close(g.durableCh)
		g.durableCh = make(chan struct{})
		g.waiting = false
	}
	g.dmu.Unlock()
}

// awaitDurable waits until the log is durable through index, and reports
// whether it is: false only when the node closes and the log cannot be
// synced (the store closed, or its sync failed), and then the entry must
// not be applied.
func (g *diskGuard) awaitDurable(index uint64) bool {
	if g.deferred == nil || g.deferred.Durable() >= index {
		return true
	}
	for {
		g.dmu.Lock()
		if g.deferred.Durable() >= index {
			g.dmu.Unlock()
			return true
		}
		ch := g.durableCh
		g.waiting = true
		g.dmu.Unlock()
		// No kick needed: each append kicks after it is in the log, so
		// a sync that starts after the kick is taken covers it.
		select {
		case <-ch:
		case <-g.closing:
			g.syncNow() // syncLoop has stopped
			return g.deferred.Durable() >= index
		}
	}
}

// durableCommitTransport is Raft's transport with every AppendEntries'
// commit index capped at the leader's durable index (see above).
type durableCommitTransport struct {
	*raft.NetworkTransport
	durable func() uint64
}

// AppendEntries implements raft.Transport.
func (t durableCommitTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	args.LeaderCommitIndex = min(args.LeaderCommitIndex, t.durable())
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

// AppendEntriesPipeline implements raft.Transport. (The node runs with
// one append in flight per follower, where NetworkTransport offers no
// pipeline; the cap holds if that changes.)
func (t durableCommitTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
	p, err := t.NetworkTransport.AppendEntriesPipeline(id, target)
	if err != nil {
		return nil, err
	}
	return durableCommitPipeline{p, t.durable}, nil
}

type durableCommitPipeline struct {
	raft.AppendPipeline
	durable func() uint64
}

func (p durableCommitPipeline) AppendEntries(args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) (raft.AppendFuture, error) {
	args.LeaderCommitIndex = min(args.LeaderCommitIndex, p.durable())
	return p.AppendPipeline.AppendEntries(args, resp)
}
