package cluster

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/raftlog"
)

// Peer is one member of a static cluster configuration: a node id and
// its Raft address (host:port). It is the slot directory's peer type,
// which records the peers that bootstrap each group.
type Peer = ownership.Peer

// ParsePeers parses "id=host:port,id=host:port,...".
func ParsePeers(s string) ([]Peer, error) {
	var peers []Peer
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		id, addr, ok := strings.Cut(part, "=")
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("peer %q: want id=host:port", part)
		}
		if _, _, err := net.SplitHostPort(addr); err != nil {
			return nil, fmt.Errorf("peer %q: %v", part, err)
		}
		if seen[id] {
			return nil, fmt.Errorf("peer id %q listed twice", id)
		}
		seen[id] = true
		peers = append(peers, Peer{ID: id, Addr: addr})
	}
	return peers, nil
}

// Config configures a Node.
type Config struct {
	NodeID        string // unique and stable across restarts
	RaftAddr      string // listen address for Raft and forwarding (host:port)
	RaftAdvertise string // address peers dial; default: the bound RaftAddr

	// Transport, when set, is the process's shared Raft listener (Listen),
	// and Group the Raft group this node is a replica of: a sharded
	// process runs one Node per group over one Transport. RaftAddr,
	// RaftAdvertise and TLS are then the Transport's (DialTLS is still
	// used for forwarding). Nil: the node opens its own Transport on
	// RaftAddr for group 0, and closes it on Close.
	Transport *Transport
	Group     uint32
	RESPAddr  string // this node's client address, shown to peers and clients
	Dir       string // snapshots; the Raft log and stable store too when Log is nil

	// Log is the process's shared Raft log (OpenLog), which every group
	// the process hosts writes through: the node keeps its log and
	// stable store in Log's group Group, converting what Dir holds from
	// an earlier version first (logstore.go). Nil: the node opens its own
	// in Dir (OpenLog(Dir, ...)) and closes it on Close.
	Log *raftlog.Shared

	// How the cluster is formed on first start (ignored when Dir already
	// holds Raft state): Bootstrap makes a one-node cluster of this node;
	// Peers, the same list on every node, bootstraps a fixed cluster.
	// Otherwise the node waits to be added: a member runs Join for it
	// (RL.CLUSTER JOIN, which cmd/rlserver's --join sends).
	Bootstrap bool
	Peers     []Peer

	HeartbeatTimeout time.Duration // follower without contact before an election (default 400ms)
	ElectionTimeout  time.Duration // candidate without a result before a new election (default 400ms)
	CommitTimeout    time.Duration // the longest a command waits to be applied (default 2s)

	SnapshotThreshold uint64        // log entries between snapshots (default 8192)
	SnapshotInterval  time.Duration // how often to check the threshold (default 30s)
	TrailingLogs      uint64        // log entries kept after a snapshot (default 10240)

	// TLS and DialTLS turn on mutual TLS for Raft and forwarding between
	// nodes: TLS is the listener's side (it should require and verify
	// client certificates), DialTLS the dialling side (with this node's
	// certificate). Set both or neither; nil: plain TCP.
	TLS     *tls.Config
	DialTLS *tls.Config

	// FrameTimeout bounds how long a frame from a peer may take to arrive
	// once it started (default 30s); a slower peer is disconnected.
	FrameTimeout time.Duration

	NoSync bool // skip fsync of the log: for tests only, loses acknowledged writes on power loss
	// LogHooks are called at the steps of each log write: for tests that
	// crash the process between them. With Log set, NoSync and LogHooks
	// are the ones Log was opened with (OpenLog).
	LogHooks raftlog.Hooks

	// DiskStallTimeout bounds how long a write to the Raft log or stable
	// store may be in progress on the leader: past it OnDiskFatal is
	// called, with an error that names the folder (disk.go, "a stalled
	// disk"). 0 turns stall detection off. OnDiskFatal is also called
	// when a sync of log entries the leader appended without one fails
	// (durable.go). It is called at most once, and must end the process:
	// the leader's heartbeats go on while its Raft loop is blocked in a
	// write, and after a failed sync only rereading the log tells what is
	// on disk. cmd/rlserver exits; nil only logs.
	DiskStallTimeout time.Duration
	OnDiskFatal      func(error)

	// Logger receives the node's lines and Raft's own (through an hclog
	// adapter, with logger=raft), in its format and at its level. Default:
	// discard.
	Logger *slog.Logger
}

