// Package server is rlserver's edge: it accepts connections, reads their
// commands through the guard on the byte stream, passes each through the
// gates (AUTH, ACL, key length, slot routing, MISCONF, BUSY), gathers a
// pipeline's limiter and data commands into one batch for the Backend,
// and writes the replies in order. What each command means (its
// arguments, requests and replies, the command table itself) is package
// command's; the edge answers itself only the commands that need the
// connection or the server (HELLO, AUTH, CLIENT, CONFIG, INFO...).
package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/memlimit"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/script"
)

// Backend applies batches of limiter requests and answers for the keys'
// memory. standalone.Backend reads the clock and calls the engine;
// cluster.Node replicates the batch first.
type Backend interface {
	// Do applies reqs and fills res (same length), in order per key.
	Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error
	// Len counts live keys (DBSIZE).
	Len(ctx context.Context) (int, error)
	// Flush removes every key (FLUSHALL).
	Flush(ctx context.Context) error
	// The memory controller's needs (maxmemory; INFO's keyspace reads
	// Usage's stored-key count).
	memlimit.Backend
	// ExpiredKeys counts the keys the background sweep dropped (INFO
	// expired_keys).
	ExpiredKeys() int64
	// EvictedKeys counts the keys evicted for maxmemory (INFO
	// evicted_keys).
	EvictedKeys() int64
}

// Config is the edge's configuration.
type Config struct {
	// RequirePass is the default user's password when ACL is nil.
	RequirePass string
	// ACL holds the users (ParseACL); nil: acl.Default(RequirePass).
	ACL   *acl.ACL
	Guard resp.GuardLimits // framing limits once authenticated (or with no password)
	// PreAuthGuard are the tighter framing limits before AUTH when the
	// default user needs a password or is off (default: 10 arguments,
	// 16 KiB bulks, 4 KiB inline).
	PreAuthGuard resp.GuardLimits
	MaxClients   int // connections served at once (default 10000); the next is refused
	MaxKeyLen    int // longest key accepted, bytes (default 16 KiB)

	// ScriptMemoryLimit is the most one script's run may grow the heap by
	// (a quarter of it bounds one value a built-in makes), bytes (0:
	// script.DefaultMemoryLimit; negative: no limit).
	ScriptMemoryLimit int64
	// PartialTimeout bounds how long a command may take to arrive once its
	// first bytes have (default 30s; negative: no limit).
	PartialTimeout time.Duration
	// ProtectedMode refuses clients from other hosts while the default
	// user is on with no password, as Redis does (the listener on a
	// non-loopback address).
	ProtectedMode bool
	Version       string            // rlserver's version, reported by INFO and HELLO
	Settings      map[string]string // CONFIG GET answers: setting name -> value
	// ConfigSet applies a CONFIG SET the edge does not handle itself
	// (log level, save interval); handled is false for a setting it does
	// not know. err's text is sent to the client as the reason CONFIG SET
	// failed. Nil: only the edge's own settings can change.
	ConfigSet func(name, value string) (handled bool, err error)
	Logger    *slog.Logger // lifecycle and rate-limited client warnings; nil: none

	// PolicyFile is the --policies file that RL.POLICY LOAD and
	// ReloadPolicies read (policies.go); "": none.
	PolicyFile string

	// The backend's capabilities beyond Backend, declared by whoever
	// builds the server (cmd/rlserver, from the concrete backend it made;
	// usually the backend itself). The server never looks for one by type
	// assertion: a nil field is a capability the server does not have,
	// whatever the Backend implements, and its commands answer as a server
	// without it does.
	Policies      Policies      // RL.POLICY, RL.CHECK, INFO's policies (policies.go)
	Persistence   Persistence   // SAVE, BGSAVE, LASTSAVE, SHUTDOWN, INFO persistence (persistence.go)
	WriteStopper  WriteStopper  // refusing writes after a failed save (persistence.go)
	Cluster       Cluster       // RL.CLUSTER, ROLE, INFO replication (command.Cluster)
	RaftSnapshots RaftSnapshots // INFO persistence's rl_raft_* fields (raftsnap.go)
	Router        SlotRouter    // hash slots: routing (route.go), CLUSTER, RL.CLUSTER GROUPS and MOVES
	GroupAdder    GroupAdder    // RL.CLUSTER ADDGROUP (command.GroupAdder)
	SlotMover     SlotMover     // RL.CLUSTER MOVE and REBALANCE (command.SlotMover)
	Scanner       Scanner       // SCAN, KEYS, RANDOMKEY (command.Scanner)
	CmdWriter     CmdWriter     // the count of applied data writes that wakes parked clients (block.go)
	LiveEngine    LiveEngine    // the engine in this process, unreplicated: scripts run on it (command.LiveEngine)
}

