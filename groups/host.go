// Package groups runs one process of a sharded cluster: the meta group
// (which replicates the slot directory) and a replica of every data group,
// each a cluster.Node with its own engine and snapshots, all over the
// process's one Raft Transport and writing through its one shared Raft
// log (cluster.OpenLog), whose fdatasyncs every group shares. A Host
// routes each key to the group that owns its hash slot, and is the
// server's Backend, Cluster, Policies and SlotRouter when rlserver runs
// with --groups.
package groups

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/slots"
)

// Redirect is what a node does with a command for a slot whose group it
// does not lead.
type Redirect int

const (
	// Moved answers -MOVED with the owning group's leader (Redis Cluster
	// clients follow it).
	Moved Redirect = iota
	// Forward serves the command, forwarding it to the owning group's
	// leader (for clients that are not cluster-aware).
	Forward
)

// ParseRedirect parses --cluster-redirect.
func ParseRedirect(s string) (Redirect, error) {
	switch strings.ToLower(s) {
	case "moved":
		return Moved, nil
	case "forward":
		return Forward, nil
	}
	return 0, fmt.Errorf("want moved or forward, not %q", s)
}

// Config configures a Host.
type Config struct {
	// Node is the template of every group's cluster.Config: NodeID,
	// RaftAddr, RaftAdvertise, RESPAddr, the timeouts, TLS, the disk
	// stall settings and the Logger apply to all groups; Dir is the
	// folder that holds the shared Raft log (wal) and one folder per
	// group for its snapshots (meta, g1, g2, ...); Log is ignored;
	// Bootstrap and Peers form the meta group and the first data groups
	// on first start.
	Node cluster.Config
	// Groups is how many data groups the first start creates, with the
	// slots split evenly (ignored once the directory exists).
	Groups int
	// Shards is the engine shard count of each data group.
	Shards   int
	Redirect Redirect
	// Replicas is the replication factor the first start records: each
	// data group gets this many voters, placed over the nodes
	// (placement.go), and the meta group this many voters. 0: every node
	// holds a voter of every group (clusters created before placement
	// keep that).
	Replicas int
	// NodeDeadAfter is how long a node may be unreachable before the
	// meta group's leader takes it for dead and rebuilds its replicas on
	// the other nodes (placement.go; 0: 5 minutes).
	NodeDeadAfter time.Duration
}

// Host is one process of a sharded cluster.
type Host struct {
	cfg       Config
	log       *slog.Logger
	myID      string // 40-hex cluster id
	transport *cluster.Transport
	wal       *cluster.SharedLog // every group's Raft log
	meta      *cluster.Node
	metaEng   *engine.Engine

	openMu  sync.Mutex // serializes refresh
	set     atomic.Pointer[groupSet]
	closing chan struct{}
	wg      sync.WaitGroup
	once    sync.Once

	sweepMu sync.Mutex
	sweep   func(*member) // starts a member's sweep once Sweep runs

	rebalancing atomic.Bool // a rebalance started here runs (mover.go)

	remoteMu sync.Mutex
	remotes  map[uint32]*remote // groups not held here, with forwarding (remote.go); nil once closed

	replicaAdds atomic.Int64 // learners this node recorded as the meta group's leader (placement.go)
	liveness    liveness     // the meta group's leader's view of which nodes answer (placement.go)
}

// member is this process's replica of one data group.
type member struct {
	id   uint32
	node *cluster.Node
	eng  *engine.Engine
}

// groupSet is the routing view: the directory and the replicas open here,
// replaced whole on every change.
type groupSet struct {
	dir     *ownership.Directory
	byID    map[uint32]*member
	ordered []*member            // by group id
	bySlot  [slots.Count]*member // nil: slot not assigned, or its group not open here
}