func (c *Config) setDefaults() {
	if c.HeartbeatTimeout <= 0 {
		c.HeartbeatTimeout = 400 * time.Millisecond
	}
	if c.ElectionTimeout <= 0 {
		c.ElectionTimeout = 400 * time.Millisecond
	}
	if c.CommitTimeout <= 0 {
		c.CommitTimeout = 2 * time.Second
	}
	if c.SnapshotThreshold == 0 {
		c.SnapshotThreshold = 8192
	}
	if c.SnapshotInterval <= 0 {
		c.SnapshotInterval = 30 * time.Second
	}
	if c.TrailingLogs == 0 {
		c.TrailingLogs = 10240
	}
	if c.FrameTimeout <= 0 {
		c.FrameTimeout = defaultFrameTimeout
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
}

// Node is one member of a Raft cluster replicating an engine. It is the
// server.Backend in cluster mode: any node accepts any command, followers
// forward to the leader. Its methods are safe for concurrent use.
type Node struct {
	cfg       Config
	log       *slog.Logger
	fsm       *fsm
	raft      *raft.Raft
	transport *Transport   // the process's Raft listener (shared when Config.Transport was set)
	stream    *groupStream // this group's connections on it
	trans     *raft.NetworkTransport
	store     *raftlog.GroupLog // the Raft log and stable store: this group's in the shared log (logstore.go)
	wal       *raftlog.Shared   // the shared log
	ownWAL    bool              // Close closes wal too (it was not Config.Log)
	disk      *diskGuard        // marks the node when a log write fails (disk.go)

	calls chan *call
	sem   chan struct{}
	// awaiting holds the data array (unsafe.SliceData) of each batch
	// entry this node submitted and whose results a batcher goroutine
	// still waits for (batch.go; fsm.awaited).
	awaiting sync.Map
	ready    chan struct{} // closed once raft is set: forwarded messages wait for it
	closing  chan struct{}
	wg       sync.WaitGroup
	once     sync.Once

	fwdMu sync.Mutex
	fwd   *peerConn // to the leader

	mu    sync.Mutex
	resp  map[string]string // node id -> RESP address, learned from hellos
	conns map[net.Conn]bool // inbound forward connections, closed on Close

	ownTransport bool // Close closes the Transport too (it was not shared)

	noTransfer bool        // Close skips the leadership hand-off (tests: a crash)
	shutting   atomic.Bool // Close began or the node was removed: Raft's shutdown errors are expected (hclog.go)
	removed    atomic.Bool // this node saw itself removed from the configuration (removed.go)
	listed     atomic.Bool // a committed configuration listed this node (removed.go)

	noticeMu sync.Mutex
	notices  map[string]*removalNotice // removal notices being sent, by node id (removed.go)

	expired       atomic.Int64 // keys dropped by Sweep (status.go)
	mem           nodeMemory   // maxmemory (memory.go)
	leaderChanges atomic.Int64 // leader observations by watchLeader
	lateForwards  atomic.Int64 // forwarded requests refused past their deadline (deadline.go)
	snapStats     *snapStats   // Raft snapshots taken and restored (snapstats.go)
}

// Open starts a node on eng. The engine must be fresh: the log (and the
// latest snapshot) are replayed into it. Close the node before the engine.
func Open(cfg Config, eng *engine.Engine) (*Node, error) {
	cfg.setDefaults()
	if cfg.NodeID == "" {
		return nil, errors.New("cluster: a node id is required")
	}
	if cfg.Transport == nil && (cfg.TLS == nil) != (cfg.DialTLS == nil) {
		return nil, errors.New("cluster: TLS and DialTLS go together")
	}
	if cfg.Bootstrap && len(cfg.Peers) > 0 {
		return nil, errors.New("cluster: bootstrap and a peer list are exclusive")
	}
	if len(cfg.Peers) > 0 {
		found := false
		for _, p := range cfg.Peers {
			found = found || p.ID == cfg.NodeID
		}
		if !found {
			return nil, fmt.Errorf("cluster: the peer list does not contain this node's id %q", cfg.NodeID)
		}
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n := &Node{
		cfg:     cfg,
		log:     cfg.Logger,
		fsm:     newFSM(eng),
		calls:   make(chan *call, 4096),
		sem:     make(chan struct{}, maxInflight),
		ready:   make(chan struct{}),
		closing: make(chan struct{}),
		resp:    make(map[string]string),
		conns:   make(map[net.Conn]bool),

		snapStats: newSnapStats(),
	}
	ownTransport := cfg.Transport == nil
	n.transport = cfg.Transport
	if ownTransport {
		t, err := Listen(cfg.RaftAddr, cfg.RaftAdvertise, cfg.TLS, cfg.DialTLS)
		if err != nil {
			return nil, err
		}
		n.transport = t
	}
	adv := n.transport.Addr()
	n.cfg.RaftAdvertise = adv
	stream, err := n.transport.register(cfg.Group, n.serveForward)
	if err != nil {
		if ownTransport {
			n.transport.Close()
		}
		return nil, err
	}
	n.stream = stream
	n.ownTransport = ownTransport

	hlog := newHCLog(cfg.Logger, "raft", n.shutting.Load)
	n.trans = raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  n.stream,
		MaxPool: 4,
		Timeout: 2 * time.Second,
		Logger:  hlog,
		// One append in flight per follower: pipelined replication
		// (MaxRPCsInFlight >= 2) could stop sending entries to a
		// follower for good after that follower's log write failed
		// (hashicorp/raft#612; docs/cluster.md, Faults).
		MaxRPCsInFlight: 1,
	})
	cleanup := func() {
		close(n.closing) // forwarded messages waiting for ready give up
		n.trans.Close()
		n.closeStream()
		if n.ownWAL {
			n.wal.Close()
		}
	}
	n.wal = cfg.Log
	if n.wal == nil {
		n.wal, err = OpenLog(cfg.Dir, cfg.NoSync, cfg.LogHooks)
		if err != nil {
			cleanup()
			return nil, fmt.Errorf("cluster: %w", err)
		}
		n.ownWAL = true
	}
	n.store, err = openGroupLog(n.wal, cfg.Group, cfg.Dir, cfg.NoSync, cfg.Logger)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cluster: raft log: %w", err)
	}
	n.disk = newDiskGuard(n.store, n.store, cfg.Dir, cfg.Logger, n.closing)
	n.disk.stallTimeout = cfg.DiskStallTimeout
	n.disk.onFatal = cfg.OnDiskFatal
	logs, err := raft.NewLogCache(1024, n.disk)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	files, err := raft.NewFileSnapshotStoreWithLogger(cfg.Dir, 2, hlog)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cluster: snapshots: %w", err)
	}
	snaps := newTidyStore(files, filepath.Join(cfg.Dir, "snapshots"), cfg.Logger)

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.HeartbeatTimeout = cfg.HeartbeatTimeout
	rc.ElectionTimeout = cfg.ElectionTimeout
	// A leader steps down when no majority answered it for this long. It
	// serves no reads on the strength of it (every command goes through
	// the log), so it need not give up before its followers would replace
	// it: at half the heartbeat timeout (as before), 200-480 ms pauses of
	// a node on a busy machine (a million-key slot move on two shared
	// cores, bench/moves) cost a leader change and clients UNKNOWN replies
	// in about one run out of two.
	rc.LeaderLeaseTimeout = cfg.HeartbeatTimeout
	// An idle leader sends each follower an AppendEntries every
	// CommitTimeout to 2x (the only way a follower learns the last commit
	// index once the load stops; under load every new entry carries it
	// at once). At 20 ms that was 33 messages a second per follower and
	// group, 40% of an idle three-node, three-group deployment's CPU
	// (16.8% of a core summed, 10.0% at 100 ms): a fixed cost every
	// added group and node multiplies. Replies never wait for it.
	rc.CommitTimeout = 100 * time.Millisecond
	rc.MaxAppendEntries = 128
	rc.BatchApplyCh = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.Logger = hlog
	rc.ShutdownOnRemove = false // a leader that removed itself steps down; watchRemoval takes it from there

	existing, err := raft.HasExistingState(logs, n.store, snaps)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.fsm.durable = n.disk.awaitDurable // durable.go
	n.fsm.awaited = n.awaited           // batch.go
	trans := newDurableTransport(n.trans, n.disk, n.store.Durable, n.closing)
	n.wg.Add(1)
	go func() { defer n.wg.Done(); trans.relay() }()
	n.raft, err = raft.NewRaft(rc, listingFSM{statsFSM{n.fsm, n.snapStats}, n}, logs, n.disk, snaps, trans)
	if err != nil {
		cleanup()
		return nil, fmt.Errorf("cluster: %w", err)
	}
	n.disk.start(n.raft)
	close(n.ready)
	if !existing && (cfg.Bootstrap || len(cfg.Peers) > 0) {
		var conf raft.Configuration
		if cfg.Bootstrap {
			conf.Servers = []raft.Server{{ID: rc.LocalID, Address: raft.ServerAddress(adv)}}
		}
		for _, p := range cfg.Peers {
			conf.Servers = append(conf.Servers, raft.Server{ID: raft.ServerID(p.ID), Address: raft.ServerAddress(p.Addr)})
		}
		if err := n.raft.BootstrapCluster(conf).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			n.raft.Shutdown().Error()
			cleanup()
			return nil, fmt.Errorf("cluster: bootstrap: %w", err)
		}
	}
	n.wg.Add(6)
	go n.runBatcher()
	go n.watchLeader()
	go n.watchRemoval()
	go func() { defer n.wg.Done(); n.disk.watch() }()
	go func() { defer n.wg.Done(); n.disk.stallWatch() }()
	go func() { defer n.wg.Done(); n.disk.syncLoop() }()
	n.log.Info("raft started", "node_id", cfg.NodeID, "raft_addr", adv, "existing_state", existing)
	return n, nil
}