// Cluster, GroupAdder and SlotMover are command's: only its commands and
// INFO's replication section use them.
type (
	Cluster    = command.Cluster
	GroupAdder = command.GroupAdder
	SlotMover  = command.SlotMover
	Scanner    = command.Scanner
	LiveEngine = command.LiveEngine
)

// Stats are the server's counters, read by INFO.
type Stats struct {
	ConnectionsReceived atomic.Int64
	CommandsProcessed   atomic.Int64
	Allowed             atomic.Int64
	Denied              atomic.Int64
	ErrorReplies        atomic.Int64
	AuthFailures        atomic.Int64 // failed AUTH and HELLO ... AUTH
	ACLDeniedCmd        atomic.Int64 // commands refused: the user may not run them
	ACLDeniedKey        atomic.Int64 // commands refused: a key outside the user's patterns
	RejectedConnections atomic.Int64
	ExpiredKeys         atomic.Int64 // INFO's copy only: the backend's ExpiredKeys since RESETSTAT
	NetInputBytes       atomic.Int64 // bytes read from clients (after TLS)
	NetOutputBytes      atomic.Int64 // bytes of replies written to clients
	// Keyed commands refused by slot routing (route.go): -MOVED,
	// -CROSSSLOT, -CLUSTERDOWN.
	ClusterMoved     atomic.Int64
	ClusterCrossSlot atomic.Int64
	ClusterDown      atomic.Int64
}

// Server serves the Redis protocol on one listener.
type Server struct {
	cfg      Config
	backend  Backend
	stopper  WriteStopper // Config.WriteStopper (persistence.go); nil: writes are never refused
	router   SlotRouter   // Config.Router (route.go); nil: no routing
	acl      *users
	openAuth bool // connections start as the default user (on, nopass)
	started  time.Time
	Stats    Stats
	blocked  blockedSet // clients parked by blocking commands (block.go)

	// Per-command counters and the denied-keys summary (stats.go, top.go).
	cmdStats     []cmdStats // by command id
	batchLatency histogram
	errStats     errorStats
	base         statsBase // the counters at CONFIG RESETSTAT, for INFO (stats.go)
	top          topKeys
	ops          opsSampler
	maxKeyLen    atomic.Int64 // Config.MaxKeyLen, changed by CONFIG SET

	mem *memlimit.Controller // maxmemory (memory.go)
	env *command.Env         // what command's handlers reach: the backend, the capabilities, the scripts

	settingsMu sync.RWMutex // guards cfg.Settings: CONFIG SET writes it
	warnMu     sync.Mutex
	warns      map[string]*warnState // by kind (config_cmd.go)

	nextID atomic.Int64

	mu      sync.Mutex
	clients map[int64]*client
	conns   map[*conn]struct{}
	lns     []net.Listener // every listener Serve was given, closed by Shutdown
	closing bool
	wg      sync.WaitGroup // one per connection goroutine
	stop    atomic.Bool    // set when Shutdown begins; connections stop reading

	// guardLimits are the framing limits of authenticated connections:
	// cfg.Guard at start, then what CONFIG SET gives (config_cmd.go).
	guardLimits atomic.Pointer[resp.GuardLimits]
}

