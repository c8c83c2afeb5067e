package cluster

import (
	"errors"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/raftlog"
)

// deferringLogs is a log store that appends without syncing: Sync waits
// for a value on its channel (nil: succeed) and then makes the log
// durable.
type deferringLogs struct {
	*raft.InmemStore
	mu       sync.Mutex
	appended []uint64 // first index of each Append
	stored   []uint64 // first index of each StoreLogs
	durable  atomic.Uint64
	syncs    chan error
}

func (d *deferringLogs) StoreLogs(logs []*raft.Log) error {
	d.mu.Lock()
	d.stored = append(d.stored, logs[0].Index)
	d.mu.Unlock()
	if err := d.InmemStore.StoreLogs(logs); err != nil {
		return err
	}
	d.durable.Store(logs[len(logs)-1].Index)
	return nil
}

func (d *deferringLogs) Append(logs []*raft.Log) error {
	d.mu.Lock()
	d.appended = append(d.appended, logs[0].Index)
	d.mu.Unlock()
	return d.InmemStore.StoreLogs(logs)
}

func (d *deferringLogs) Sync() (uint64, error) {
	if err := <-d.syncs; err != nil {
		return d.durable.Load(), err
	}
	last, _ := d.LastIndex()
	d.durable.Store(last)
	return last, nil
}

func (d *deferringLogs) Durable() uint64 { return d.durable.Load() }

// TestDeferredSync: a leader's command entries are appended and synced by
// syncLoop, which wakes the state machine waiting for them; other entries,
// and a follower's, are stored and synced in line; a failed deferred sync
// calls onFatal once, and a closing node whose log cannot be synced
// applies nothing.
func TestDeferredSync(t *testing.T) {
	mem := raft.NewInmemStore()
	d := &deferringLogs{InmemStore: mem, syncs: make(chan error)}
	closing := make(chan struct{})
	g := newDiskGuard(d, mem, t.TempDir(), slog.New(slog.NewTextHandler(io.Discard, nil)), closing)
	var leads atomic.Bool
	leads.Store(true)
	g.leading = leads.Load
	var fatal atomic.Int64
	g.onFatal = func(error) { fatal.Add(1) }
	loop := make(chan struct{})
	go func() { defer close(loop); g.syncLoop() }()

	cmd := func(i uint64) *raft.Log { return &raft.Log{Index: i, Type: raft.LogCommand} }
	if err := g.StoreLogs([]*raft.Log{cmd(1), cmd(2)}); err != nil {
		t.Fatal(err)
	}
	applied := make(chan bool)
	go func() { applied <- g.awaitDurable(2) }()
	select {
	case <-applied:
		t.Fatal("awaitDurable returned before the sync")
	case <-time.After(50 * time.Millisecond):
	}
	d.syncs <- nil
	if ok := <-applied; !ok {
		t.Fatal("awaitDurable(2) = false after the sync")
	}
	// A configuration entry, and a follower's entries: in line.
	if err := g.StoreLogs([]*raft.Log{{Index: 3, Type: raft.LogConfiguration}}); err != nil {
		t.Fatal(err)
	}
	leads.Store(false)
	if err := g.StoreLogs([]*raft.Log{cmd(4)}); err != nil {
		t.Fatal(err)
	}
	if !g.awaitDurable(4) {
		t.Fatal("awaitDurable(4) = false after a synced write")
	}
	d.mu.Lock()
	if len(d.appended) != 1 || d.appended[0] != 1 || len(d.stored) != 2 || d.stored[0] != 3 || d.stored[1] != 4 {
		t.Fatalf("appended %v, stored %v; want appended [1], stored [3 4]", d.appended, d.stored)
	}
	d.mu.Unlock()

	// A failed deferred sync is fatal, once.
	leads.Store(true)
	if err := g.StoreLogs([]*raft.Log{cmd(5)}); err != nil {
		t.Fatal(err)
	}
	go func() { applied <- g.awaitDurable(5) }()
	sentinel := errors.New("EIO")
	d.syncs <- sentinel
	for deadline := time.Now().Add(5 * time.Second); fatal.Load() == 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("onFatal not called after a failed deferred sync")
		}
	}
	if !g.failed.Load() {
		t.Error("the node is not marked disk failed")
	}
	// The node closes: awaitDurable tries a last sync, which fails too
	// (as does any the loop started before it saw closing).
	close(closing)
	for done := false; !done; {
		select {
		case ok := <-applied:
			if ok {
				t.Fatal("awaitDurable(5) = true with the log never synced")
			}
			done = true
		case d.syncs <- raftlog.ErrSyncFailed:
		}
	}
	<-loop
	if n := fatal.Load(); n != 1 {
		t.Fatalf("onFatal called %d times, want once", n)
	}
}