// owner is the member that serves slot on this node: the directory's
// group, unless this node does not lead it and leads a group that took
// the slot in a move whose commit its directory does not show yet (the
// meta group's change still on its way here). Without that, the node
// leading the target answered MOVED to the source's leader, which, with
// the change applied, sent the client back: clients bounced between the
// two until the directory arrived, and go-redis gave up after its 16
// redirects. The target's own state decides: it applies a request only
// on a slot it owns at that point of its log (cluster.fsm.filterOwned).
func (gs *groupSet) owner(slot int) *member {
	m := gs.bySlot[slot]
	if m != nil && m.node.IsLeader() {
		return m
	}
	for _, o := range gs.ordered {
		if o != m && o.node.IsLeader() && o.node.OwnsMovedSlot(slot) {
			return o
		}
	}
	return m
}

// NodeID40 is the 40-hex id a node shows in the Redis Cluster protocol:
// the SHA-1 of its --node-id, so every node derives the same one.
func NodeID40(nodeID string) string {
	h := sha1.Sum([]byte(nodeID))
	return hex.EncodeToString(h[:])
}

// Open starts the host: its Transport, the meta group, and every data group
// the directory (or the folder, after a restart) names.
func Open(cfg Config) (*Host, error) {
	if cfg.Shards <= 0 {
		cfg.Shards = 1
	}
	nc := cfg.Node
	if nc.NodeID == "" {
		return nil, errors.New("cluster: a node id is required")
	}
	if nc.Logger == nil {
		nc.Logger = slog.New(slog.DiscardHandler)
	}
	if err := os.MkdirAll(nc.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	wal, err := cluster.OpenLog(nc.Dir, nc.NoSync, nc.LogHooks)
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	nc.Log = wal
	cfg.Node = nc
	t, err := cluster.Listen(nc.RaftAddr, nc.RaftAdvertise, nc.TLS, nc.DialTLS)
	if err != nil {
		wal.Close()
		return nil, err
	}
	h := &Host{cfg: cfg, log: nc.Logger, myID: NodeID40(nc.NodeID), transport: t, wal: wal, closing: make(chan struct{}),
		remotes: map[uint32]*remote{}}
	h.set.Store(&groupSet{dir: &ownership.Directory{}, byID: map[uint32]*member{}})
	mc := nc
	mc.Transport, mc.Group, mc.Dir = t, 0, filepath.Join(nc.Dir, "meta")
	mc.RaftAdvertise = t.Addr()
	h.metaEng = engine.New(1)
	h.meta, err = cluster.Open(mc, h.metaEng)
	if err != nil {
		h.metaEng.Close()
		t.Close()
		wal.Close()
		return nil, err
	}
	// Groups this node already holds open at once, before the meta group
	// has a leader to replay the directory: their keys are served as soon
	// as their own groups elect.
	if err := h.openExisting(); err != nil {
		h.Close()
		return nil, err
	}
	h.refresh()
	h.wg.Add(5)
	go h.place() // placement.go
	go h.watchDirectory()
	go h.keepRegistered()
	go h.balance()
	go h.drive() // mover.go
	if !h.meta.HasState() || h.meta.Directory().Epoch == 0 {
		if nc.Bootstrap || len(nc.Peers) > 0 {
			h.wg.Add(1)
			go h.initDirectory()
		}
	}
	return h, nil
}

// groupDir is the folder of group g's log and snapshots.
func (h *Host) groupDir(g uint32) string {
	return filepath.Join(h.cfg.Node.Dir, "g"+strconv.FormatUint(uint64(g), 10))
}

// openExisting opens the data groups whose folders Dir holds, and drops
// from the shared log the groups that have no folder (dropReplica removes
// the folder first: a crash before the log's Drop leaves them there).
func (h *Host) openExisting() error {
	ents, err := os.ReadDir(h.cfg.Node.Dir)
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	for _, g := range h.wal.Groups() {
		if g == 0 {
			continue
		}
		if _, err := os.Stat(h.groupDir(g)); errors.Is(err, fs.ErrNotExist) {
			if err := h.wal.Drop(g); err != nil {
				return fmt.Errorf("cluster: dropping group %d from the raft log: %w", g, err)
			}
			h.log.Info("raft log of a dropped replica deleted", "group", g)
		}
	}
	h.openMu.Lock()
	defer h.openMu.Unlock()
	gs := h.set.Load()
	for _, e := range ents {
		name := e.Name()
		if !e.IsDir() || !strings.HasPrefix(name, "g") {
			continue
		}
		g, err := strconv.ParseUint(name[1:], 10, 32)
		if err != nil || g == 0 {
			continue
		}
		if _, ok := gs.byID[uint32(g)]; ok {
			continue
		}
		m, err := h.openGroup(uint32(g), nil)
		if err != nil {
			return err
		}
		gs = gs.with(m)
	}
	h.set.Store(gs)
	return nil
}

func (gs *groupSet) with(m *member) *groupSet {
	n := &groupSet{dir: gs.dir, byID: make(map[uint32]*member, len(gs.byID)+1)}
	for id, o := range gs.byID {
		n.byID[id] = o
	}
	n.byID[m.id] = m
	n.index()
	return n
}

// index fills ordered and bySlot from byID and dir.
func (gs *groupSet) index() {
	gs.ordered = gs.ordered[:0]
	for _, m := range gs.byID {
		gs.ordered = append(gs.ordered, m)
	}
	slices.SortFunc(gs.ordered, func(a, b *member) int { return int(a.id) - int(b.id) })
	for s := range gs.bySlot {
		gs.bySlot[s] = nil
		if gs.dir.Slots != nil {
			gs.bySlot[s] = gs.byID[gs.dir.Slots[s]]
		}
	}
}

// openGroup opens this node's replica of group g; peers, when it lists
// this node, bootstraps the group on its first start.
func (h *Host) openGroup(g uint32, peers []cluster.Peer) (*member, error) {
	nc := h.cfg.Node
	nc.Transport, nc.Group, nc.Dir = h.transport, g, h.groupDir(g)
	nc.RaftAdvertise = h.transport.Addr()
	nc.Bootstrap, nc.Peers = false, nil
	for _, p := range peers {
		if p.ID == nc.NodeID {
			nc.Peers = peers
		}
	}
	nc.Logger = h.log.With("group", g)
	eng := engine.New(h.cfg.Shards)
	n, err := cluster.Open(nc, eng)
	if err != nil {
		eng.Close()
		return nil, fmt.Errorf("group %d: %w", g, err)
	}
	m := &member{id: g, node: n, eng: eng}
	h.sweepMu.Lock()
	if h.sweep != nil {
		h.sweep(m)
	}
	h.sweepMu.Unlock()
	h.log.Info("raft group opened", "group", g, "bootstrap", nc.Peers != nil)
	return m, nil
}

// refresh opens the groups of the meta group's directory that are not open
// here and publishes the new routing view.
func (h *Host) refresh() {
	h.openMu.Lock()
	defer h.openMu.Unlock()
	select {
	case <-h.closing:
		return
	default:
	}
	dir := h.meta.Directory()
	old := h.set.Load()
	gs := &groupSet{dir: dir, byID: make(map[uint32]*member, len(dir.Groups))}
	for id, m := range old.byID {
		gs.byID[id] = m
	}
	for _, g := range dir.Groups {
		if _, ok := gs.byID[g.ID]; ok || !dir.Hosts(&g, h.cfg.Node.NodeID) {
			continue
		}
		m, err := h.openGroup(g.ID, g.Peers)
		if err != nil {
			h.log.Error("cannot open a raft group", "group", g.ID, "err", err)
			continue
		}
		gs.byID[g.ID] = m
	}
	gs.index()
	h.set.Store(gs)
	h.dropRemotes(gs)
}

// watchDirectory refreshes on every directory change, and every second
// besides: a group that failed to open is tried again.
func (h *Host) watchDirectory() {
	defer h.wg.Done()
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		ch := h.meta.DirectoryChanged()
		h.refresh()
		select {
		case <-h.closing:
			return
		case <-ch:
		case <-tick.C:
		}
	}
}

