package cluster

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
)

// holdProxy stands in front of a node's Raft address. Raft connections pass
// straight through; on forward connections (first byte 'F') the bytes from
// the dialler can be held and delivered later, as TCP does after a cut link
// heals.
type holdProxy struct {
	ln     net.Listener
	ready  chan struct{}
	target string // set once, before ready is closed

	mu    sync.Mutex
	cond  *sync.Cond
	held  bool
	conns []net.Conn
}

func newHoldProxy(t *testing.T) *holdProxy {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &holdProxy{ln: ln, ready: make(chan struct{})}
	p.cond = sync.NewCond(&p.mu)
	t.Cleanup(p.close)
	go p.accept()
	return p
}

func (p *holdProxy) addr() string { return p.ln.Addr().String() }

func (p *holdProxy) setTarget(addr string) {
	p.target = addr
	close(p.ready)
}

func (p *holdProxy) hold(on bool) {
	p.mu.Lock()
	p.held = on
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *holdProxy) close() {
	p.ln.Close()
	p.mu.Lock()
	p.held = false
	for _, c := range p.conns {
		c.Close()
	}
	p.mu.Unlock()
	p.cond.Broadcast()
}

func (p *holdProxy) track(c net.Conn) {
	p.mu.Lock()
	p.conns = append(p.conns, c)
	p.mu.Unlock()
}

func (p *holdProxy) accept() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		go p.serve(c)
	}
}

func (p *holdProxy) serve(c net.Conn) {
	p.track(c)
	<-p.ready
	s, err := net.Dial("tcp", p.target)
	if err != nil {
		c.Close()
		return
	}
	p.track(s)
	var first [1]byte
	if _, err := io.ReadFull(c, first[:]); err != nil {
		c.Close()
		s.Close()
		return
	}
	s.Write(first[:])
	go func() { io.Copy(c, s); c.Close() }()
	if first[0] != protoForward {
		io.Copy(s, c)
		s.Close()
		return
	}
	buf := make([]byte, 64<<10)
	for {
		k, err := c.Read(buf)
		if k > 0 {
			p.mu.Lock()
			for p.held {
				p.cond.Wait()
			}
			p.mu.Unlock()
			if _, werr := s.Write(buf[:k]); werr != nil {
				break
			}
		}
		if err != nil {
			break
		}
	}
	s.Close()
}