// HasState reports whether the node started from existing Raft state (it
// is already a member, or was one).
func (n *Node) HasState() bool {
	return n.raft.LastIndex() > 0
}

// RaftAddr is the node's advertised Raft address.
func (n *Node) RaftAddr() string { return n.cfg.RaftAdvertise }

// closeStream unregisters the group from the Transport, and closes the
// Transport when the node opened it.
func (n *Node) closeStream() {
	n.stream.Close()
	if n.ownTransport {
		n.transport.Close()
	}
}

func (n *Node) dialTimeout() time.Duration {
	return min(time.Second, n.cfg.CommitTimeout)
}

// watchLeader follows leadership changes: the forward connection to an old
// leader is dropped (its waiting requests get an unknown outcome, since the
// old leader may have appended them) and one to the new leader is opened at
// once, so the first command after a failover does not pay for the dial.
func (n *Node) watchLeader() {
	defer n.wg.Done()
	ch := make(chan raft.Observation, 16)
	obs := raft.NewObserver(ch, false, func(o *raft.Observation) bool {
		_, ok := o.Data.(raft.LeaderObservation)
		return ok
	})
	n.raft.RegisterObserver(obs)
	defer n.raft.DeregisterObserver(obs)
	// A leader found before the observer was registered (Raft runs from
	// NewRaft on) is never observed: greet it now, or the leader would not
	// learn this node's client address until its next change.
	if addr, id := n.raft.LeaderWithID(); addr != "" && string(id) != n.cfg.NodeID {
		n.leaderChanges.Add(1)
		n.log.Info("leader changed", "leader_id", string(id), "leader_addr", string(addr))
		go n.leaderConn()
	}
	for {
		select {
		case <-n.closing:
			return
		case o := <-ch:
			lo := o.Data.(raft.LeaderObservation)
			n.leaderChanges.Add(1)
			n.log.Info("leader changed", "leader_id", string(lo.LeaderID), "leader_addr", string(lo.LeaderAddr))
			n.dropLeaderConn(lo.LeaderAddr)
			if lo.LeaderAddr != "" && string(lo.LeaderID) != n.cfg.NodeID {
				go n.leaderConn()
			}
		}
	}
}