// New makes a server that answers limiter commands from backend. What
// else the backend can do, the server learns from cfg's capability fields
// only.
func New(cfg Config, backend Backend) *Server {
	if cfg.Guard == (resp.GuardLimits{}) {
		cfg.Guard = resp.DefaultGuardLimits()
	}
	if cfg.PreAuthGuard == (resp.GuardLimits{}) {
		cfg.PreAuthGuard = resp.GuardLimits{MaxBulkLen: 16 << 10, MaxArgs: 10, MaxInlineLen: 4 << 10}
	}
	if cfg.MaxClients <= 0 {
		cfg.MaxClients = 10000
	}
	if cfg.MaxKeyLen <= 0 {
		cfg.MaxKeyLen = 16 << 10
	}
	switch {
	case cfg.PartialTimeout == 0:
		cfg.PartialTimeout = 30 * time.Second
	case cfg.PartialTimeout < 0:
		cfg.PartialTimeout = 0
	}
	if cfg.ACL == nil {
		cfg.ACL = acl.Default(cfg.RequirePass)
	}
	s := &Server{
		cfg:      cfg,
		backend:  backend,
		acl:      compileACL(cfg.ACL),
		openAuth: cfg.ACL.Open(),
		started:  time.Now(),
		cmdStats: make([]cmdStats, len(command.All())),
		clients:  make(map[int64]*client),
		conns:    make(map[*conn]struct{}),
		mem:      memlimit.New(backend),
	}
	s.maxKeyLen.Store(int64(cfg.MaxKeyLen))
	// A nil capability stays nil through the conversions.
	s.env = &command.Env{Backend: backend, Policies: cfg.Policies, Persistence: cfg.Persistence,
		Cluster: cfg.Cluster, Slots: cfg.Router, GroupAdder: cfg.GroupAdder, SlotMover: cfg.SlotMover,
		Scanner: cfg.Scanner, Live: cfg.LiveEngine}
	s.env.SetBusyAfter(command.BusyReplyThreshold)
	switch {
	case cfg.ScriptMemoryLimit == 0:
		s.env.SetScriptMemory(script.DefaultMemoryLimit)
	case cfg.ScriptMemoryLimit > 0:
		s.env.SetScriptMemory(cfg.ScriptMemoryLimit)
	}
	if s.cfg.Settings == nil {
		s.cfg.Settings = map[string]string{}
	}
	if _, ok := s.cfg.Settings["busy-reply-threshold"]; !ok {
		ms := strconv.FormatInt(command.BusyReplyThreshold.Milliseconds(), 10)
		s.cfg.Settings["busy-reply-threshold"], s.cfg.Settings["lua-time-limit"] = ms, ms
	}
	s.cfg.Settings["script-memory-limit"] = strconv.FormatInt(s.env.ScriptMemory(), 10)
	for name, v := range kv.Tunables() {
		if _, ok := s.cfg.Settings[name]; !ok {
			s.cfg.Settings[name] = v
		}
	}
	s.stopper = cfg.WriteStopper
	s.router = cfg.Router
	g := cfg.Guard.Normalized()
	s.guardLimits.Store(&g)
	return s
}

// Serve answers connections on ln until Shutdown. It returns nil after a
// Shutdown. It may run on several listeners at once (plain TCP and TLS:
// pass tls.NewListener(ln, cfg), and the guard sees the TLS connections'
// plaintext).
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("server is shut down")
	}
	s.lns = append(s.lns, ln)
	s.startSampler()
	s.mu.Unlock()
	gl := resp.GuardListener(ln, s.cfg.Guard)
	for {
		nc, err := gl.Accept()
		if err != nil {
			s.mu.Lock()
			closing := s.closing
			s.mu.Unlock()
			if closing {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return err
		}
		if s.cfg.ProtectedMode && s.openAuth && !isLoopback(nc.RemoteAddr()) {
			s.Stats.RejectedConnections.Add(1)
			s.warn("protected-mode", "connection refused: protected mode (no password, client not on loopback)", "client", nc.RemoteAddr().String())
			refuseAsync(nc, command.ErrProtected)
			continue
		}
		c := newConn(nc, int(s.cfg.Guard.Normalized().MaxQueryBuffer))
		c.partialTimeout = s.cfg.PartialTimeout
		c.stopping = &s.stop
		if c.g != nil {
			if s.openAuth {
				c.g.Follow(&s.guardLimits)
			} else {
				c.g.Restrict(s.cfg.PreAuthGuard)
			}
		}
		s.mu.Lock()
		if s.closing {
			s.mu.Unlock()
			nc.Close()
			continue
		}
		if len(s.conns) >= s.cfg.MaxClients {
			s.mu.Unlock()
			s.Stats.RejectedConnections.Add(1)
			s.warn("maxclients", "connection refused: maxclients reached", "client", nc.RemoteAddr().String(), "maxclients", s.MaxClients())
			refuseAsync(nc, command.ErrMaxClients)
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serveConn(c)
	}
}

// serveConn reads pipelines and answers each as one batch, until the
// client leaves, sends something the guard refuses, or the server shuts
// down (a read deadline in the past ends the read after the last batch).
func (s *Server) serveConn(c *conn) {
	defer s.wg.Done()
	s.Stats.ConnectionsReceived.Add(1)
	if !s.handshake(c) {
		c.nc.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		return
	}
	cl := newClient(s.nextID.Add(1), c, s.env)
	cl.user = s.initialUser()
	cl.rep.errs = &s.errStats
	s.mu.Lock()
	s.clients[cl.id] = cl
	s.mu.Unlock()
	defer func() {
		c.nc.Close()
		cl.st.top.flush(&s.top, time.Now())
		s.mu.Lock()
		delete(s.clients, cl.id)
		delete(s.conns, c)
		s.mu.Unlock()
	}()
	for !c.closed {
		cmds, err := c.rd.ReadCommands()
		if err != nil {
			if errors.Is(err, resp.ErrQueryBuffer) {
				s.warn("query-buffer", "client closed: query buffer limit exceeded", "client", c.addr)
				c.WriteError(resp.TextQueryBuffer)
				c.w.Flush()
			}
			return
		}
		netIn := int64(c.rd.TakeBytesRead())
		s.Stats.NetInputBytes.Add(netIn)
		cl.pendingIn += netIn
		if s.handle(cl, cmds) == cmdQuit {
			c.Close()
			return
		}
		err = c.w.Flush()
		netOut := int64(c.w.TakeBytesWritten())
		s.Stats.NetOutputBytes.Add(netOut)
		cl.pendingOut += netOut
		if err != nil || c.killed.Load() {
			return
		}
	}
}

// Addr is the first listener's address, once Serve has started.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.lns) == 0 {
		return nil
	}
	return s.lns[0].Addr()
}

