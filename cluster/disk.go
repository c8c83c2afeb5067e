package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/raftlog"
)

// A node whose disk fails (full, read-only, I/O errors) must not lead:
// Raft makes a leader whose log write fails step down, but its log is as
// long as the others', so it used to win the next election, and the next,
// with nothing serving in between. diskGuard wraps the log and stable
// store handed to Raft and marks the node "disk failed" on the first
// failed write. While marked:
//
//   - its heartbeat and election timeouts are diskFailedTimeoutScale times
//     the configured ones (raft.ReloadConfig, set from inside the failed
//     write, before Raft's follower loop starts its timer), so the healthy
//     nodes time out, and elect one of themselves, long before it stands;
//   - if it leads anyway (the others are down, or its timeout passed), it
//     hands leadership over at once (watch);
//   - a follower's failed log write is retried for up to followerWriteHold
//     before Raft sees the error, so a disk freed during that time costs
//     no rejected append (see below);
//   - every diskProbeInterval it writes, syncs and removes a file of
//     diskProbeSize bytes in the Raft folder; the first probe that succeeds
//     clears the mark and restores the timeouts.
//
// The hold exists because the leader backs off from a follower whose
// appends fail: hashicorp/raft v1.7.3 waits 10ms * 2^(n-2) after the n-th
// consecutive failure, up to 10.24 s (failureWait 10ms, maxFailureScale
// 12, not configurable), and only a successful append resets it. A
// follower that rejected appends as fast as they came reached that cap
// within about 10 s of a full disk, and then caught up seconds after its
// disk was freed. Holding each failed append for up to 1 s keeps the count
// of failures to about one per second of fault: after a 5 s fault the
// leader waits at most 80-160 ms, after a 10 s fault at most 0.64 s. The
// hold applies to followers only: a leader whose write fails steps down at
// once, so that another node is elected without delay.
//
// A disk that stalls (a write or fsync that does not return: a hung
// device, a frozen file system) fails nothing, so the above never starts.
// A leader stalled in a log write keeps its leadership for as long as the
// disk does: hashicorp/raft's leader loop is blocked in the write while
// the replication goroutines keep sending heartbeats, so the followers
// never elect another leader, and nothing is committed. stallWatch checks
// every stallTimeout/10 whether a write to the log or stable store has
// been in progress for longer than stallTimeout; if so and this node
// leads, it calls onFatal once (cmd/rlserver logs one error line and
// exits with status 3: the goroutines that send heartbeats go with the
// process, and the followers elect a new leader after their heartbeat
// timeout). Nothing short of ending the process stops those heartbeats
// while the leader loop is blocked. A stalled follower only logs: the
// leader and the other follower are a majority, and the follower catches
// up when its disk returns.
type diskGuard struct {
	raft.LogStore
	stable raft.StableStore
	dir    string
	log    *slog.Logger

	r       atomic.Pointer[raft.Raft]
	normal  raft.ReloadableConfig // the configured timeouts
	closing <-chan struct{}

	failed      atomic.Bool
	writeErrors atomic.Int64
	wake        chan struct{} // a mark was set

	stallTimeout time.Duration // 0: no stall detection
	onFatal      func(error)   // called at most once: this leader's write stalled, or a deferred sync failed
	fatalOnce    sync.Once
	leading      func() bool  // this node leads; default: the running Raft's state
	stalls       atomic.Int64 // writes seen in progress longer than stallTimeout
	ackSyncs     atomic.Int64 // syncs an acknowledgement waited for (durableThrough)

	// A leader's deferred log syncs (durable.go); deferred is nil when
	// the log store cannot defer them.
	deferred  deferredLog
	syncKick  chan struct{}
	dmu       sync.Mutex
	durableCh chan struct{} // closed when the durable index advances, if waiting
	waiting   bool

	stallMu   sync.Mutex
	inflight  map[uint64]inflightWrite // writes in progress, by ticket
	nextWrite uint64
}

// inflightWrite is a write to the log or stable store in progress.
type inflightWrite struct {
	op    string
	since time.Time
}

const (
	diskFailedTimeoutScale = 10
	followerWriteHold      = time.Second
	followerWriteRetry     = 50 * time.Millisecond
	diskProbeInterval      = 100 * time.Millisecond
	diskProbeSize          = 64 << 10
	diskProbeName          = "disk-probe.tmp"
)