// nopFSM applies nothing.
type nopFSM struct{}

func (nopFSM) Apply(*raft.Log) any                 { return nil }
func (nopFSM) Snapshot() (raft.FSMSnapshot, error) { return nil, errors.New("none") }
func (nopFSM) Restore(rc io.ReadCloser) error      { return rc.Close() }

// TestStepDownSyncsBeforeAck pins the step-down rule (durable.go): a node
// that led appended entries 2-5 without syncing them, and follows now;
// the new leader, which got those entries from it, sends them back in an
// AppendEntries. hashicorp/raft finds them in the log with the same term
// and answers success without writing, so the new leader would count an
// unsynced copy toward the commit. The answer must wait for the sync of
// 2-5 (and be an error if that sync fails); once they are durable,
// answers do not sync again.
func TestStepDownSyncsBeforeAck(t *testing.T) {
	mem := raft.NewInmemStore()
	d := &deferringLogs{InmemStore: mem, syncs: make(chan error)}
	closing := make(chan struct{})
	defer close(closing)
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	g := newDiskGuard(d, mem, t.TempDir(), log, closing)

	// The test plays the new leader, "a", on its own transport.
	leader, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer leader.Close()
	nt, err := raft.NewTCPTransport("127.0.0.1:0", nil, 2, time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer nt.Close()
	trans := newDurableTransport(nt, g, d.Durable, closing)
	go trans.relay()

	conf := raft.Configuration{Servers: []raft.Server{
		{ID: "b", Address: nt.LocalAddr()},
		{ID: "a", Address: leader.LocalAddr()},
	}}
	// Entry 1 (the configuration) is synced; 2-5 were appended by b as
	// leader of term 1 and never synced.
	if err := d.StoreLogs([]*raft.Log{{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: raft.EncodeConfiguration(conf)}}); err != nil {
		t.Fatal(err)
	}
	var entries []*raft.Log
	for i := uint64(2); i <= 5; i++ {
		entries = append(entries, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte{byte(i)}})
	}
	if err := d.Append(entries); err != nil {
		t.Fatal(err)
	}
	if err := mem.SetUint64([]byte("CurrentTerm"), 1); err != nil {
		t.Fatal(err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = "b"
	rc.HeartbeatTimeout = 10 * time.Second // b stays a follower
	rc.ElectionTimeout = 10 * time.Second
	rc.LeaderLeaseTimeout = 10 * time.Second
	rc.Logger = newHCLog(log, "raft", func() bool { return false })
	r, err := raft.NewRaft(rc, nopFSM{}, g, g, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Shutdown()
	g.start(r)

	send := func(prev uint64, ents []*raft.Log) chan error {
		done := make(chan error, 1)
		go func() {
			var resp raft.AppendEntriesResponse
			err := leader.AppendEntries("b", nt.LocalAddr(), &raft.AppendEntriesRequest{
				RPCHeader: raft.RPCHeader{ProtocolVersion: raft.ProtocolVersionMax, ID: []byte("a"), Addr: []byte(leader.LocalAddr())},
				Term:      2, PrevLogEntry: prev, PrevLogTerm: 1, Entries: ents,
			}, &resp)
			if err == nil && !resp.Success {
				err = errors.New("refused")
			}
			done <- err
		}()
		return done
	}
	// The answer waits for the sync; a failed sync makes it an error.
	done := send(3, entries[2:])
	select {
	case err := <-done:
		t.Fatalf("acknowledged entries 4-5 before they were synced (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	d.syncs <- errors.New("EIO")
	if err := <-done; err == nil {
		t.Fatal("acknowledged entries 4-5 although their sync failed")
	}
	done = send(1, entries)
	select {
	case err := <-done:
		t.Fatalf("acknowledged entries 2-5 before they were synced (err %v)", err)
	case <-time.After(300 * time.Millisecond):
	}
	d.syncs <- nil
	if err := <-done; err != nil {
		t.Fatalf("after the sync: %v", err)
	}
	if got := d.Durable(); got != 5 {
		t.Fatalf("durable %d, want 5", got)
	}
	// Durable now: the next answer syncs nothing (no value for Sync to
	// take: it would block).
	if err := <-send(1, entries); err != nil {
		t.Fatal(err)
	}
	if n := g.ackSyncs.Load(); n != 2 {
		t.Fatalf("%d syncs before acknowledgements, want 2", n)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if len(d.stored) != 1 {
		t.Fatalf("StoreLogs calls %v: the follower wrote entries it held", d.stored)
	}
}