func (n *Node) trackConn(c net.Conn, add bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if add {
		n.conns[c] = true
	} else {
		delete(n.conns, c)
	}
}

// Done is closed once Close has been called.
func (n *Node) Done() <-chan struct{} { return n.closing }

// Close leaves the cluster's traffic: a leader first hands leadership to
// another voter (bounded), then Raft stops. Commands still waiting get
// ErrShutdown or, if already sent, ErrUnknownOutcome.
func (n *Node) Close() error {
	var err error
	n.once.Do(func() {
		n.shutting.Store(true)
		if !n.noTransfer && n.raft.State() == raft.Leader && n.voters() > 1 {
			f := n.raft.LeadershipTransfer()
			done := make(chan struct{})
			go func() { f.Error(); close(done) }()
			select {
			case <-done:
			case <-time.After(2 * time.Second):
			}
		}
		close(n.closing)
		err = n.raft.Shutdown().Error()
		n.wg.Wait()
		n.fwdMu.Lock()
		if n.fwd != nil {
			n.fwd.close()
		}
		n.fwdMu.Unlock()
		n.trans.Close()
		n.closeStream()
		n.mu.Lock()
		for c := range n.conns {
			c.Close()
		}
		n.mu.Unlock()
		if n.ownWAL {
			if cerr := n.wal.Close(); err == nil {
				err = cerr
			}
		}
	})
	return err
}

