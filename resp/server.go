// Package resp is rlserver's network edge: a redcon server behind a guard
// on the byte stream, the handshake and server commands, the command table,
// argument parsing, error texts and reply writing. It never touches limiter
// state: limiter commands become typed engine requests, handed in batches
// (one per pipeline) to a Backend.
package resp

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/tidwall/redcon"
)

// Backend applies batches of limiter requests. Standalone, it reads the
// clock and calls the engine; clustered, it replicates the batch first.
type Backend interface {
	// Do applies reqs and fills res (same length), in order per key.
	Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error
	// Len counts live keys (DBSIZE).
	Len(ctx context.Context) (int, error)
	// Flush removes every key (FLUSHALL).
	Flush(ctx context.Context) error
}

// Config is the edge's configuration.
type Config struct {
	RequirePass string
	Guard       GuardLimits
	Version     string            // rlserver's version, reported by INFO and HELLO
	Settings    map[string]string // CONFIG GET answers: setting name -> value
}

// Stats are the server's counters, read by INFO.
type Stats struct {
	ConnectionsReceived atomic.Int64
	CommandsProcessed   atomic.Int64
	Allowed             atomic.Int64
	Denied              atomic.Int64
	ErrorReplies        atomic.Int64
	AuthFailures        atomic.Int64
}

// Server serves the Redis protocol on one listener.
type Server struct {
	cfg     Config
	backend Backend
	started time.Time
	Stats   Stats

	nextID atomic.Int64

	mu      sync.Mutex
	clients map[int64]*client
	conns   map[*trackedConn]struct{}
	ln      net.Listener
	rs      *redcon.Server
	closing bool
	drained chan struct{} // closed when the last connection closes during shutdown
	release chan struct{} // closed to let Accept report the listener closed
}

// New makes a server that answers limiter commands from backend.
func New(cfg Config, backend Backend) *Server {
	if cfg.Guard == (GuardLimits{}) {
		cfg.Guard = DefaultGuardLimits()
	}
	return &Server{
		cfg:     cfg,
		backend: backend,
		started: time.Now(),
		clients: make(map[int64]*client),
		conns:   make(map[*trackedConn]struct{}),
		drained: make(chan struct{}),
		release: make(chan struct{}),
	}
}

// Serve answers connections on ln until Shutdown. It returns nil after a
// Shutdown.
func (s *Server) Serve(ln net.Listener) error {
	tl := &trackingListener{Listener: GuardListener(ln, s.cfg.Guard), s: s}
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errors.New("server is shut down")
	}
	s.ln = ln
	s.mu.Unlock()
	return redcon.Serve(tl, s.handle, s.accept, s.closed)
}

// Addr is the listener's address, once Serve has started.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Shutdown stops accepting connections, lets every connection finish the
// commands it has received and flush their replies, then closes them. It
// waits until they are closed or ctx ends.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return nil
	}
	s.closing = true
	if s.ln != nil {
		s.ln.Close()
	}
	// A read deadline in the past makes each connection's next read fail:
	// redcon first executes and flushes what it already read.
	for c := range s.conns {
		c.SetReadDeadline(time.Unix(1, 0))
	}
	if len(s.conns) == 0 {
		close(s.drained)
	}
	s.mu.Unlock()
	var err error
	select {
	case <-s.drained:
	case <-ctx.Done():
		err = ctx.Err()
	}
	close(s.release)
	return err
}

func (s *Server) accept(conn redcon.Conn) bool {
	s.Stats.ConnectionsReceived.Add(1)
	c := newClient(s.nextID.Add(1), conn)
	c.authed = s.cfg.RequirePass == ""
	conn.SetContext(c)
	s.mu.Lock()
	s.clients[c.id] = c
	s.mu.Unlock()
	return true
}

func (s *Server) closed(conn redcon.Conn, _ error) {
	c, ok := conn.Context().(*client)
	if !ok {
		return
	}
	s.mu.Lock()
	delete(s.clients, c.id)
	s.mu.Unlock()
}

// handle runs one command and the rest of the pipeline redcon has already
// parsed, as one batch.
func (s *Server) handle(conn redcon.Conn, cmd redcon.Command) {
	c := conn.Context().(*client)
	n := 1
	last := s.process(c, conn, cmd.Args)
	for _, next := range conn.ReadPipeline() {
		if last == cmdQuit {
			break
		}
		last = s.process(c, conn, next.Args)
		n++
	}
	s.flushBatch(c)
	s.Stats.CommandsProcessed.Add(int64(n))
	if c.rep.errors > 0 {
		s.Stats.ErrorReplies.Add(c.rep.errors)
		c.rep.errors = 0
	}
	c.mu.Lock()
	c.lastAt = time.Now()
	c.mu.Unlock()
	if last == cmdQuit {
		conn.Close()
	}
}

