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
//     own durable index (durableTransport), so no follower applies
//     an entry that only it has on disk. Were the leader's machine to
//     crash with the entry unsynced, a new leader without the entry could
//     be elected and the entry be replaced; nothing applied it, nobody
//     saw its result.
//   - entries of any other type (configuration changes, barriers, the
//     new leader's no-op) are written and synced in line, as before:
//     Raft acts on their commit itself, without the state machine.
//   - a node that stops leading syncs its log before it acknowledges an
//     append as a follower (durableTransport). A follower that already
//     holds the entries an AppendEntries carries (same index and term)
//     answers success without writing them: hashicorp/raft skips them.
//     A former leader holds its own unsynced entries that way, and the
//     new leader, which got them from it, counts that answer as a
//     durable copy toward the commit. So every successful answer to an
//     append waits until the entries it acknowledges are durable here,
//     syncing if they are not; were the sync to fail, the answer is an
//     error. Before this rule, safety rested on syncLoop having run in
//     the meantime, which nothing ordered.
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

// errNotDurable answers an append whose entries this node could not
// make durable (durableTransport).
var errNotDurable = errors.New("cluster: the entries are in the log but could not be synced")

// durableThrough makes this node's log durable through index, syncing it
// if needed, and reports whether it is.
func (g *diskGuard) durableThrough(index uint64) bool {
	if g.deferred == nil || g.deferred.Durable() >= index {
		return true
	}
	g.ackSyncs.Add(1)
	g.syncNow()
	return g.deferred.Durable() >= index
}

// durableTransport is Raft's transport with the two rules above: every
// AppendEntries' commit index capped at the leader's durable index, and
// every successful answer to one sent only once the entries it
// acknowledges are durable here. relay carries the requests from the
// network to Raft (Consumer), and must run until closing.
type durableTransport struct {
	*raft.NetworkTransport
	durable func() uint64
	guard   *diskGuard
	rpcs    chan raft.RPC
	closing <-chan struct{}
}

func newDurableTransport(nt *raft.NetworkTransport, g *diskGuard, durable func() uint64, closing <-chan struct{}) *durableTransport {
	return &durableTransport{NetworkTransport: nt, durable: durable, guard: g, rpcs: make(chan raft.RPC), closing: closing}
}

// Consumer implements raft.Transport.
func (t *durableTransport) Consumer() <-chan raft.RPC { return t.rpcs }

// relay hands Raft each request; an AppendEntries with entries gets its
// answer through ackDurable.
func (t *durableTransport) relay() {
	in := t.NetworkTransport.Consumer()
	for {
		var rpc raft.RPC
		select {
		case <-t.closing:
			return
		case rpc = <-in:
		}
		if req, ok := rpc.Command.(*raft.AppendEntriesRequest); ok && len(req.Entries) > 0 {
			answer := make(chan raft.RPCResponse, 1)
			go t.ackDurable(req.Entries[len(req.Entries)-1].Index, answer, rpc.RespChan)
			rpc.RespChan = answer
		}
		select {
		case <-t.closing:
			return
		case t.rpcs <- rpc:
		}
	}
}

// ackDurable passes Raft's answer on to the network once the entries it
// acknowledges (through last) are durable; an error if they cannot be.
func (t *durableTransport) ackDurable(last uint64, answer <-chan raft.RPCResponse, out chan<- raft.RPCResponse) {
	var r raft.RPCResponse
	select {
	case <-t.closing:
		return
	case r = <-answer:
	}
	if resp, ok := r.Response.(*raft.AppendEntriesResponse); ok && r.Error == nil && resp.Success && !t.guard.durableThrough(last) {
		r.Error = errNotDurable
	}
	out <- r
}

// AppendEntries implements raft.Transport.
func (t *durableTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	args.LeaderCommitIndex = min(args.LeaderCommitIndex, t.durable())
	return t.NetworkTransport.AppendEntries(id, target, args, resp)
}

// AppendEntriesPipeline implements raft.Transport. (The node runs with
// one append in flight per follower, where NetworkTransport offers no
// pipeline; the cap holds if that changes.)
func (t *durableTransport) AppendEntriesPipeline(id raft.ServerID, target raft.ServerAddress) (raft.AppendPipeline, error) {
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