func (n *Node) voters() int {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	v := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			v++
		}
	}
	return v
}

// Do replicates a batch and fills res once its entry is committed and
// applied. Reads (RL.PEEK, cost 0, EXISTS, PTTL, TYPE) take the same path,
// which makes them linearizable. It waits at most the commit timeout.
func (n *Node) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	return n.DoPolicies(ctx, reqs, nil, res)
}

// Len counts live keys, through the log (linearizable).
func (n *Node) Len(ctx context.Context) (int, error) {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.applySimple(ctx, entry.Len, false)
}

// Flush removes every key on every replica.
func (n *Node) Flush(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	_, err := n.applySimple(ctx, entry.Flush, false)
	return err
}

// applySimple applies an entry.Flush or entry.Len entry (entryType) on
// the leader, or forwards it (unless localOnly), retrying while it is
// certainly not appended.
func (n *Node) applySimple(ctx context.Context, entryType byte, localOnly bool) (int, error) {
	typ := msgFlush
	if entryType == entry.Len {
		typ = msgLen
	}
	return applyOp(ctx, n, logOp[int]{
		encode: func(now time.Time) []byte { return entry.AppendHeader(nil, entryType, now.UnixNano()) },
		leader: func(resp any) (int, error) {
			if lr, ok := resp.(*lenResult); ok {
				return lr.n, nil
			}
			return 0, nil
		},
		msg: typ,
		forwarded: func(body []byte) (int, error) {
			if entryType != entry.Len {
				return 0, nil
			}
			v, k := binary.Uvarint(body)
			if k <= 0 {
				return 0, ErrUnknownOutcome
			}
			return int(v), nil
		},
	}, localOnly)
}

// logOp is an entry to apply through the log: on the leader, encode builds
// it (afresh for each try: it carries the time, now) and leader reads the
// FSM's answer; elsewhere it is forwarded to the leader as msg with body
// and forwarded reads the reply.
type logOp[T any] struct {
	encode    func(now time.Time) []byte
	leader    func(resp any) (T, error)
	msg       byte
	body      []byte
	forwarded func(reply []byte) (T, error)
}

// applyOp applies op on the leader, or forwards it (unless localOnly),
// retrying while it is certainly not appended.
func applyOp[T any](ctx context.Context, n *Node, op logOp[T], localOnly bool) (T, error) {
	for {
		v, err := applyOpOnce(ctx, n, op, localOnly)
		if err == nil || localOnly || !retryable(err) {
			return v, exported(err)
		}
		if !n.pause(ctx) {
			var zero T
			return zero, n.notAppended()
		}
	}
}