// proxiedCluster is a three-node cluster whose nodes advertise (and so are
// dialled at) a holdProxy each.
func proxiedCluster(t *testing.T, commit time.Duration) (*tcluster, map[string]*holdProxy) {
	proxies := map[string]*holdProxy{}
	c := &tcluster{t: t, tweak: func(cfg *Config) {
		cfg.RaftAdvertise = proxies[cfg.NodeID].addr()
		cfg.CommitTimeout = commit
	}}
	for _, id := range []string{"n1", "n2", "n3"} {
		proxies[id] = newHoldProxy(t)
		c.nodes = append(c.nodes, &tnode{id: id, dir: t.TempDir(), addr: "127.0.0.1:0"})
	}
	t.Cleanup(func() {
		for _, tn := range c.nodes {
			tn.stop()
		}
	})
	for i, tn := range c.nodes {
		c.start(tn, i == 0)
		proxies[tn.id].setTarget(tn.n.mux.ln.Addr().String())
		if i == 0 {
			c.leader()
			continue
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err := c.nodes[0].n.Join(ctx, tn.id, tn.addr)
		cancel()
		if err != nil {
			t.Fatalf("join %s: %v", tn.id, err)
		}
	}
	c.waitAllSeeLeader()
	return c, proxies
}

// remaining peeks (cost 0, through the log on tn) at a capacity-1 bucket.
func remaining(t *testing.T, tn *tnode, key string) int64 {
	t.Helper()
	return do(t, tn, allow(t, key, 1, 0.001, 0)).Remaining
}

// TestLateForwardIsNeverApplied pins issue 23's late forward: a batch sent
// through a follower whose bytes reach the leader only after the client got
// UNKNOWN (held in a proxy, as TCP retransmission holds them across a cut
// link) used to be applied seconds later. The leader now refuses it: it was
// never appended, and the key is untouched.
func TestLateForwardIsNeverApplied(t *testing.T) {
	const commit = 500 * time.Millisecond
	c, proxies := proxiedCluster(t, commit)
	l := c.leader()
	f := c.nodes[0]
	if f == l {
		f = c.nodes[1]
	}
	do(t, f, allow(t, "warm", 5, 1, 1)) // the forward connection is up

	proxies[l.id].hold(true)
	start := time.Now()
	res := make([]engine.Result, 1)
	err := f.n.Do(context.Background(), []engine.Request{allow(t, "late", 1, 0.001, 1)}, res)
	if !errors.Is(err, ErrUnknownOutcome) {
		t.Fatalf("through a follower cut off from the leader: %v, want UNKNOWN", err)
	}
	t.Logf("UNKNOWN after %v", time.Since(start).Round(time.Millisecond))
	// Deliver well after the deadline (the client's wait plus the clock
	// allowance): the fault, not an assertion.
	time.Sleep(time.Until(start.Add(commit + forwardClockSkew + 500*time.Millisecond)))
	proxies[l.id].hold(false)

	waitFor(t, 10*time.Second, "the late batch refused or applied", func() bool {
		return l.n.LateForwards() > 0 || remaining(t, l, "late") != 1
	})
	if got := remaining(t, l, "late"); got != 1 {
		t.Fatalf("a forwarded batch delivered past its deadline was applied: remaining %d, want 1", got)
	}
	if got := l.n.LateForwards(); got != 1 {
		t.Fatalf("late forwards counted: %d, want 1", got)
	}
	if got := l.n.ClusterStatus().LateForwards; got != 1 {
		t.Fatalf("the cluster status (INFO, metrics) shows %d late forwards, want 1", got)
	}
	// The forward connection still serves.
	if r := do(t, f, allow(t, "after", 1, 0.001, 1)); !r.Allowed {
		t.Fatalf("after the late batch: %+v", r)
	}
	c.converged()
}

// TestForwardDeadlineOnTheLeader feeds the leader msgBatch3 frames
// directly: one sent longer ago than its ttl (plus the clock allowance) is
// refused with statusLate and appends nothing; a timely one is applied.
// Then a forwarded call that reaches the leader's dispatch after its
// deadline (it waited in the leader's queue) is refused, certainly not
// appended, while a timely call in the same batch is applied.
func TestForwardDeadlineOnTheLeader(t *testing.T) {
	c := newCluster(t, 1, nil)
	l := c.leader()
	// A command through the log first: the new leader's own first entry is
	// behind it, so the log index moves only for what the test sends.
	do(t, l, allow(t, "warm", 5, 1, 1))
	p, err := dialPeer(raft.ServerAddress(l.addr), time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	batch := func(sent time.Time, ttl time.Duration, key string) []byte {
		b := appendBatchDeadline(nil, sent, ttl)
		b = append(b, 1)
		return appendRequests2(b, []engine.Request{allow(t, key, 1, 0.001, 1)}, nil)
	}

	before := l.n.raft.LastIndex()
	r, err := p.call(ctx, msgBatch3, batch(time.Now().Add(-10*time.Second), time.Second, "old"))
	if err != nil || r.status != statusLate {
		t.Fatalf("batch sent 10s ago with a 1s ttl: status %d, %v; want statusLate", r.status, err)
	}
	if got := l.n.raft.LastIndex(); got != before {
		t.Fatalf("late batch appended: last index %d -> %d", before, got)
	}
	if got := l.n.LateForwards(); got != 1 {
		t.Fatalf("late forwards: %d, want 1", got)
	}
	if got := remaining(t, l, "old"); got != 1 {
		t.Fatalf("late batch applied: remaining %d", got)
	}

	r, err = p.call(ctx, msgBatch3, batch(time.Now(), 2*time.Second, "fresh"))
	if err != nil || r.status != statusOK {
		t.Fatalf("timely batch: status %d, %v", r.status, err)
	}
	if res, err := decodeResults(r.body); err != nil || len(res) != 1 || !res[0].Allowed {
		t.Fatalf("timely batch results: %+v %v", res, err)
	}

	// The leader's queue: dispatch the calls as the batcher does, holding
	// an in-flight slot (the idle batcher holds the other).
	mk := func(key string, deadline time.Time) *call {
		req := allow(t, key, 1, 0.001, 1)
		chunk := appendRequests2(nil, []engine.Request{req}, nil)
		c := &call{chunk: chunk, n: 1, localOnly: true, deadline: deadline, done: make(chan callResult, 1)}
		c.state.Store(callTaken)
		return c
	}
	late := mk("queued-late", time.Now().Add(-time.Millisecond))
	timely := mk("queued-timely", time.Now().Add(time.Minute))
	before = l.n.raft.LastIndex()
	l.n.sem <- struct{}{}
	l.n.dispatch([]*call{late, timely}, 2, len(late.chunk)+len(timely.chunk))
	if r := <-late.done; !errors.Is(r.err, errLate) || !retryable(r.err) {
		t.Fatalf("call past its deadline: %v, want errLate (retryable)", r.err)
	}
	if r := <-timely.done; r.err != nil || !r.res[r.off].Allowed {
		t.Fatalf("timely call: %+v", r)
	}
	if got := l.n.raft.LastIndex(); got != before+1 {
		t.Fatalf("last index %d -> %d, want one entry (the timely call)", before, got)
	}
	if got := remaining(t, l, "queued-late"); got != 1 {
		t.Fatalf("call past its deadline applied: remaining %d", got)
	}
	if got := l.n.LateForwards(); got != 2 {
		t.Fatalf("late forwards: %d, want 2", got)
	}
}

// TestForwardDeadlineFallsBackForOlderLeader: a leader of an older build
// answers msgBatch3 with statusBadRequest (it appended nothing); the
// follower then sends the same batch as msgBatch2, and keeps doing so on
// that connection.
func TestForwardDeadlineFallsBackForOlderLeader(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var mu sync.Mutex
	var seen []byte       // message types received
	var payloads [][]byte // their payloads
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		var proto [1]byte
		if _, err := io.ReadFull(c, proto[:]); err != nil {
			return
		}
		for {
			typ, id, payload, err := readFrame(c)
			if err != nil {
				return
			}
			mu.Lock()
			seen = append(seen, typ)
			payloads = append(payloads, payload)
			mu.Unlock()
			st, body := statusBadRequest, []byte(nil)
			if typ == msgBatch2 {
				st, body = statusOK, appendResults(nil, []engine.Result{{Allowed: true, Limit: 1}})
			}
			c.Write(appendFrame(nil, msgReply, id, append([]byte{st}, body...)))
		}
	}()
	p, err := dialPeer(raft.ServerAddress(ln.Addr().String()), time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	n := &Node{log: testConfigLogger()}
	body := appendBatchDeadline(nil, time.Now(), time.Second)
	hdr := len(body)
	body = appendRequests2(append(body, 1), []engine.Request{allow(t, "k", 1, 1, 1)}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for range 2 {
		reply, err := n.callBatch(ctx, p, body, hdr)
		if err != nil {
			t.Fatal(err)
		}
		if res, err := decodeResults(reply); err != nil || len(res) != 1 || !res[0].Allowed {
			t.Fatalf("results %+v %v", res, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if string(seen) != string([]byte{msgBatch3, msgBatch2, msgBatch2}) {
		t.Fatalf("message types sent: %v, want [msgBatch3 msgBatch2 msgBatch2]", seen)
	}
	if string(payloads[1]) != string(body[hdr:]) {
		t.Fatalf("fallback payload %x, want the msgBatch2 body %x", payloads[1], body[hdr:])
	}
}

func testConfigLogger() *slog.Logger {
	cfg := Config{}
	cfg.setDefaults()
	return cfg.Logger
}