func newDiskGuard(logs raft.LogStore, stable raft.StableStore, dir string, log *slog.Logger, closing <-chan struct{}) *diskGuard {
	g := &diskGuard{LogStore: logs, stable: stable, dir: dir, log: log, closing: closing, wake: make(chan struct{}, 1),
		inflight: make(map[uint64]inflightWrite), syncKick: make(chan struct{}, 1), durableCh: make(chan struct{})}
	g.deferred, _ = logs.(deferredLog)
	g.leading = func() bool {
		r := g.r.Load()
		return r != nil && r.State() == raft.Leader
	}
	return g
}

// begin records a write in progress; end(ticket) when it returns.
func (g *diskGuard) begin(op string) uint64 {
	g.stallMu.Lock()
	defer g.stallMu.Unlock()
	g.nextWrite++
	g.inflight[g.nextWrite] = inflightWrite{op: op, since: time.Now()}
	return g.nextWrite
}

func (g *diskGuard) end(ticket uint64) {
	g.stallMu.Lock()
	delete(g.inflight, ticket)
	g.stallMu.Unlock()
}

// oldest is the write in progress that began first; ok false when none is.
func (g *diskGuard) oldest() (w inflightWrite, ticket uint64, ok bool) {
	g.stallMu.Lock()
	defer g.stallMu.Unlock()
	for t, iw := range g.inflight {
		if !ok || iw.since.Before(w.since) {
			w, ticket, ok = iw, t, true
		}
	}
	return w, ticket, ok
}

// stallWatch runs until closing when stallTimeout > 0 (see diskGuard).
// Each stalled write is counted and logged once; onFatal is called once,
// the first time a write has stalled while this node leads.
func (g *diskGuard) stallWatch() {
	if g.stallTimeout <= 0 {
		return
	}
	t := time.NewTicker(max(g.stallTimeout/10, time.Millisecond))
	defer t.Stop()
	var seen uint64 // the last stalled write counted
	called := false
	// A write is stalled only when it has been in progress for longer
	// than stallTimeout and this watch saw it in progress on more than
	// ten of its own ticks in a row: a process that was paused (SIGSTOP, a
	// suspended VM) and resumes with a write in progress has seen one
	// tick, not ten, however long the pause, so it is not taken for a
	// stalled disk.
	var watched uint64 // the write seen in progress on the last ticks
	ticks := 0
	for {
		select {
		case <-g.closing:
			return
		case <-t.C:
		}
		w, ticket, ok := g.oldest()
		if !ok {
			watched, ticks = 0, 0
			continue
		}
		if ticket != watched {
			watched, ticks = ticket, 0
		}
		ticks++
		d := time.Since(w.since)
		if d <= g.stallTimeout || ticks <= 10 {
			continue
		}
		leads := g.leading()
		if ticket != seen {
			seen = ticket
			g.stalls.Add(1)
			if !leads {
				g.log.Warn("raft disk stalled: a write has not finished; a follower waits for its disk", "dir", g.dir, "op", w.op, "after", d.Round(time.Millisecond))
			}
		}
		if leads && !called {
			called = true
			g.fatal(fmt.Errorf("disk stall detected: unable to write to %s within %v (%s in progress for %v)",
				g.dir, g.stallTimeout, w.op, d.Round(time.Millisecond)))
		}
	}
}

// start gives the guard the running Raft and the timeouts to restore.
func (g *diskGuard) start(r *raft.Raft) {
	g.normal = r.ReloadableConfig()
	g.r.Store(r)
}

// StoreLog implements raft.LogStore.
func (g *diskGuard) StoreLog(l *raft.Log) error {
	return g.StoreLogs([]*raft.Log{l})
}

// StoreLogs implements raft.LogStore: a leader's command entries are
// appended and synced in the background (durable.go); other writes are
// synced in line, and a failed one marks the node and, on a follower, is
// retried for up to followerWriteHold.
func (g *diskGuard) StoreLogs(logs []*raft.Log) error {
	if g.deferred != nil && g.leading() && commandsOnly(logs) {
		return g.appendDeferred(logs)
	}
	err := g.storeLogs(logs)
	if err == nil {
		g.durableAdvanced()
		return nil
	}
	g.fail(err)
	r := g.r.Load()
	if r == nil || r.State() != raft.Follower || errors.Is(err, raftlog.ErrSyncFailed) {
		return err
	}
	deadline := time.Now().Add(followerWriteHold)
	for time.Now().Before(deadline) {
		select {
		case <-g.closing:
			return err
		case <-time.After(followerWriteRetry):
		}
		if err = g.storeLogs(logs); err == nil {
			return nil
		}
	}
	return err
}

