package cluster

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

// fakeReplica is a peer's Raft port that speaks the forward protocol for
// group 0: it answers msgHello, and every other message as onMsg says:
// a status and body to reply, or close the connection (closeConn), or
// never answer (hang). It counts the batches it received.
type fakeReplica struct {
	addr    string
	batches atomic.Int64
}

type fakeAction int

const (
	fakeReply fakeAction = iota
	fakeClose
	fakeHang
)

func newFakeReplica(t *testing.T, onMsg func(typ byte) (fakeAction, byte)) *fakeReplica {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeReplica{addr: ln.Addr().String()}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, _, err := readPreamble(c); err != nil {
					return
				}
				for {
					typ, id, _, err := readFrame(c)
					if err != nil {
						return
					}
					st := statusOK
					if typ != msgHello {
						if typ == msgBatch || typ == msgBatchNoDeadline {
							f.batches.Add(1)
						}
						var act fakeAction
						act, st = onMsg(typ)
						switch act {
						case fakeClose:
							return
						case fakeHang:
							continue
						}
					}
					c.Write(appendFrame(nil, msgReply, id, []byte{st}))
				}
			}()
		}
	}()
	return f
}

func newTestRemote(addrs ...string) *Remote {
	r := NewRemote(RemoteConfig{CommitTimeout: time.Second, Addrs: func() []string { return addrs }})
	return r
}

// tokensLeft peeks key's bucket through tn (cost 0: nothing is taken).
func tokensLeft(t *testing.T, tn *tnode, key string, capacity int64) int64 {
	t.Helper()
	return do(t, tn, allow(t, key, capacity, 1e-6, 0)).Remaining
}

// TestRemoteFollowsNotLeader: a Remote whose list names the followers
// first (a directory's stale leader) finds the leader through their
// not-leader answers, and exactly the capacity is admitted; after the
// leader dies it finds the new one, the bucket still empty.
func TestRemoteFollowsNotLeader(t *testing.T) {
	c := newCluster(t, 3, nil)
	lead := c.leader()
	var addrs []string
	for _, tn := range c.nodes {
		if tn != lead {
			addrs = append(addrs, tn.addr)
		}
	}
	addrs = append(addrs, lead.addr)
	r := newTestRemote(addrs...)
	defer r.Close()

	const capacity = 5
	allowed := 0
	for range capacity + 3 {
		res := make([]engine.Result, 1)
		if err := r.Do(context.Background(), []engine.Request{allow(t, "k", capacity, 1e-6, 1)}, res); err != nil {
			t.Fatalf("remote do: %v", err)
		}
		if res[0].Allowed {
			allowed++
		}
	}
	if allowed != capacity {
		t.Fatalf("%d allowed through the remote, want %d", allowed, capacity)
	}
	r.mu.Lock()
	last := r.leader
	r.mu.Unlock()
	if last != lead.addr {
		t.Fatalf("remote's leader is %s, want %s", last, lead.addr)
	}

	lead.stop()
	c.leader()
	res := make([]engine.Result, 1)
	var err error
	for range 20 { // until the survivors elect; each try is certainly not appended
		err = r.Do(context.Background(), []engine.Request{allow(t, "k", capacity, 1e-6, 1)}, res)
		if err == nil || !retryable(err) {
			break
		}
	}
	if err != nil {
		t.Fatalf("remote do after the leader died: %v", err)
	}
	if res[0].Allowed {
		t.Fatal("a drained bucket admitted through the new leader")
	}
}