// initDirectory creates the first data groups, through the meta group's
// leader; the first node to get there wins and the others' are no-ops.
func (h *Host) initDirectory() {
	defer h.wg.Done()
	peers := h.cfg.Node.Peers
	if h.cfg.Node.Bootstrap {
		peers = []cluster.Peer{{ID: h.cfg.Node.NodeID, Addr: h.transport.Addr()}}
	}
	groups := max(1, h.cfg.Groups)
	h.retry("initialise the slot directory", func(ctx context.Context) (bool, error) {
		if h.meta.Directory().Epoch != 0 {
			return true, nil
		}
		var err error
		if h.cfg.Replicas > 0 {
			_, err = h.meta.ChangeDirectory(ctx, ownership.InitPlacedOp(groups, h.cfg.Replicas, peers))
		} else {
			err = h.meta.InitDirectory(ctx, groups, peers)
		}
		return err == nil, err
	})
}

// keepRegistered keeps this node's client address in the directory.
func (h *Host) keepRegistered() {
	defer h.wg.Done()
	for {
		h.retry("register this node's client address", func(ctx context.Context) (bool, error) {
			d := h.meta.Directory()
			if d.Epoch == 0 {
				return false, nil
			}
			if d.Nodes[h.cfg.Node.NodeID] == h.cfg.Node.RESPAddr {
				return true, nil
			}
			err := h.meta.RegisterNode(ctx, h.cfg.Node.NodeID, h.cfg.Node.RESPAddr)
			return false, err
		})
		select {
		case <-h.closing:
			return
		case <-h.meta.DirectoryChanged():
		}
	}
}