func (g *diskGuard) storeLogs(logs []*raft.Log) error {
	defer g.end(g.begin("log append"))
	return g.LogStore.StoreLogs(logs)
}

// IsMonotonic implements raft.MonotonicLogStore for the store the guard
// wraps (embedding the interface does not carry the method over). Raft
// asks LogCache, which asks the guard: without it, Raft would keep a
// follower's old entries when it installs a snapshot and append the next
// ones after a gap, which raftlog refuses (the follower could then never
// append again).
func (g *diskGuard) IsMonotonic() bool {
	m, ok := g.LogStore.(raft.MonotonicLogStore)
	return ok && m.IsMonotonic()
}

// DeleteRange implements raft.LogStore.
func (g *diskGuard) DeleteRange(min, max uint64) error {
	defer g.end(g.begin("log compaction"))
	return g.check(g.LogStore.DeleteRange(min, max))
}

// Set implements raft.StableStore.
func (g *diskGuard) Set(key, val []byte) error {
	defer g.end(g.begin("stable store write"))
	return g.check(g.stable.Set(key, val))
}

// Get implements raft.StableStore.
func (g *diskGuard) Get(key []byte) ([]byte, error) { return g.stable.Get(key) }

// SetUint64 implements raft.StableStore.
func (g *diskGuard) SetUint64(key []byte, val uint64) error {
	defer g.end(g.begin("stable store write"))
	return g.check(g.stable.SetUint64(key, val))
}

// GetUint64 implements raft.StableStore.
func (g *diskGuard) GetUint64(key []byte) (uint64, error) { return g.stable.GetUint64(key) }

// fatal calls onFatal once; without one it logs.
func (g *diskGuard) fatal(err error) {
	g.fatalOnce.Do(func() {
		if g.onFatal != nil {
			g.onFatal(err)
			return
		}
		g.log.Error("raft disk fault that only a restart clears", "dir", g.dir, "err", err)
	})
}

func (g *diskGuard) check(err error) error {
	if err != nil {
		g.fail(err)
	}
	return err
}

// fail marks the node, and ends it (fatal) when the write broke the log
// (raftlog.ErrSyncFailed). It runs on Raft's own goroutine, before Raft
// acts on the error, so the longer timeouts are in place when a leader
// that failed to write steps down and starts its follower timer.
func (g *diskGuard) fail(err error) {
	g.writeErrors.Add(1)
	if errors.Is(err, raftlog.ErrSyncFailed) {
		// The log broke (durable.go): what is on disk is unknown.
		g.fatal(err)
	}
	if g.failed.Swap(true) {
		return
	}
	g.log.Error("raft disk write failed: this node will not stand for election until a write to its data folder succeeds", "dir", g.dir, "err", err)
	if r := g.r.Load(); r != nil {
		if err := r.ReloadConfig(g.scaled(diskFailedTimeoutScale)); err != nil {
			g.log.Warn("raft timeouts not raised", "err", err)
		}
	}
	select {
	case g.wake <- struct{}{}:
	default:
	}
}

func (g *diskGuard) scaled(k time.Duration) raft.ReloadableConfig {
	c := g.normal
	c.HeartbeatTimeout *= k
	c.ElectionTimeout *= k
	return c
}

// watch runs until closing: while the node is marked it probes the disk
// and, if this node leads, hands leadership over.
func (g *diskGuard) watch() {
	t := time.NewTicker(diskProbeInterval)
	defer t.Stop()
	for {
		select {
		case <-g.closing:
			return
		case <-g.wake:
		case <-t.C:
		}
		if !g.failed.Load() {
			continue
		}
		r := g.r.Load()
		if r == nil {
			continue
		}
		if err := g.probe(); err == nil {
			g.failed.Store(false)
			if err := r.ReloadConfig(g.normal); err != nil {
				g.log.Warn("raft timeouts not restored", "err", err)
			}
			g.log.Info("raft disk writable again: this node stands for election again", "dir", g.dir)
			continue
		}
		if r.State() == raft.Leader {
			err := r.LeadershipTransfer().Error()
			g.log.Warn("leader with a failed disk hands leadership over", "err", err)
		}
	}
}

// probe writes, syncs and removes a file of diskProbeSize bytes.
func (g *diskGuard) probe() error {
	path := filepath.Join(g.dir, diskProbeName)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	_, err = f.Write(make([]byte, diskProbeSize))
	err = errors.Join(err, f.Sync(), f.Close())
	return errors.Join(err, os.Remove(path))
}
