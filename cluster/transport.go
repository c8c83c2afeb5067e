package cluster

import (
	"crypto/tls"
	"errors"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port per node carries both Raft's RPCs and forwarded commands.
// Every connection starts with one byte naming its protocol, so a follower
// needs no second address for its leader: the leader's Raft address is it.
const (
	protoRaft    byte = 'R'
	protoForward byte = 'F'
)

// With TLS (Config.TLS), the listener is a TLS listener and both kinds of
// connection are TLS: the protocol byte is the first byte of plaintext.
// The handshake runs under classify's read deadline, off the accept loop.

// mux accepts connections on the Raft address and hands them to Raft (as its
// StreamLayer) or to the forward server by their first byte.
type mux struct {
	ln        net.Listener
	advertise net.Addr
	dialTLS   *tls.Config // nil: plain TCP to peers
	raftCh    chan net.Conn
	forward   func(net.Conn)
	closed    chan struct{}
	once      sync.Once
}

func newMux(ln net.Listener, advertise net.Addr, forward func(net.Conn), dialTLS *tls.Config) *mux {
	m := &mux{ln: ln, advertise: advertise, dialTLS: dialTLS, raftCh: make(chan net.Conn), forward: forward, closed: make(chan struct{})}
	go m.acceptLoop()
	return m
}

func (m *mux) acceptLoop() {
	for {
		c, err := m.ln.Accept()
		if err != nil {
			select {
			case <-m.closed:
				return
			default:
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			if errors.Is(err, net.ErrClosed) {
				return
			}
			time.Sleep(10 * time.Millisecond)
			continue
		}
		go m.classify(c)
	}
}

// classify reads the protocol byte off its own goroutine, so a silent
// client cannot hold up accepting others.
func (m *mux) classify(c net.Conn) {
	var b [1]byte
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if _, err := c.Read(b[:]); err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	switch b[0] {
	case protoRaft:
		select {
		case m.raftCh <- c:
		case <-m.closed:
			c.Close()
		}
	case protoForward:
		m.forward(c)
	default:
		c.Close()
	}
}

// Accept returns the next Raft connection (raft.StreamLayer).
func (m *mux) Accept() (net.Conn, error) {
	select {
	case c := <-m.raftCh:
		return c, nil
	case <-m.closed:
		return nil, net.ErrClosed
	}
}

// Close stops accepting.
func (m *mux) Close() error {
	m.once.Do(func() {
		close(m.closed)
		m.ln.Close()
	})
	return nil
}

// Addr is the advertised Raft address.
func (m *mux) Addr() net.Addr { return m.advertise }

// Dial opens a Raft connection to a peer (raft.StreamLayer).
func (m *mux) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialProto(string(address), timeout, protoRaft, m.dialTLS)
}

// dialProto connects to a peer (over TLS when tlsCfg is set) and sends the
// protocol byte, all within timeout.
func dialProto(addr string, timeout time.Duration, proto byte, tlsCfg *tls.Config) (net.Conn, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
	}
	c.SetDeadline(time.Now().Add(timeout))
	if tlsCfg != nil {
		tc := tls.Client(c, tlsCfg)
		if err := tc.Handshake(); err != nil {
			c.Close()
			return nil, err
		}
		c = tc
	}
	if _, err := c.Write([]byte{proto}); err != nil {
		c.Close()
		return nil, err
	}
	c.SetDeadline(time.Time{})
	return c, nil
}

// advertiseAddr is a net.Addr for an advertised host:port that may be a
// name (a Kubernetes pod's DNS name, for example).
type advertiseAddr string

func (a advertiseAddr) Network() string { return "tcp" }
func (a advertiseAddr) String() string  { return string(a) }
