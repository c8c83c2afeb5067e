package cluster

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"io"
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

// Frames on a forward connection (forward.go): uint32 big-endian length of
// the rest, byte type, uint64 id, payload. The port is reachable before any
// authentication (without TLS there is none), so a frame's announced
// length is a claim, not a reservation: the payload buffer starts at
// frameChunk and doubles only as bytes actually arrive, so memory is at
// most about twice what the peer really sent (a peer that announces 64 MiB
// and sends nothing costs one chunk), and a frame that has started must be
// complete within the reader's timeout or the connection is closed.
// Between frames a connection may idle without limit (forward connections
// are persistent).
const (
	maxFrame            = 64 << 20
	frameChunk          = 64 << 10
	defaultFrameTimeout = 30 * time.Second
)

var errFrameTooLarge = errors.New("frame too large")

// frameReader reads frames off one connection.
type frameReader struct {
	c       net.Conn
	r       *bufio.Reader
	timeout time.Duration
}

func newFrameReader(c net.Conn, timeout time.Duration) *frameReader {
	if timeout <= 0 {
		timeout = defaultFrameTimeout
	}
	return &frameReader{c: c, r: bufio.NewReaderSize(c, frameChunk), timeout: timeout}
}

// next waits (without a deadline) for the next frame to start, then reads
// it whole within the timeout. The payload is freshly allocated.
func (fr *frameReader) next() (typ byte, id uint64, payload []byte, err error) {
	if _, err = fr.r.Peek(1); err != nil {
		return
	}
	// A frame already buffered whole needs no deadline (the common case:
	// the deadline costs a timer update per frame).
	buffered := false
	if b := fr.r.Buffered(); b >= 4 {
		hdr, _ := fr.r.Peek(4)
		buffered = 4+int(binary.BigEndian.Uint32(hdr)) <= b
	}
	if !buffered {
		fr.c.SetReadDeadline(time.Now().Add(fr.timeout))
		defer fr.c.SetReadDeadline(time.Time{})
	}
	return readFrame(fr.r)
}

// readFrame reads one frame from r; the payload is freshly allocated.
func readFrame(r io.Reader) (typ byte, id uint64, payload []byte, err error) {
	var hdr [13]byte
	if _, err = io.ReadFull(r, hdr[:4]); err != nil {
		return
	}
	n := binary.BigEndian.Uint32(hdr[:4])
	if n < 9 || n > maxFrame {
		return 0, 0, nil, errFrameTooLarge
	}
	if _, err = io.ReadFull(r, hdr[4:13]); err != nil {
		return
	}
	typ = hdr[4]
	id = binary.BigEndian.Uint64(hdr[5:13])
	payload, err = readPayload(r, int(n-9))
	return
}

// readPayload reads n bytes into a buffer that starts at frameChunk and
// doubles (up to n) each time it fills, so its size follows the bytes
// received rather than the length announced.
func readPayload(r io.Reader, n int) ([]byte, error) {
	buf := make([]byte, 0, min(n, frameChunk))
	for len(buf) < n {
		if len(buf) == cap(buf) {
			grown := make([]byte, len(buf), min(n, 2*cap(buf)))
			copy(grown, buf)
			buf = grown
		}
		m, err := io.ReadFull(r, buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+m]
		if err != nil {
			return nil, err
		}
	}
	return buf, nil
}
