package cluster

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/cluster/internal/codec"
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
		proxies[tn.id].setTarget(tn.n.transport.ln.Addr().String())
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

// TestForwardDeadlineOnTheLeader feeds the leader msgBatch frames
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
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	batch := func(sent time.Time, ttl time.Duration, key string) []byte {
		b := appendBatchDeadline(nil, sent, ttl)
		b = append(b, 1)
		return entry.AppendRequests(b, []engine.Request{allow(t, key, 1, 0.001, 1)}, nil)
	}

	before := l.n.raft.LastIndex()
	r, err := p.call(ctx, msgBatch, batch(time.Now().Add(-10*time.Second), time.Second, "old"))
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

	r, err = p.call(ctx, msgBatch, batch(time.Now(), 2*time.Second, "fresh"))
	if err != nil || r.status != statusOK {
		t.Fatalf("timely batch: status %d, %v", r.status, err)
	}
	if res, err := decodeResults(r.body); err != nil || len(res) != 1 || !res[0].Allowed {
		t.Fatalf("timely batch results: %+v %v", res, err)
	}

	// The leader's queue: calls as a forwarded batch queues them, one
	// already past its deadline when the batcher takes it.
	mk := func(key string, deadline time.Time) *call {
		req := allow(t, key, 1, 0.001, 1)
		chunk := entry.AppendRequests(nil, []engine.Request{req}, nil)
		return &call{chunk: chunk, n: 1, localOnly: true, deadline: deadline, done: make(chan callResult, 1)}
	}
	late := mk("queued-late", time.Now().Add(-time.Millisecond))
	timely := mk("queued-timely", time.Now().Add(time.Minute))
	before = l.n.raft.LastIndex()
	l.n.calls <- late
	l.n.calls <- timely
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
// answers msgBatch with statusBadRequest (it appended nothing); the
// follower then sends the same batch as msgBatchNoDeadline, and keeps doing so on
// that connection.
func TestForwardDeadlineFallsBackForOlderLeader(t *testing.T) {
	p, sent := fakeLeader(t, func(typ byte) (byte, []byte) {
		if typ == msgBatchNoDeadline {
			return statusOK, appendResults(nil, []engine.Result{{Allowed: true, Limit: 1}})
		}
		return statusBadRequest, nil
	})
	n := &Node{log: testConfigLogger()}
	body := appendBatchDeadline(nil, time.Now(), time.Second)
	hdr := len(body)
	body = entry.AppendRequests(append(body, 1), []engine.Request{allow(t, "k", 1, 1, 1)}, nil)
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
	seen, payloads := sent()
	if string(seen) != string([]byte{msgBatch, msgBatchNoDeadline, msgBatchNoDeadline}) {
		t.Fatalf("message types sent: %v, want [msgBatch msgBatchNoDeadline msgBatchNoDeadline]", seen)
	}
	if string(payloads[1]) != string(body[hdr:]) {
		t.Fatalf("fallback payload %x, want the msgBatchNoDeadline body %x", payloads[1], body[hdr:])
	}
}

func testConfigLogger() *slog.Logger {
	cfg := Config{}
	cfg.setDefaults()
	return cfg.Logger
}

// envelope is a msgDeadline body: inner message typ with body, sent at
// sent with ttl.
func envelope(sent time.Time, ttl time.Duration, typ byte, body []byte) []byte {
	b := append(appendBatchDeadline(nil, sent, ttl), typ)
	return append(b, body...)
}