// Shutdown stops accepting connections, lets every connection finish the
// commands it has received and flush their replies, then closes them. It
// waits until they are closed or ctx ends; then it closes the rest.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	s.stop.Store(true)
	s.stopSampler()
	s.env.StopScripts() // a script's writes are not applied until it ends: stopping one loses nothing acknowledged
	for _, ln := range s.lns {
		ln.Close()
	}
	// A read deadline in the past makes each connection's next read fail
	// once it has answered what it already read.
	for c := range s.conns {
		c.nc.SetReadDeadline(time.Unix(1, 0))
	}
	s.mu.Unlock()
	done := make(chan struct{})
	go func() {
		s.wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return nil
	case <-ctx.Done():
		s.mu.Lock()
		for c := range s.conns {
			c.nc.Close()
		}
		s.mu.Unlock()
		// Every connection's goroutine ends once its socket is closed and
		// its script (if any) is stopped; a goroutine that has not ended a
		// second later is not waited for, so shutdown always finishes.
		select {
		case <-done:
		case <-time.After(time.Second):
		}
		return ctx.Err()
	}
}

// handle runs a pipeline as one batch.
func (s *Server) handle(c *client, cmds [][][]byte) outcome {
	start := time.Now()
	last := cmdOK
	n := 0
	for _, args := range cmds {
		if resp.UnbalancedQuotes(args) {
			s.flushBatch(c)
			c.rep.error(resp.TextUnbalancedQuotes)
			last = cmdQuit
			break
		}
		if c.quiet { // CLIENT REPLY OFF or SKIP (client.go)
			last = s.processQuiet(c, args)
		} else {
			last = s.process(c, args)
		}
		n++
		if last == cmdQuit {
			break
		}
	}
	s.flushBatch(c)
	if c.wrote {
		c.wrote = false
		s.wakeBlocked() // before this pipeline's replies are flushed (block.go)
	}
	s.Stats.CommandsProcessed.Add(int64(n))
	if c.rep.errors > 0 {
		s.Stats.ErrorReplies.Add(c.rep.errors)
		c.rep.errors = 0
	}
	end := time.Now()
	s.mergeStats(c, end.Sub(start), end)
	c.mu.Lock()
	c.lastAt = end
	c.totCmds += int64(n)
	c.totIn += c.pendingIn
	c.totOut += c.pendingOut
	c.mu.Unlock()
	c.pendingIn, c.pendingOut = 0, 0
	return last
}

type outcome int

const (
	cmdOK outcome = iota
	cmdQuit
)