// retry runs f every 200 ms until it reports done or the host closes.
func (h *Host) retry(what string, f func(ctx context.Context) (bool, error)) {
	var logged bool
	for {
		ctx, cancel := context.WithTimeout(context.Background(), h.commitTimeout())
		done, err := f(ctx)
		cancel()
		if done {
			return
		}
		if err != nil && !logged && !errors.Is(err, cluster.ErrNoLeader) {
			h.log.Warn("cannot "+what+" yet; retrying", "err", err)
			logged = true
		}
		select {
		case <-h.closing:
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (h *Host) commitTimeout() time.Duration {
	if h.cfg.Node.CommitTimeout > 0 {
		return h.cfg.Node.CommitTimeout
	}
	return 2 * time.Second
}

// Done is closed once Close has been called.
func (h *Host) Done() <-chan struct{} { return h.closing }

// Close stops every group (leaders hand leadership over first), the meta
// group, the Transport and the shared log.
func (h *Host) Close() error {
	var first error
	h.once.Do(func() {
		close(h.closing)
		h.dropRemotes(nil)
		h.wg.Wait()
		h.openMu.Lock()
		defer h.openMu.Unlock()
		gs := h.set.Load()
		var wg sync.WaitGroup
		errs := make([]error, len(gs.ordered))
		for i, m := range gs.ordered {
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs[i] = m.node.Close()
				m.eng.Close()
			}()
		}
		wg.Wait()
		errs = append(errs, h.meta.Close())
		h.metaEng.Close()
		h.transport.Close()
		errs = append(errs, h.wal.Close())
		first = errors.Join(errs...)
	})
	return first
}

// HasState reports whether this node started from existing Raft state.
func (h *Host) HasState() bool { return h.meta.HasState() }

// RaftAddr is the process's advertised Raft address.
func (h *Host) RaftAddr() string { return h.transport.Addr() }

// Meta is the meta group's replica on this node.
func (h *Host) Meta() *cluster.Node { return h.meta }

// Groups lists this node's data group replicas, by group id.
func (h *Host) Groups() []*cluster.Node {
	gs := h.set.Load()
	out := make([]*cluster.Node, len(gs.ordered))
	for i, m := range gs.ordered {
		out[i] = m.node
	}
	return out
}