func applyOpOnce[T any](ctx context.Context, n *Node, op logOp[T], localOnly bool) (T, error) {
	var zero T
	if n.removed.Load() {
		return zero, ErrRemoved
	}
	select {
	case <-n.closing:
		return zero, ErrShutdown
	default:
	}
	switch n.raft.State() {
	case raft.Shutdown:
		return zero, ErrShutdown
	case raft.Leader:
		// A forwarded op's deadline (deadline.go) is checked at the time
		// its entry carries, just before raft.Apply.
		now := time.Now()
		if err := n.checkDeadline(ctx, now); err != nil {
			return zero, err
		}
		resp, err := n.applyWait(ctx, op.encode(now))
		if err != nil {
			return zero, err
		}
		return op.leader(resp)
	}
	if localOnly {
		return zero, errNotLeader
	}
	reply, err := n.forward(ctx, op.msg, op.body)
	if err != nil {
		return zero, err
	}
	return op.forwarded(reply)
}

// Join adds a voter (RL.CLUSTER JOIN), through the leader.
func (n *Node) Join(ctx context.Context, id, raftAddr string) error {
	if id == "" || raftAddr == "" {
		return ErrBadAddress
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.membership(ctx, id, raftAddr)
}

// Remove removes a member (RL.CLUSTER REMOVE), through the leader. The
// removed node stops receiving log entries and shuts its Raft down.
func (n *Node) Remove(ctx context.Context, id string) error {
	if id == "" {
		return ErrBadAddress
	}
	ctx, cancel := context.WithTimeout(ctx, n.cfg.CommitTimeout)
	defer cancel()
	return n.membership(ctx, id, "")
}

func (n *Node) membership(ctx context.Context, id, addr string) error {
	return n.retryChange(ctx, func() error { return n.changeMembership(ctx, id, addr, false) })
}

// retryChange runs a membership change until it is done or cannot be
// retried, waiting between tries, at most until ctx ends.
func (n *Node) retryChange(ctx context.Context, change func() error) error {
	for {
		err := change()
		if err == nil || !retryable(err) {
			return exported(err)
		}
		if !n.pause(ctx) {
			return n.notAppended()
		}
	}
}

// changeMembership adds (addr != "") or removes a server on the leader, or
// forwards the change to it.
func (n *Node) changeMembership(ctx context.Context, id, addr string, localOnly bool) error {
	return n.changeMembershipAs(ctx, id, addr, localOnly, false)
}

// changeMembershipAs is changeMembership; nonvoter adds the server as a
// non-voter (learner.go), and a server that is a member already keeps
// its role.
func (n *Node) changeMembershipAs(ctx context.Context, id, addr string, localOnly, nonvoter bool) error {
	if n.removed.Load() {
		return ErrRemoved
	}
	if n.raft.State() != raft.Leader {
		if localOnly {
			return errNotLeader
		}
		typ, body := msgRemove, codec.AppendString(nil, id)
		if addr != "" {
			typ, body = msgJoin, codec.AppendString(codec.AppendString(nil, id), addr)
			if nonvoter {
				body = append(body, joinNonvoter)
			}
		}
		_, err := n.forward(ctx, typ, body)
		return err
	}
	var f raft.IndexFuture
	add := addr != ""
	if add {
		// A forwarded change's deadline (deadline.go), just before Raft.
		if err := n.checkDeadline(ctx, time.Now()); err != nil {
			return err
		}
		n.readded(id) // removed.go
		if nonvoter {
			if _, ok := n.member(id); ok {
				return nil
			}
			f = n.raft.AddNonvoter(raft.ServerID(id), raft.ServerAddress(addr), 0, n.cfg.CommitTimeout)
		} else {
			f = n.raft.AddVoter(raft.ServerID(id), raft.ServerAddress(addr), 0, n.cfg.CommitTimeout)
		}
	} else {
		cf := n.raft.GetConfiguration()
		if err := cf.Error(); err != nil {
			return errNotLeader
		}
		found := false
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == id {
				found, addr = true, string(s.Address)
			}
		}
		if !found {
			return ErrUnknownNode
		}
		if err := n.checkDeadline(ctx, time.Now()); err != nil {
			return err
		}
		f = n.raft.RemoveServer(raft.ServerID(id), 0, n.cfg.CommitTimeout)
	}
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		switch {
		case err == nil:
			n.log.Info("membership changed", "node_id", id, "raft_addr", addr, "added", add)
			if !add && id != n.cfg.NodeID {
				go n.tellRemoved(id, raft.ServerAddress(addr))
			}
			return nil
		case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
			return errNotLeader
		default:
			n.log.Warn("membership change failed", "node_id", id, "err", err)
			return ErrMembership
		}
	case <-ctx.Done():
		return ErrUnknownOutcome
	}
}

