package server

import (
	"bufio"
	"context"
	"io"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/standalone"
	"github.com/rlserver/rlserver/status"
)

// slotBackend is a standalone backend that owns hash slots: a fake
// SlotRouter over a status.Topology, which records every key that reaches
// the backend, so tests can tell a redirected command never did.
type slotBackend struct {
	*standalone.Backend
	topo status.Topology
	keys map[int][]string // CountKeysInSlot / KeysInSlot answers, by slot

	mu      sync.Mutex
	reached []string // keys of the requests Do and DoPolicies got
}

// Route serves the slots whose range this node leads, redirects those led
// by another node with an address, and answers CLUSTERDOWN for the rest.
func (b *slotBackend) Route(slot int) (bool, string) {
	for _, r := range b.topo.Ranges {
		if slot < r.Start || slot > r.End {
			continue
		}
		if r.Leader == b.topo.MyID {
			return true, ""
		}
		for _, n := range b.topo.Nodes {
			if n.ID == r.Leader && n.Addr != "" {
				return false, n.Addr
			}
		}
	}
	return false, ""
}

func (b *slotBackend) Topology() status.Topology { return b.topo }

func (b *slotBackend) CountKeysInSlot(_ context.Context, slot int) (int, error) {
	return len(b.keys[slot]), nil
}

func (b *slotBackend) KeysInSlot(_ context.Context, slot, count int) ([]string, error) {
	k := b.keys[slot]
	return k[:min(count, len(k))], nil
}

func (b *slotBackend) record(reqs []engine.Request) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range reqs {
		b.reached = append(b.reached, string(r.Key))
	}
}

func (b *slotBackend) Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error {
	b.record(reqs)
	return b.Backend.Do(ctx, reqs, res)
}

func (b *slotBackend) DoPolicies(ctx context.Context, reqs []engine.Request, names [][]byte, res []engine.Result) error {
	b.record(reqs)
	return b.Backend.DoPolicies(ctx, reqs, names, res)
}

// reachedKeys returns the keys that reached the backend, and forgets them.
func (b *slotBackend) reachedKeys() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := b.reached
	b.reached = nil
	return k
}

var _ SlotRouter = (*slotBackend)(nil)

// newSlotBackend makes a slotBackend with a fresh engine and policy store.
func newSlotBackend(t testing.TB, topo status.Topology) *slotBackend {
	eng := engine.New(4)
	t.Cleanup(eng.Close)
	return &slotBackend{Backend: standalone.New(eng, policy.NewStore()), topo: topo, keys: map[int][]string{}}
}

// serveBackend serves backend, declared as a slot router with policies,
// on a free loopback port until the test ends.
func serveBackend(t testing.TB, backend *slotBackend) (string, *Server) {
	t.Helper()
	return serveConfig(t, Config{Router: backend, Policies: backend}, backend)
}

// serveConfig serves backend with cfg (its capabilities declared there)
// on a free loopback port until the test ends.
func serveConfig(t testing.TB, cfg Config, backend Backend) (string, *Server) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.Version = "test"
	srv := New(cfg, backend)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		srv.Shutdown(ctx)
		<-done
	})
	return ln.Addr().String(), srv
}

// threeNodes is a topology like a three-master Redis cluster, seen from
// node a, which leads slots 0-5460; b leads 5461-10922 in two ranges (two
// groups); 10923-16383 is c's.
func threeNodes() status.Topology {
	id := func(c byte) string { return strings.Repeat(string(c), 40) }
	return status.Topology{
		MyID:  id('a'),
		Epoch: 7,
		Nodes: []status.TopologyNode{
			{ID: id('a'), Name: "a", Addr: "127.0.0.1:7001", RaftAddr: "127.0.0.1:17001", Myself: true},
			{ID: id('b'), Name: "b", Addr: "127.0.0.1:7002", RaftAddr: "127.0.0.1:17002"},
			{ID: id('c'), Name: "c", Addr: "127.0.0.1:7003", RaftAddr: "127.0.0.1:17003"},
		},
		Ranges: []status.SlotRange{
			{Start: 0, End: 5460, Group: 1, Leader: id('a')},
			{Start: 5461, End: 8000, Group: 2, Leader: id('b')},
			{Start: 8001, End: 10922, Group: 3, Leader: id('b')},
			{Start: 10923, End: 16383, Group: 4, Leader: id('c')},
		},
	}
}

// keyIn returns a key of the form prefix+n whose slot is in [lo, hi].
func keyIn(prefix string, lo, hi int) string {
	for n := 0; ; n++ {
		k := prefix + strconv.Itoa(n)
		if s := slots.OfString(k); s >= lo && s <= hi {
			return k
		}
	}
}

// value is one RESP2 or RESP3 reply: its type byte, its text (simple,
// bulk, verbatim without "txt:", error, integer, double) or its elements
// (arrays, sets, maps with keys and values alternating, pushes), and its
// bytes on the wire.
type value struct {
	typ   byte
	text  string
	elems []value
	raw   string
}

// readValue reads one reply of either protocol.
func readValue(t testing.TB, r *bufio.Reader) value {
	t.Helper()
	line, err := r.ReadString('\n')
	if err != nil {
		t.Fatalf("read: %v", err)
	}
	v := value{typ: line[0], raw: line}
	body := strings.TrimSuffix(line[1:], "\r\n")
	switch v.typ {
	case '+', '-', ':', ',', '#', '_', '(':
		v.text = body
	case '$', '=', '!':
		n, _ := strconv.Atoi(body)
		if n < 0 {
			v.typ = '_'
			break
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(r, buf); err != nil {
			t.Fatal(err)
		}
		v.raw += string(buf)
		v.text = string(buf[:n])
		if v.typ == '=' {
			v.text = v.text[4:]
		}
	case '*', '~', '%', '>':
		n, _ := strconv.Atoi(body)
		if v.typ == '%' {
			n *= 2
		}
		for range max(n, 0) {
			e := readValue(t, r)
			v.raw += e.raw
			v.elems = append(v.elems, e)
		}
	default:
		t.Fatalf("unexpected reply line %q", line)
	}
	return v
}

// respConn is a raw connection speaking proto (2 or 3).
type respConn struct {
	t testing.TB
	c net.Conn
	r *bufio.Reader
}

func dialProto(t testing.TB, addr string, proto int) *respConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(20 * time.Second))
	rc := &respConn{t: t, c: c, r: bufio.NewReader(c)}
	if v := rc.do("HELLO", strconv.Itoa(proto)); v.typ == '-' {
		t.Fatalf("HELLO %d: %s", proto, v.text)
	}
	return rc
}

func (rc *respConn) send(args ...string) {
	rc.t.Helper()
	if _, err := io.WriteString(rc.c, encode(args...)); err != nil {
		rc.t.Fatal(err)
	}
}

func (rc *respConn) do(args ...string) value {
	rc.t.Helper()
	rc.send(args...)
	return readValue(rc.t, rc.r)
}

// String renders v compactly: its type byte, then its text or its
// elements in brackets.
func (v value) String() string {
	switch v.typ {
	case '*', '~', '%', '>':
		parts := make([]string, len(v.elems))
		for i, e := range v.elems {
			parts[i] = e.String()
		}
		return string(v.typ) + "[" + strings.Join(parts, " ") + "]"
	}
	return string(v.typ) + v.text
}

// infoFields parses an INFO-style text into its fields.
func infoFields(text string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(text, "\r\n") {
		if k, v, ok := strings.Cut(l, ":"); ok {
			m[k] = v
		}
	}
	return m
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
