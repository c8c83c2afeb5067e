package cluster

import (
	"bufio"
	"crypto/tls"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"time"

	"github.com/hashicorp/raft"
)

// One TCP port per process carries Raft's RPCs and forwarded commands of
// every Raft group the process hosts. Every connection starts with a
// preamble naming its group and protocol, so a follower needs no second
// address for its leader: the leader's Raft address is it. Group 0 (the
// only group of an unsharded cluster, the meta group of a sharded one)
// sends the protocol byte alone, as nodes did before groups existed;
// group g > 0 sends 'G', uvarint(g), then the protocol byte.
const (
	protoRaft    byte = 'R'
	protoForward byte = 'F'
	protoGroup   byte = 'G'
)

// With TLS (Config.TLS), the listener is a TLS listener and both kinds of
// connection are TLS: the preamble is the first plaintext.
// The handshake runs under classify's read deadline, off the accept loop.

// Transport accepts connections on a process's Raft address and hands
// each to its group: to that group's Raft (through the group's stream
// layer) or to its forward server, by the preamble. Nodes of a sharded
// process share one (Config.Transport); a node without one opens its own.
type Transport struct {
	ln        net.Listener
	advertise net.Addr
	dialTLS   *tls.Config // nil: plain TCP to peers
	closed    chan struct{}
	once      sync.Once

	mu     sync.Mutex
	groups map[uint32]*groupStream
}

// Listen opens a Transport on addr (host:port). advertise is the address
// peers dial (default: the bound address, which must then be one they can
// dial). tlsCfg is the listener's side of mutual TLS and dialTLS the
// dialling side; both or neither.
func Listen(addr, advertise string, tlsCfg, dialTLS *tls.Config) (*Transport, error) {
	if (tlsCfg == nil) != (dialTLS == nil) {
		return nil, errors.New("cluster: TLS and DialTLS go together")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cluster: raft address: %w", err)
	}
	if advertise == "" {
		advertise = ln.Addr().String()
		if host, _, _ := net.SplitHostPort(advertise); host == "" || net.ParseIP(host).IsUnspecified() {
			ln.Close()
			return nil, fmt.Errorf("cluster: raft address %s is not one peers can dial; set an advertised address", advertise)
		}
	}
	if tlsCfg != nil {
		ln = tls.NewListener(ln, tlsCfg)
	}
	t := &Transport{ln: ln, advertise: advertiseAddr(advertise), dialTLS: dialTLS,
		closed: make(chan struct{}), groups: make(map[uint32]*groupStream)}
	go t.acceptLoop()
	return t, nil
}

// Addr is the advertised Raft address.
func (t *Transport) Addr() string { return t.advertise.String() }

// ListenAddr is the bound address.
func (t *Transport) ListenAddr() net.Addr { return t.ln.Addr() }

// Close stops accepting; the groups' streams see net.ErrClosed.
func (t *Transport) Close() error {
	t.once.Do(func() {
		close(t.closed)
		t.ln.Close()
	})
	return nil
}

// register gives group its stream layer; forward serves its forward
// connections. A group is registered once at a time.
func (t *Transport) register(group uint32, forward func(net.Conn)) (*groupStream, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.groups[group]; ok {
		return nil, fmt.Errorf("cluster: group %d is already open on this transport", group)
	}
	g := &groupStream{t: t, group: group, raftCh: make(chan net.Conn), forward: forward, closed: make(chan struct{})}
	t.groups[group] = g
	return g, nil
}

func (t *Transport) lookup(group uint32) *groupStream {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.groups[group]
}

func (t *Transport) acceptLoop() {
	for {
		c, err := t.ln.Accept()
		if err != nil {
			select {
			case <-t.closed:
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
		go t.classify(c)
	}
}

// classify reads the preamble off its own goroutine, so a silent client
// cannot hold up accepting others. A connection for a group this process
// does not host (yet) is closed: its dialler retries.
func (t *Transport) classify(c net.Conn) {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	group, proto, err := readPreamble(c)
	if err != nil {
		c.Close()
		return
	}
	c.SetReadDeadline(time.Time{})
	g := t.lookup(group)
	if g == nil {
		c.Close()
		return
	}
	switch proto {
	case protoRaft:
		select {
		case g.raftCh <- c:
		case <-g.closed:
			c.Close()
		case <-t.closed:
			c.Close()
		}
	case protoForward:
		g.forward(c)
	default:
		c.Close()
	}
}

// readPreamble reads a connection's group and protocol byte one byte at a
// time (nothing past the preamble may be consumed).
func readPreamble(c net.Conn) (group uint32, proto byte, err error) {
	var b [1]byte
	if _, err = io.ReadFull(c, b[:]); err != nil {
		return
	}
	if b[0] != protoGroup {
		return 0, b[0], nil
	}
	var v uint64
	for shift := 0; ; shift += 7 {
		if shift > 28 {
			return 0, 0, errors.New("bad group preamble")
		}
		if _, err = io.ReadFull(c, b[:]); err != nil {
			return
		}
		v |= uint64(b[0]&0x7f) << shift
		if b[0] < 0x80 {
			break
		}
	}
	if v == 0 || v > 1<<31 {
		return 0, 0, errors.New("bad group preamble")
	}
	if _, err = io.ReadFull(c, b[:]); err != nil {
		return
	}
	return uint32(v), b[0], nil
}

// preamble is what a connection to group for proto starts with.
func preamble(group uint32, proto byte) []byte {
	if group == 0 {
		return []byte{proto}
	}
	return append(binary.AppendUvarint([]byte{protoGroup}, uint64(group)), proto)
}

// groupStream is one group's raft.StreamLayer over the shared Transport.
type groupStream struct {
	t       *Transport
	group   uint32
	raftCh  chan net.Conn
	forward func(net.Conn)
	closed  chan struct{}
	once    sync.Once
}

// Accept returns the next Raft connection for this group.
func (g *groupStream) Accept() (net.Conn, error) {
	select {
	case c := <-g.raftCh:
		return c, nil
	case <-g.closed:
		return nil, net.ErrClosed
	case <-g.t.closed:
		return nil, net.ErrClosed
	}
}

// Close unregisters the group; the Transport keeps serving the others.
func (g *groupStream) Close() error {
	g.once.Do(func() {
		close(g.closed)
		g.t.mu.Lock()
		if g.t.groups[g.group] == g {
			delete(g.t.groups, g.group)
		}
		g.t.mu.Unlock()
	})
	return nil
}

// Addr is the advertised Raft address.
func (g *groupStream) Addr() net.Addr { return g.t.advertise }

// Dial opens a Raft connection to this group on a peer (raft.StreamLayer).
func (g *groupStream) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return dialProto(string(address), timeout, preamble(g.group, protoRaft), g.t.dialTLS)
}

// dialProto connects to a peer (over TLS when tlsCfg is set) and sends the
// preamble, all within timeout.
func dialProto(addr string, timeout time.Duration, pre []byte, tlsCfg *tls.Config) (net.Conn, error) {
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
	if _, err := c.Write(pre); err != nil {
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