// clusterState is what a forwarded request could change on tn: the
// replica's digest (keys, policies, applied index; read locally, nothing
// appended) and the members.
func clusterState(t *testing.T, tn *tnode) string {
	t.Helper()
	ix, dig, err := tn.n.Digest(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	cf := tn.n.raft.GetConfiguration()
	if err := cf.Error(); err != nil {
		t.Fatal(err)
	}
	s := fmt.Sprintf("applied %d digest %.16s members", ix, dig)
	for _, sv := range cf.Configuration().Servers {
		s += " " + string(sv.ID)
	}
	return s
}

// TestForwardDeadlineEveryKind pins issue 23's late forward for every
// forwarded request that appends, not only batches: FLUSHALL, DBSIZE,
// RL.POLICY SET/DEL/LOAD, join, remove (and a batch) in msgDeadline.
// Sent longer ago than their ttl plus the clock allowance, each is refused
// with statusLate: the leader's log index, keys, policies and members are
// unchanged. Timely, each works. Then the same kinds reaching Raft after
// their deadline (they waited on the leader) are refused with errLate,
// again appending nothing.
func TestForwardDeadlineEveryKind(t *testing.T) {
	c := newCluster(t, 3, nil)
	l := c.leader()
	var f *tnode // a follower, for remove
	for _, tn := range c.nodes {
		if tn != l {
			f = tn
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	do(t, l, allow(t, "k", 1, 0.001, 1)) // a flush would give it back
	if err := l.n.SetPolicy(ctx, mustPolicy(t, "keep FIXED 100 600000")); err != nil {
		t.Fatal(err)
	}
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	words := func(line string) [][]string { return [][]string{mustPolicy(t, line).Words()} }
	batch := entry.AppendRequests([]byte{1}, []engine.Request{allow(t, "b", 1, 0.001, 1)}, nil)
	kinds := []struct {
		name string
		typ  byte
		body []byte
	}{
		{"FLUSHALL", msgFlush, nil},
		{"DBSIZE", msgLen, nil},
		{"RL.POLICY SET", msgPolicy, entry.AppendPolicy(entry.PolicySet, words("new FIXED 5 1000"))},
		{"RL.POLICY DEL", msgPolicy, entry.AppendPolicy(entry.PolicyDel, [][]string{{"keep"}})},
		{"RL.POLICY LOAD", msgPolicy, entry.AppendPolicy(entry.PolicyReplace, words("other FIXED 7 1000"))},
		{"join", msgJoin, codec.AppendString(codec.AppendString(nil, "n9"), "127.0.0.1:1")},
		{"remove", msgRemove, codec.AppendString(nil, f.id)},
		{"batch", msgBatchNoDeadline, batch},
	}

	before, state := l.n.raft.LastIndex(), clusterState(t, l)
	for _, k := range kinds {
		r, err := p.call(ctx, msgDeadline, envelope(time.Now().Add(-10*time.Second), time.Second, k.typ, k.body))
		if err != nil || r.status != statusLate {
			t.Fatalf("%s sent 10s ago with a 1s ttl: status %d, %v; want statusLate", k.name, r.status, err)
		}
		if got := l.n.raft.LastIndex(); got != before {
			t.Fatalf("late %s appended: last index %d -> %d", k.name, before, got)
		}
	}
	if got := clusterState(t, l); got != state {
		t.Fatalf("late requests changed the leader:\n%s\nwant\n%s", got, state)
	}
	if got := l.n.LateForwards(); got != int64(len(kinds)) {
		t.Fatalf("late forwards: %d, want %d", got, len(kinds))
	}

	// Reaching Raft late: the deadline passed while the request waited on
	// the leader (here: before the handler runs).
	past := context.WithValue(ctx, deadlineKey{}, time.Now().Add(-time.Millisecond))
	for name, err := range map[string]error{
		"FLUSHALL": func() error { _, err := l.n.applySimple(past, entry.Flush, true); return err }(),
		"DBSIZE":   func() error { _, err := l.n.applySimple(past, entry.Len, true); return err }(),
		"RL.POLICY DEL": func() error {
			_, err := l.n.applyPolicy(past, entry.AppendPolicy(entry.PolicyDel, [][]string{{"keep"}}), true)
			return err
		}(),
		"join":   l.n.changeMembership(past, "n9", "127.0.0.1:1", true),
		"remove": l.n.changeMembership(past, f.id, "", true),
	} {
		if !errors.Is(err, errLate) || statusOf(err) != statusLate {
			t.Fatalf("%s reaching Raft after its deadline: %v, want errLate (statusLate)", name, err)
		}
	}
	if got := l.n.raft.LastIndex(); got != before {
		t.Fatalf("requests past their deadline at Raft appended: last index %d -> %d", before, got)
	}
	if got := clusterState(t, l); got != state {
		t.Fatalf("requests past their deadline at Raft changed the leader:\n%s\nwant\n%s", got, state)
	}

	// Timely: each works.
	timely := func(name string, typ byte, body []byte) []byte {
		t.Helper()
		r, err := p.call(ctx, msgDeadline, envelope(time.Now(), 5*time.Second, typ, body))
		if err != nil || r.status != statusOK {
			t.Fatalf("timely %s: status %d, %v", name, r.status, err)
		}
		return r.body
	}
	members := func() string {
		s := clusterState(t, l)
		return s[strings.Index(s, "members"):]
	}
	if n, k := binary.Uvarint(timely("DBSIZE", msgLen, nil)); k <= 0 || n < 1 {
		t.Fatalf("timely DBSIZE: %d keys (%d), want at least 1", n, k)
	}
	timely("FLUSHALL", msgFlush, nil)
	if got := remaining(t, l, "k"); got != 1 {
		t.Fatalf("after a timely FLUSHALL: remaining %d, want 1", got)
	}
	timely("RL.POLICY SET", kinds[2].typ, kinds[2].body)
	if _, ok := l.n.PolicyStore().Get([]byte("new")); !ok {
		t.Fatal("timely RL.POLICY SET: no policy new")
	}
	if b := timely("RL.POLICY DEL", kinds[3].typ, kinds[3].body); len(b) != 1 || b[0] != policyExisted {
		t.Fatalf("timely RL.POLICY DEL: reply %v, want policyExisted", b)
	}
	timely("RL.POLICY LOAD", kinds[4].typ, kinds[4].body)
	if _, ok := l.n.PolicyStore().Get([]byte("other")); !ok {
		t.Fatal("timely RL.POLICY LOAD: no policy other")
	}
	timely("join", kinds[5].typ, kinds[5].body)
	if got := members(); !strings.Contains(got, " n9") {
		t.Fatalf("timely join: %s", got)
	}
	timely("remove", msgRemove, codec.AppendString(nil, "n9"))
	if got := members(); strings.Contains(got, " n9") {
		t.Fatalf("timely remove: %s", got)
	}
	if res, err := decodeResults(timely("batch", msgBatchNoDeadline, batch)); err != nil || len(res) != 1 || !res[0].Allowed {
		t.Fatalf("timely batch results: %+v %v", res, err)
	}
	c.converged()
}

// TestLateForwardOfEveryKindIsNeverApplied is TestLateForwardIsNeverApplied
// for the forwarded requests other than batches: FLUSHALL, DBSIZE,
// RL.POLICY SET/DEL/LOAD, join and remove sent through a follower whose
// bytes reach the leader only after their clients got UNKNOWN used to be
// applied then. The leader now refuses every one: nothing appended, keys,
// policies and members unchanged.
func TestLateForwardOfEveryKindIsNeverApplied(t *testing.T) {
	const commit = 500 * time.Millisecond
	c, proxies := proxiedCluster(t, commit)
	l := c.leader()
	var f, other *tnode
	for _, tn := range c.nodes {
		switch {
		case tn == l:
		case f == nil:
			f = tn
		default:
			other = tn
		}
	}
	do(t, f, allow(t, "k", 1, 0.001, 1)) // the forward connection is up; a flush would give it back
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	err := l.n.SetPolicy(ctx, mustPolicy(t, "keep FIXED 100 600000"))
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	before, state := l.n.raft.LastIndex(), clusterState(t, l)

	proxies[l.id].hold(true)
	start := time.Now()
	bg := context.Background()
	ops := map[string]func() error{
		"FLUSHALL":       func() error { return f.n.Flush(bg) },
		"DBSIZE":         func() error { _, err := f.n.Len(bg); return err },
		"RL.POLICY SET":  func() error { return f.n.SetPolicy(bg, mustPolicy(t, "new FIXED 5 1000")) },
		"RL.POLICY DEL":  func() error { _, err := f.n.DelPolicy(bg, "keep"); return err },
		"RL.POLICY LOAD": func() error { return f.n.ReplacePolicies(bg, nil) },
		"join":           func() error { return f.n.Join(bg, "n9", "127.0.0.1:1") },
		"remove":         func() error { return f.n.Remove(bg, other.id) },
	}
	errs := make(chan error, len(ops))
	for name, op := range ops {
		go func() {
			if err := op(); !errors.Is(err, ErrUnknownOutcome) {
				errs <- fmt.Errorf("%s through a follower cut off from the leader: %v, want UNKNOWN", name, err)
				return
			}
			errs <- nil
		}()
	}
	for range ops {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	t.Logf("UNKNOWN after %v", time.Since(start).Round(time.Millisecond))
	// Deliver well after the deadline (the clients' wait plus the clock
	// allowance): the fault, not an assertion.
	time.Sleep(time.Until(start.Add(commit + forwardClockSkew + 500*time.Millisecond)))
	proxies[l.id].hold(false)

	waitFor(t, 10*time.Second, "every late request refused or applied", func() bool {
		return l.n.LateForwards() == int64(len(ops)) || l.n.raft.LastIndex() != before
	})
	if got := l.n.raft.LastIndex(); got != before {
		t.Fatalf("requests delivered past their deadline were appended: last index %d -> %d", before, got)
	}
	if got := clusterState(t, l); got != state {
		t.Fatalf("requests delivered past their deadline changed the leader:\n%s\nwant\n%s", got, state)
	}
	// The forward connection still serves.
	ctx, cancel = context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := f.n.Flush(ctx); err != nil {
		t.Fatalf("FLUSHALL after the late requests: %v", err)
	}
	if got := remaining(t, l, "k"); got != 1 {
		t.Fatalf("after FLUSHALL: remaining %d, want 1", got)
	}
	c.converged()
}

// TestForwardEnvelopeFallsBackForOlderLeader: a leader of the build
// before msgDeadline answers it with statusBadRequest (it appended
// nothing); the follower then sends the bare message, and keeps doing so
// on that connection, while its batches still go as msgBatch, which that
// leader knows. The envelope carries the follower's clock and the time
// its caller has left; with none left nothing is sent.
func TestForwardEnvelopeFallsBackForOlderLeader(t *testing.T) {
	p, sentTypes := fakeLeader(t, func(typ byte) (byte, []byte) {
		switch typ {
		case msgLen:
			return statusOK, binary.AppendUvarint(nil, 42)
		case msgBatch:
			return statusOK, appendResults(nil, []engine.Result{{Allowed: true, Limit: 1}})
		}
		return statusBadRequest, nil
	})
	n := &Node{log: testConfigLogger()}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	sent := time.Now()
	for range 2 {
		body, err := n.callDeadline(ctx, p, msgLen, nil)
		if err != nil {
			t.Fatal(err)
		}
		if v, k := binary.Uvarint(body); k <= 0 || v != 42 {
			t.Fatalf("DBSIZE reply %x", body)
		}
	}
	batch := appendBatchDeadline(nil, time.Now(), time.Second)
	hdr := len(batch)
	batch = entry.AppendRequests(append(batch, 1), []engine.Request{allow(t, "k", 1, 1, 1)}, nil)
	if _, err := n.callBatch(ctx, p, batch, hdr); err != nil {
		t.Fatal(err)
	}
	over, stop := context.WithDeadline(context.Background(), time.Now().Add(-time.Millisecond))
	defer stop()
	if _, err := n.callDeadline(over, p, msgLen, nil); !errors.Is(err, errNotLeader) {
		t.Fatalf("with no time left: %v, want errNotLeader (nothing sent)", err)
	}
	seen, payloads := sentTypes()
	if string(seen) != string([]byte{msgDeadline, msgLen, msgLen, msgBatch}) {
		t.Fatalf("message types sent: %v, want [msgDeadline msgLen msgLen msgBatch]", seen)
	}
	d := codec.Reader{B: payloads[0]}
	at, ttl, inner := time.Unix(0, d.Varint()), time.Duration(d.Uvarint()), d.Byte()
	if d.Err != nil || inner != msgLen || len(d.B) != 0 {
		t.Fatalf("envelope %x: inner type %d, rest %x", payloads[0], inner, d.B)
	}
	dl, _ := ctx.Deadline()
	if at.Before(sent.Add(-time.Second)) || at.After(time.Now()) || at.Add(ttl).Sub(dl).Abs() > 100*time.Millisecond {
		t.Fatalf("envelope sent at %v (test started %v), ttl %v; want sent + ttl = the caller's deadline %v", at, sent, ttl, dl)
	}
}

// fakeLeader serves one forward connection as a leader of an older build
// would: answer gives each message type's status and body. It returns a
// connection to it and a function that reports the message types and
// payloads received so far.
func fakeLeader(t *testing.T, answer func(typ byte) (byte, []byte)) (*peerConn, func() ([]byte, [][]byte)) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
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
			st, body := answer(typ)
			c.Write(appendFrame(nil, msgReply, id, append([]byte{st}, body...)))
		}
	}()
	p, err := dialPeer(raft.ServerAddress(ln.Addr().String()), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	return p, func() ([]byte, [][]byte) {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(seen), slices.Clone(payloads)
	}
}
