package raftlog

import (
	"encoding/binary"
	"fmt"
	"io"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// sumFSM adds up the uint64 each command holds.
type sumFSM struct {
	mu     sync.Mutex
	n, sum uint64
}

func (f *sumFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n++
	f.sum += binary.BigEndian.Uint64(l.Data)
	return nil
}

func (f *sumFSM) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return sumSnapshot{f.n, f.sum}, nil
}

func (f *sumFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [16]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.n, f.sum = binary.BigEndian.Uint64(b[:]), binary.BigEndian.Uint64(b[8:])
	return nil
}

func (f *sumFSM) state() (uint64, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n, f.sum
}

type sumSnapshot struct{ n, sum uint64 }

func (s sumSnapshot) Persist(sink raft.SnapshotSink) error {
	b := binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(nil, s.n), s.sum)
	if _, err := sink.Write(b); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (sumSnapshot) Release() {}

// TestSharedUnderRaft runs three single-voter Raft groups (hashicorp/raft)
// on one shared log, as their log and stable store: each applies
// commands, snapshots and compacts its log, and after the shared log is
// closed and reopened each restarts from its snapshot and log to the
// same state.
func TestSharedUnderRaft(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 64 << 10}
	const groups, commands = 3, 300
	start := func(s *Shared, id uint32) (*raft.Raft, *sumFSM) {
		t.Helper()
		g := group(t, s, id)
		conf := raft.DefaultConfig()
		conf.LocalID = raft.ServerID(fmt.Sprintf("node-%d", id))
		conf.HeartbeatTimeout = 50 * time.Millisecond
		conf.ElectionTimeout = 50 * time.Millisecond
		conf.LeaderLeaseTimeout = 50 * time.Millisecond
		conf.CommitTimeout = 5 * time.Millisecond
		conf.TrailingLogs = 10
		conf.SnapshotThreshold = 1 << 30 // only when asked
		conf.LogOutput = io.Discard
		snaps, err := raft.NewFileSnapshotStore(filepath.Join(dir, fmt.Sprintf("snap-%d", id)), 2, io.Discard)
		if err != nil {
			t.Fatal(err)
		}
		_, trans := raft.NewInmemTransport(raft.ServerAddress(conf.LocalID))
		has, err := raft.HasExistingState(g, g, snaps)
		if err != nil {
			t.Fatal(err)
		}
		if !has {
			servers := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: trans.LocalAddr()}}}
			if err := raft.BootstrapCluster(conf, g, g, snaps, trans, servers); err != nil {
				t.Fatal(err)
			}
		}
		fsm := &sumFSM{}
		r, err := raft.NewRaft(conf, fsm, g, g, snaps, trans)
		if err != nil {
			t.Fatal(err)
		}
		waitFor(t, fmt.Sprintf("group %d to elect itself", id), func() bool { return r.State() == raft.Leader })
		return r, fsm
	}
	apply := func(r *raft.Raft, from, to uint64) {
		t.Helper()
		var fs []raft.ApplyFuture
		for i := from; i <= to; i++ {
			fs = append(fs, r.Apply(binary.BigEndian.AppendUint64(nil, i), 5*time.Second))
		}
		for _, f := range fs {
			if err := f.Error(); err != nil {
				t.Fatal(err)
			}
		}
	}
	sum := func(n uint64) uint64 { return n * (n + 1) / 2 }

	s := openShared(t, dir, opts)
	rafts := make([]*raft.Raft, groups+1)
	fsms := make([]*sumFSM, groups+1)
	for id := uint32(1); id <= groups; id++ {
		rafts[id], fsms[id] = start(s, id)
	}
	var wg sync.WaitGroup
	for id := 1; id <= groups; id++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			apply(rafts[id], 1, commands/2)
			if err := rafts[id].Snapshot().Error(); err != nil {
				t.Error(err)
			}
			apply(rafts[id], commands/2+1, commands)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for id := uint32(1); id <= groups; id++ {
		if n, total := fsms[id].state(); n != commands || total != sum(commands) {
			t.Fatalf("group %d applied %d commands adding to %d, want %d and %d", id, n, total, commands, sum(commands))
		}
		g := group(t, s, id)
		first, _ := g.FirstIndex()
		last, _ := g.LastIndex()
		if first <= 1 || last < commands {
			t.Fatalf("group %d's log holds %d-%d: want it compacted after the snapshot", id, first, last)
		}
		if term, err := g.GetUint64([]byte("CurrentTerm")); term == 0 || err != nil {
			t.Fatalf("group %d's CurrentTerm %d, %v", id, term, err)
		}
		if err := rafts[id].Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
	}
	st := s.Stats()
	t.Logf("%d appends, %d fdatasyncs, %d writes", st.Appends, st.Syncs, st.Writes)

	s = reopenShared(t, s, dir, opts)
	for id := uint32(1); id <= groups; id++ {
		r, fsm := start(s, id)
		if err := r.Barrier(5 * time.Second).Error(); err != nil {
			t.Fatal(err)
		}
		if n, total := fsm.state(); n != commands || total != sum(commands) {
			t.Fatalf("group %d restarted to %d commands adding to %d, want %d and %d", id, n, total, commands, sum(commands))
		}
		apply(r, commands+1, commands+10)
		if n, total := fsm.state(); n != commands+10 || total != sum(commands+10) {
			t.Fatalf("group %d: %d commands adding to %d after 10 more", id, n, total)
		}
		if err := r.Shutdown().Error(); err != nil {
			t.Fatal(err)
		}
	}
}