// TestRemoteUnknownOutcomeNotRetried: a batch sent to a replica that
// accepted it and never answered (its connection lost, or the wait over)
// gets ErrUnknownOutcome and is not sent to the next replica, the real
// leader: a decision is never made twice. A not-leader answer, by
// contrast, goes on to the leader.
func TestRemoteUnknownOutcomeNotRetried(t *testing.T) {
	c := newCluster(t, 1, nil)
	lead := c.leader()
	for _, tc := range []struct {
		name string
		act  fakeAction
		st   byte
		want error // nil: admitted by the leader
	}{
		{"connection lost", fakeClose, 0, ErrUnknownOutcome},
		{"no answer in time", fakeHang, 0, ErrUnknownOutcome},
		{"unknown status", fakeReply, statusUnknown, ErrUnknownOutcome},
		{"not leader", fakeReply, statusNotLeader, nil},
		{"late", fakeReply, statusLate, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := newFakeReplica(t, func(byte) (fakeAction, byte) { return tc.act, tc.st })
			r := newTestRemote(fake.addr, lead.addr)
			defer r.Close()
			key := "k-" + tc.name
			res := make([]engine.Result, 1)
			err := r.Do(context.Background(), []engine.Request{allow(t, key, 3, 1e-6, 1)}, res)
			if fake.batches.Load() != 1 {
				t.Fatalf("the first replica got %d batches, want 1", fake.batches.Load())
			}
			left := tokensLeft(t, lead, key, 3)
			if tc.want != nil {
				if !errors.Is(err, tc.want) {
					t.Fatalf("err %v, want %v", err, tc.want)
				}
				if left != 3 {
					t.Fatalf("the leader took %d tokens of a batch it never got", 3-left)
				}
				return
			}
			if err != nil || !res[0].Allowed {
				t.Fatalf("err %v allowed %v, want admitted by the leader", err, res[0].Allowed)
			}
			if left != 2 {
				t.Fatalf("%d left, want 2", left)
			}
		})
	}
}

// TestRemoteNoReplica: with no replica reachable the call ends within the
// commit timeout as not appended (CLUSTERDOWN), and a closed Remote
// refuses at once (TRYAGAIN).
func TestRemoteNoReplica(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	r := NewRemote(RemoteConfig{CommitTimeout: 200 * time.Millisecond, Addrs: func() []string { return []string{dead} }})
	res := make([]engine.Result, 1)
	if err := r.Do(context.Background(), []engine.Request{allow(t, "k", 3, 1, 1)}, res); !errors.Is(err, ErrNoLeader) {
		t.Fatalf("err %v, want %v", err, ErrNoLeader)
	}
	r.Close()
	if err := r.Do(context.Background(), []engine.Request{allow(t, "k", 3, 1, 1)}, res); !errors.Is(err, ErrNotAppended) {
		t.Fatalf("after Close: err %v, want %v", err, ErrNotAppended)
	}
}

// TestRemoteDialsOutsideItsLock: while one call dials a replica that
// accepts and never answers (the dial waits up to a second), a call to
// the group's leader, whose connection is open, is served at once: it
// returns before the stuck dial does.
func TestRemoteDialsOutsideItsLock(t *testing.T) {
	c := newCluster(t, 1, nil)
	lead := c.leader()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var held []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, conn) // accepted, never answered
			mu.Unlock()
		}
	}()
	defer func() {
		mu.Lock()
		for _, conn := range held {
			conn.Close()
		}
		mu.Unlock()
	}()
	stuck := ln.Addr().String()
	r := NewRemote(RemoteConfig{CommitTimeout: 5 * time.Second, Addrs: func() []string { return []string{lead.addr, stuck} }})
	defer r.Close()
	res := make([]engine.Result, 1)
	if err := r.Do(context.Background(), []engine.Request{allow(t, "k", 5, 1e-6, 1)}, res); err != nil {
		t.Fatalf("first call: %v", err) // opens the leader's connection
	}

	dialed := make(chan error, 1)
	go func() {
		_, err := r.conn(stuck)
		dialed <- err
	}()
	time.Sleep(50 * time.Millisecond) // the dial is under way
	if err := r.Do(context.Background(), []engine.Request{allow(t, "k", 5, 1e-6, 1)}, res); err != nil || !res[0].Allowed {
		t.Fatalf("call during the stuck dial: %v, allowed %v", err, res[0].Allowed)
	}
	select {
	case err := <-dialed:
		t.Fatalf("the stuck dial ended (%v) before the call to the leader was served: the call waited for it", err)
	default:
	}
	if err := <-dialed; err == nil {
		t.Fatal("a dial to a replica that never answers its hello succeeded")
	}
}