// process runs one command: a limiter command joins the pending batch;
// any other first flushes the batch (keeping replies in order) and runs.
func (s *Server) process(c *client, args [][]byte) outcome {
	// Pipelines repeat one command: compare with the last one before
	// hashing the name into the table.
	cmd := c.lastLookup
	if cmd == nil || !command.EqualFold(args[0], cmd.Name) {
		c.lower = appendLower(c.lower[:0], args[0])
		cmd = command.Lookup(c.lower)
		c.lastLookup = cmd
	}
	if cmd == nil {
		s.refuse(c, command.UnknownCommand(args))
		return cmdOK
	}
	if !cmd.ArityOK(len(args)) {
		c.st.at(cmd.ID).rejected++
		s.refuse(c, command.WrongArity(cmd.Name))
		return cmdOK
	}
	if !cmd.NoAuth {
		u := c.user
		if u == nil {
			c.st.at(cmd.ID).rejected++
			s.refuse(c, command.ErrNoAuth)
			return cmdOK
		}
		if text := s.checkACL(c, u, cmd, args); text != "" {
			c.st.at(cmd.ID).rejected++
			s.refuse(c, text)
			return cmdOK
		}
	}
	if cmd.Keyed() {
		if text := s.checkKeys(cmd, args); text != "" {
			c.st.at(cmd.ID).rejected++
			s.refuse(c, text)
			return cmdOK
		}
	}
	if s.router != nil && cmd.Keyed() {
		if text := s.route(cmd, args); text != "" {
			c.st.at(cmd.ID).rejected++
			s.refuse(c, text)
			return cmdOK
		}
	}
	if s.refusesWrite(cmd) {
		c.st.at(cmd.ID).rejected++
		s.refuse(c, command.ErrMisconf)
		return cmdOK
	}
	if s.env.Busy(cmd, args) { // a script past busy-reply-threshold holds a key
		c.st.at(cmd.ID).rejected++
		s.refuse(c, script.ErrBusy)
		return cmdOK
	}
	if c.batchesScripts(cmd) {
		s.queueScript(c, cmd, args) // script.go
		return cmdOK
	}
	if len(c.scripts) > 0 {
		s.flushBatch(c) // the scripts before it run first
	}
	if !c.wrote && wakes(cmd) {
		c.wrote = true // block.go: the parked clients retry after the pipeline
	}
	if c.txn.On && cmd.Queues() {
		s.queue(c, args) // batch.go
		return cmdOK
	}
	if (cmd == multiCommand || cmd == execCommand) && s.batchTxn(c, cmd) {
		return cmdOK
	}
	if cmd.Tiered != nil {
		s.batchTiered(c, cmd, args)
		return cmdOK
	}
	if cmd.Blocks {
		c.wrote = true
		return s.runBlocking(c, cmd, args) // block.go
	}
	if cmd.Batch != nil {
		first := len(c.reqs)
		var errText string
		c.reqs, errText = cmd.Batch(&c.memo, c.reqs, args)
		if errText != "" {
			c.reqs = c.reqs[:first]
		}
		c.pending = append(c.pending, pendingReply{cmd: cmd, first: first, n: len(c.reqs) - first, errText: errText})
		return cmdOK
	}
	s.flushBatch(c)
	c.mu.Lock()
	c.lastCmd = cmd.Name
	c.mu.Unlock()
	errs := c.rep.errors
	c.sub = nil
	out := s.run(c, cmd, args) // table.go
	if c.sub != nil {
		cmd = c.sub
	}
	t := c.st.at(cmd.ID)
	t.calls++
	if c.rep.errors != errs {
		t.failed++
	}
	return out
}

// checkKeys refuses keys longer than MaxKeyLen before they reach a backend.
func (s *Server) checkKeys(cmd *command.Cmd, args [][]byte) string {
	for i := range cmd.KeyPositions(args) {
		if limit := s.maxKeyLen.Load(); int64(len(args[i])) > limit {
			return command.KeyTooLong(len(args[i]), limit)
		}
	}
	return ""
}

// refuse answers a connection it will not serve with one error line and
// closes it. The deadline covers reads too: on a TLS connection the write
// first runs the handshake.
func refuse(nc net.Conn, text string) {
	nc.SetDeadline(time.Now().Add(time.Second))
	io.WriteString(nc, "-"+text+"\r\n")
	nc.Close()
}

func isLoopback(a net.Addr) bool {
	var ip net.IP
	if ta, ok := a.(*net.TCPAddr); ok {
		ip = ta.IP
	} else if host, _, err := net.SplitHostPort(a.String()); err == nil {
		ip = net.ParseIP(host)
	}
	if ip == nil || testRemote(ip) {
		return false
	}
	return ip.IsLoopback()
}

func appendLower(dst, src []byte) []byte {
	for _, c := range src {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}

// initialUser is the user of a new (or RESET) connection: the default
// user when it is on with no password, else none (AUTH first).
func (s *Server) initialUser() *aclUser {
	if s.openAuth {
		return s.acl.defaultUser()
	}
	return nil
}

// setUser makes u (nil: none, unauthenticated) the connection's user and
// gives its byte stream the matching framing limits.
func (s *Server) setUser(c *client, u *aclUser) {
	c.user = u
	name := "default"
	if u != nil {
		name = u.Name()
	}
	c.mu.Lock()
	c.userName = name
	c.mu.Unlock()
	authed := u != nil
	if s.openAuth {
		return
	}
	if g := c.rep.conn.g; g != nil {
		if authed {
			g.Follow(&s.guardLimits)
		} else {
			g.Restrict(s.cfg.PreAuthGuard)
		}
	}
}