type outcome int

const (
	cmdOK outcome = iota
	cmdQuit
)

// process runs one command: a limiter command joins the pending batch;
// any other first flushes the batch (keeping replies in order) and runs.
func (s *Server) process(c *client, conn redcon.Conn, args [][]byte) outcome {
	c.lower = appendLower(c.lower[:0], args[0])
	cmd := lookup(c.lower)
	if cmd == nil {
		s.reply(c, unknownCommand(args))
		return cmdOK
	}
	if !cmd.arityOK(len(args)) {
		s.reply(c, wrongArity(cmd.name))
		return cmdOK
	}
	if !c.authed && !cmd.noAuth {
		s.reply(c, errNoAuth)
		return cmdOK
	}
	if cmd.batch != nil {
		first := len(c.reqs)
		var errText string
		c.reqs, errText = cmd.batch(c.reqs, args)
		if errText != "" {
			c.reqs = c.reqs[:first]
		}
		c.pending = append(c.pending, pendingReply{cmd: cmd, first: first, n: len(c.reqs) - first, errText: errText})
		return cmdOK
	}
	s.flushBatch(c)
	c.mu.Lock()
	c.lastCmd = cmd.name
	c.mu.Unlock()
	return cmd.handler(s, c, args)
}

// reply queues an error reply in order with the pending batch.
func (s *Server) reply(c *client, errText string) {
	c.pending = append(c.pending, pendingReply{errText: errText})
}

// flushBatch sends the pending requests to the backend in one call and
// writes every pending reply in order.
func (s *Server) flushBatch(c *client) {
	if len(c.pending) == 0 {
		return
	}
	var batchErr error
	if len(c.reqs) > 0 {
		if cap(c.res) < len(c.reqs) {
			c.res = make([]engine.Result, len(c.reqs), 2*len(c.reqs))
		}
		c.res = c.res[:len(c.reqs)]
		batchErr = s.backend.Do(context.Background(), c.reqs, c.res)
	}
	var allowed, denied int64
	for _, p := range c.pending {
		switch {
		case p.errText != "":
			c.rep.error(p.errText)
		case batchErr != nil:
			c.rep.error(engineErrorText(batchErr))
		default:
			res := c.res[p.first : p.first+p.n]
			if err := firstErr(res); err != nil {
				c.rep.error(engineErrorText(err))
				continue
			}
			a, d := p.cmd.render(&c.rep, res)
			allowed += a
			denied += d
		}
	}
	if allowed > 0 {
		s.Stats.Allowed.Add(allowed)
	}
	if denied > 0 {
		s.Stats.Denied.Add(denied)
	}
	if last := c.pending[len(c.pending)-1].cmd; last != nil {
		c.mu.Lock()
		c.lastCmd = last.name
		c.mu.Unlock()
	}
	clear(c.reqs) // drop references to the connection's buffers
	c.reqs = c.reqs[:0]
	c.pending = c.pending[:0]
}

func firstErr(res []engine.Result) error {
	for i := range res {
		if res[i].Err != nil {
			return res[i].Err
		}
	}
	return nil
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

// trackingListener records live connections so Shutdown can drain them.
type trackingListener struct {
	net.Listener
	s *Server
}

func (l *trackingListener) Accept() (net.Conn, error) {
	for {
		nc, err := l.Listener.Accept()
		if err != nil {
			l.s.mu.Lock()
			closing := l.s.closing
			l.s.mu.Unlock()
			if closing {
				// Keep redcon from closing live connections before they drain.
				<-l.s.release
				return nil, net.ErrClosed
			}
			return nil, err
		}
		tc := &trackedConn{Conn: nc, s: l.s}
		l.s.mu.Lock()
		if l.s.closing {
			l.s.mu.Unlock()
			nc.Close()
			continue
		}
		l.s.conns[tc] = struct{}{}
		l.s.mu.Unlock()
		return tc, nil
	}
}

type trackedConn struct {
	net.Conn
	s    *Server
	once sync.Once
}

func (c *trackedConn) Close() error {
	err := c.Conn.Close()
	c.once.Do(func() {
		s := c.s
		s.mu.Lock()
		delete(s.conns, c)
		if s.closing && len(s.conns) == 0 {
			close(s.drained)
		}
		s.mu.Unlock()
	})
	return err
}