// Sweep drops expired keys in the background until ctx ends, like
// standalone.Backend.Sweep but at the time of the last applied entry instead of the
// wall clock, so that sweeping never moves a shard's clock past what the
// log says: dropping stays invisible and replicas stay identical.
func (n *Node) Sweep(ctx context.Context, interval time.Duration, budget int) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-n.closing:
			return
		case <-t.C:
		}
		now := n.fsm.now.Load()
		if now == 0 {
			continue
		}
		n.expired.Add(int64(n.fsm.eng.SweepWave(ctx, func() int64 { return now }, budget)))
	}
}

// applyWait appends entry to the log (this node is the leader) and waits
// for it to be applied, at most until ctx ends: then the outcome is
// unknown, since the entry may still commit. It returns the FSM's
// response.
func (n *Node) applyWait(ctx context.Context, entry []byte) (any, error) {
	f := n.raft.Apply(entry, n.cfg.CommitTimeout)
	errc := make(chan error, 1)
	go func() { errc <- f.Error() }()
	select {
	case err := <-errc:
		if err := applyErr(err); err != nil {
			return nil, err
		}
	case <-ctx.Done():
		return nil, ErrUnknownOutcome
	}
	return f.Response(), nil
}

// IsLeader reports whether this node leads its group now.
func (n *Node) IsLeader() bool { return n.raft.State() == raft.Leader }

// LeaderID is the id of the group's leader as this node knows it, "" while
// none is known.
func (n *Node) LeaderID() string {
	_, id := n.raft.LeaderWithID()
	return string(id)
}

// Group is the Raft group this node is a replica of.
func (n *Node) Group() uint32 { return n.cfg.Group }

// Peers is the group's current configuration as this node knows it.
func (n *Node) Peers() []Peer {
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var out []Peer
	for _, s := range f.Configuration().Servers {
		out = append(out, Peer{ID: string(s.ID), Addr: string(s.Address)})
	}
	return out
}

// TransferLeadership hands this group's leadership to the node id (this
// node must lead), waiting at most the commit timeout.
func (n *Node) TransferLeadership(id, addr string) error {
	return n.raft.LeadershipTransferToServer(raft.ServerID(id), raft.ServerAddress(addr)).Error()
}

// Engine is the engine this node replicates.
func (n *Node) Engine() *engine.Engine { return n.fsm.eng }

// ForEachKey calls fn with every live key of this replica, at the time of
// its last applied entry (no shard moves past what the log says). Keys are
// visited in no order; fn's error stops the walk.
func (n *Node) ForEachKey(ctx context.Context, fn func(key string) error) error {
	_, err := n.fsm.eng.Export(ctx, n.fsm.now.Load(), func(r engine.Record) error { return fn(r.Key) })
	return err
}

// Scan continues a walk of this replica's keys from cursor
// (engine.Engine.Scan) at the time of its last applied entry, calling fn
// with each live key and its kind; 0 when the walk is done. It reads the
// local replica, as ForEachKey does: SCAN is not linearizable in Redis
// either.
func (n *Node) Scan(ctx context.Context, cursor uint64, count int, fn func(key []byte, k engine.Kind)) (uint64, error) {
	next, _, err := n.fsm.eng.Scan(ctx, n.fsm.now.Load(), cursor, count, fn)
	return next, err
}
