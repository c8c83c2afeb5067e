package raftlog

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openShared(t testing.TB, dir string, opts Options) *Shared {
	t.Helper()
	s, err := OpenShared(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func reopenShared(t testing.TB, s *Shared, dir string, opts Options) *Shared {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return openShared(t, dir, opts)
}

func group(t testing.TB, s *Shared, id uint32) *GroupLog {
	t.Helper()
	g, err := s.Group(id)
	if err != nil {
		t.Fatal(err)
	}
	return g
}

// gentries are group id's entries from..to: the term names the group, so
// that no two groups' entries are alike.
func gentries(id uint32, from, to uint64) []*raft.Log { return entries(from, to, gterm(id)) }

func gterm(id uint32) uint64 { return 100 + uint64(id) }

// model is what each group's log must hold: its entries, first to last.
type model map[uint32][]*raft.Log

// store stores logs in g, and in the model.
func (m model) store(t testing.TB, g *GroupLog, logs []*raft.Log) {
	t.Helper()
	if err := g.StoreLogs(logs); err != nil {
		t.Fatalf("group %d: StoreLogs %d-%d: %v", g.ID(), logs[0].Index, logs[len(logs)-1].Index, err)
	}
	m[g.ID()] = append(m[g.ID()], logs...)
}

// deleteRange deletes lo-hi from g, and from the model.
func (m model) deleteRange(t testing.TB, g *GroupLog, lo, hi uint64) {
	t.Helper()
	if err := g.DeleteRange(lo, hi); err != nil {
		t.Fatalf("group %d: DeleteRange %d-%d: %v", g.ID(), lo, hi, err)
	}
	m[g.ID()] = slices.DeleteFunc(m[g.ID()], func(l *raft.Log) bool { return l.Index >= lo && l.Index <= hi })
}

// check fails unless every group of the model holds exactly its entries.
func (m model) check(t testing.TB, s *Shared) {
	t.Helper()
	for _, id := range slices.Sorted(func(yield func(uint32) bool) {
		for id := range m {
			if !yield(id) {
				return
			}
		}
	}) {
		m.checkGroup(t, group(t, s, id))
	}
}

func (m model) checkGroup(t testing.TB, g *GroupLog) {
	t.Helper()
	want := m[g.ID()]
	var first, last uint64
	if len(want) > 0 {
		first, last = want[0].Index, want[len(want)-1].Index
	}
	f, err1 := g.FirstIndex()
	l, err2 := g.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("group %d holds %d-%d, want %d-%d", g.ID(), f, l, first, last)
	}
	var got raft.Log
	for _, w := range want {
		if err := g.GetLog(w.Index, &got); err != nil {
			t.Fatalf("group %d: GetLog %d: %v", g.ID(), w.Index, err)
		}
		sameLog(t, &got, w)
	}
	for _, i := range []uint64{first - 1, last + 1} {
		if i == 0 {
			continue
		}
		if err := g.GetLog(i, &got); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("group %d: GetLog %d outside %d-%d: %v, want ErrLogNotFound", g.ID(), i, first, last, err)
		}
	}
}

// walFiles lists dir's shared segment files, oldest first.
func walFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, walPrefix+"*"+segSuffix))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

// setFsync replaces s's fdatasync (a test hook), under the lock every
// segment fdatasync holds, since the background reclaimer may sync.
func setFsync(s *Shared, f func(*os.File) error) {
	s.fsyncMu.Lock()
	s.fsync = f
	s.fsyncMu.Unlock()
}

// waitFor polls cond until it holds, failing after 10 s.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(200 * time.Microsecond)
	}
}

// TestSharedRoundTrip: groups' entries interleaved in one log read back
// per group, across segments and a reopen; a group's indexes are its
// own; a closed log refuses everything.
func TestSharedRoundTrip(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4096}
	s := openShared(t, dir, opts)
	a, b, c := group(t, s, 1), group(t, s, 2), group(t, s, 7)
	if again := group(t, s, 1); again != a {
		t.Fatal("Group returned two values for one id")
	}
	bounds(t, a, 0, 0)
	var l raft.Log
	if err := a.GetLog(1, &l); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog on an empty group: %v", err)
	}
	m := model{}
	for i := uint64(1); i <= 60; i += 3 {
		m.store(t, a, gentries(1, i, i+2))
		m.store(t, b, gentries(2, 100+i, 102+i)) // b starts at 101: any index starts an empty log
	}
	big := gentries(7, 5, 6)
	big[0].Data = make([]byte, 1<<20)
	for i := range big[0].Data {
		big[0].Data[i] = byte(i * 7)
	}
	big[1].Data = []byte{}
	big[1].AppendedAt = time.Unix(0, -5)
	m.store(t, c, big)

	// Each group continues its own indexes only.
	if err := a.StoreLogs(gentries(1, 62, 62)); !errors.Is(err, ErrNotConsecutive) {
		t.Fatalf("StoreLogs leaving a gap: %v", err)
	}
	if err := a.StoreLogs(append(gentries(1, 61, 61), gentries(1, 63, 63)...)); !errors.Is(err, ErrNotConsecutive) {
		t.Fatalf("StoreLogs of entries with a gap: %v", err)
	}
	if err := b.StoreLogs(gentries(2, 61, 61)); !errors.Is(err, ErrNotConsecutive) {
		t.Fatalf("StoreLogs of another group's next index: %v", err)
	}
	if err := a.StoreLogs(nil); err != nil {
		t.Fatal(err)
	}
	m.check(t, s)
	if got := s.Groups(); !slices.Equal(got, []uint32{1, 2, 7}) {
		t.Fatalf("Groups = %v", got)
	}
	if n := len(walFiles(t, dir)); n < 3 {
		t.Fatalf("%d segment files, want several", n)
	}
	// out.Data is the caller's.
	if err := a.GetLog(2, &l); err != nil {
		t.Fatal(err)
	}
	l.Data[0] ^= 0xff
	m.check(t, s)

	s = reopenShared(t, s, dir, opts)
	m.check(t, s)
	a, b = group(t, s, 1), group(t, s, 2)
	if d := a.Durable(); d != 60 {
		t.Fatalf("reopened: Durable %d, want 60", d)
	}
	m.store(t, a, gentries(1, 61, 62))
	m.store(t, b, gentries(2, 161, 161))
	s = reopenShared(t, s, dir, opts)
	m.check(t, s)

	a = group(t, s, 1)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := a.StoreLog(gentries(1, 63, 63)[0]); !errors.Is(err, ErrClosed) {
		t.Fatalf("StoreLog after Close: %v", err)
	}
	if err := a.GetLog(1, &l); !errors.Is(err, ErrClosed) {
		t.Fatalf("GetLog after Close: %v", err)
	}
	if _, err := s.Group(3); !errors.Is(err, ErrClosed) {
		t.Fatalf("Group after Close: %v", err)
	}
	if _, err := a.Sync(); !errors.Is(err, ErrClosed) {
		t.Fatalf("Sync after Close: %v", err)
	}
}

// TestSharedGroupCommit: StoreLogs of 8 groups that arrive while another
// group's fdatasync runs leave in one write and one fdatasync, which
// releases them all.
func TestSharedGroupCommit(t *testing.T) {
	s := openShared(t, t.TempDir(), Options{})
	release := make(chan struct{})
	var once sync.Once
	setFsync(s, func(f *os.File) error {
		once.Do(func() { <-release }) // the first sync waits
		return fdatasync(f)
	})
	errc := make(chan error, 9)
	g0 := group(t, s, 0)
	go func() { errc <- g0.StoreLogs(gentries(0, 1, 1)) }()
	waitFor(t, "the first sync to start", func() bool { return s.Stats().Syncs == 1 })
	before := s.Stats()
	for id := uint32(1); id <= 8; id++ {
		g := group(t, s, id)
		go func() { errc <- g.StoreLogs(gentries(id, 1, 3)) }()
	}
	waitFor(t, "8 StoreLogs to queue", func() bool {
		s.qmu.Lock()
		defer s.qmu.Unlock()
		return len(s.queue) == 8
	})
	close(release)
	for range 9 {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
	after := s.Stats()
	if syncs, writes := after.Syncs-before.Syncs, after.Writes-before.Writes; syncs != 1 || writes != 1 {
		t.Fatalf("8 StoreLogs waiting together took %d fdatasyncs and %d writes, want 1 and 1", syncs, writes)
	}
	if after.Appends != 9 || after.Syncs != 2 {
		t.Fatalf("9 StoreLogs: %d appends, %d fdatasyncs; want 9 and 2", after.Appends, after.Syncs)
	}
	for id := uint32(1); id <= 8; id++ {
		g := group(t, s, id)
		holds(t, g, 1, 3, func(uint64) uint64 { return gterm(id) })
		if d := g.Durable(); d != 3 {
			t.Fatalf("group %d: Durable %d after StoreLogs, want 3", id, d)
		}
	}
}

// TestSharedConcurrent: nine groups store, append, sync, delete from the
// front and read at once (go test -race), over small segments that are
// started and reclaimed meanwhile. They share fdatasyncs, and a reopen
// finds every group as it was left.
func TestSharedConcurrent(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 16 << 10}
	s := openShared(t, dir, opts)
	const groups, rounds = 9, 60
	var mu sync.Mutex
	m := model{}
	var wg sync.WaitGroup
	errc := make(chan error, groups+1)
	stop, done := make(chan struct{}), make(chan struct{})
	for id := uint32(1); id <= groups; id++ {
		g := group(t, s, id)
		wg.Add(1)
		go func() {
			defer wg.Done()
			var mine []*raft.Log
			next := uint64(1)
			for r := range rounds {
				logs := gentries(id, next, next+uint64(r%3))
				var err error
				if r%4 == 3 {
					if err = g.Append(logs); err == nil {
						_, err = g.Sync()
					}
				} else {
					err = g.StoreLogs(logs)
				}
				if err != nil {
					errc <- fmt.Errorf("group %d: %w", id, err)
					return
				}
				mine = append(mine, logs...)
				next += uint64(len(logs))
				if r%10 == 9 { // a snapshot: keep the last 5
					lo, hi := mine[0].Index, next-6
					if err := g.DeleteRange(lo, hi); err != nil {
						errc <- fmt.Errorf("group %d: %w", id, err)
						return
					}
					mine = slices.DeleteFunc(mine, func(l *raft.Log) bool { return l.Index <= hi })
				}
			}
			if d := g.Durable(); d != next-1 {
				errc <- fmt.Errorf("group %d: Durable %d, want %d", id, d, next-1)
			}
			mu.Lock()
			m[id] = mine
			mu.Unlock()
		}()
	}
	go func() { // a reader of every group
		defer close(done)
		var l raft.Log
		for {
			select {
			case <-stop:
				return
			default:
			}
			g := group(t, s, uint32(1+rand.IntN(groups)))
			first, _ := g.FirstIndex()
			last, _ := g.LastIndex()
			if last == 0 {
				continue
			}
			i := first + uint64(rand.IntN(int(last-first+1)))
			err := g.GetLog(i, &l)
			if errors.Is(err, raft.ErrLogNotFound) {
				if now, _ := g.FirstIndex(); now > i {
					continue // compacted meanwhile
				}
			}
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil || l.Index != i || l.Term != gterm(g.ID()) {
				errc <- fmt.Errorf("group %d: GetLog %d: %v (index %d, term %d)", g.ID(), i, err, l.Index, l.Term)
				return
			}
		}
	}()
	wg.Wait()
	close(stop)
	<-done
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	st := s.Stats()
	t.Logf("%d appends, %d ops, %d writes, %d fdatasyncs, %d records rewritten, %d segments removed, %d left",
		st.Appends, st.Ops, st.Writes, st.Syncs, st.Rewritten, st.Removed, st.Segments)
	if st.Appends != groups*rounds {
		t.Fatalf("%d appends counted, want %d", st.Appends, groups*rounds)
	}
	if st.Syncs >= st.Ops {
		t.Fatalf("%d fdatasyncs for %d writing calls: none shared", st.Syncs, st.Ops)
	}
	m.check(t, s)
	s = reopenShared(t, s, dir, opts)
	m.check(t, s)
}

// TestSharedTruncateIndependent: a group's front deletion (a snapshot),
// back deletion (a conflicting leader) and whole deletion (a snapshot
// installed) leave the other groups intact, across reopens.
func TestSharedTruncateIndependent(t *testing.T) {
	dir := t.TempDir()
	opts := Options{SegmentSize: 4096}
	s := openShared(t, dir, opts)
	m := model{}
	gs := []*GroupLog{nil, group(t, s, 1), group(t, s, 2), group(t, s, 3), group(t, s, 4)}
	for i := uint64(1); i <= 40; i += 4 {
		for _, g := range gs[1:] {
			m.store(t, g, gentries(g.ID(), i, i+3))
		}
	}
	m.deleteRange(t, gs[1], 1, 25) // front
	m.deleteRange(t, gs[2], 31, 40)
	conflicting := entries(31, 35, 7) // the new leader's
	m.store(t, gs[2], conflicting)
	if d := gs[2].Durable(); d != 35 {
		t.Fatalf("Durable after a back deletion and StoreLogs: %d, want 35", d)
	}
	m.deleteRange(t, gs[3], 0, 1000) // all, clamped
	if d := gs[3].Durable(); d != 0 {
		t.Fatalf("Durable of an emptied log: %d, want 0", d)
	}
	m.store(t, gs[3], gentries(3, 500, 505)) // after the snapshot at 499
	if err := gs[2].DeleteRange(5, 10); !errors.Is(err, ErrGap) {
		t.Fatalf("DeleteRange inside the log: %v, want ErrGap", err)
	}
	if err := gs[1].DeleteRange(1, 10); err != nil { // already gone: nothing to do
		t.Fatal(err)
	}
	m.check(t, s)

	s = reopenShared(t, s, dir, opts)
	m.check(t, s)
	for id := uint32(1); id <= 4; id++ {
		g := group(t, s, id)
		last, _ := g.LastIndex()
		m.store(t, g, entries(last+1, last+2, 9))
	}
	// Back deletion of what was stored after a reopen, and a whole
	// deletion followed by a lower start.
	m.deleteRange(t, group(t, s, 4), 41, 42)
	m.deleteRange(t, group(t, s, 1), 26, 42)
	m.store(t, group(t, s, 1), gentries(1, 3, 4))
	m.check(t, s)
	s = reopenShared(t, s, dir, opts)
	m.check(t, s)
}

// TestSharedDeferred: Append's entries are readable at once and durable
// once a sync covers them: the group's own Sync, or any group's
// StoreLogs, which syncs everything written before it. A machine crash
// (the file cut where the last sync ended) loses exactly what was not
// synced.
func TestSharedDeferred(t *testing.T) {
	dir := t.TempDir()
	s := openShared(t, dir, Options{})
	a, b := group(t, s, 1), group(t, s, 2)
	m := model{}
	if err := a.Append(gentries(1, 1, 5)); err != nil {
		t.Fatal(err)
	}
	m[1] = gentries(1, 1, 5)
	m.check(t, s)
	if d, n := a.Durable(), s.Stats().Syncs; d != 0 || n != 0 {
		t.Fatalf("after Append: Durable %d, %d fdatasyncs; want 0, 0", d, n)
	}
	m.store(t, b, gentries(2, 1, 2))
	if da, db, n := a.Durable(), b.Durable(), s.Stats().Syncs; da != 5 || db != 2 || n != 1 {
		t.Fatalf("after group 2's StoreLogs: Durable %d and %d, %d fdatasyncs; want 5, 2 and one", da, db, n)
	}
	if d, err := a.Sync(); d != 5 || err != nil || s.Stats().Syncs != 1 {
		t.Fatalf("Sync with nothing new = %d, %v, %d fdatasyncs; want 5, nil and no new one", d, err, s.Stats().Syncs)
	}
	if err := a.Append(gentries(1, 6, 8)); err != nil {
		t.Fatal(err)
	}
	m[1] = gentries(1, 1, 8)
	if d, err := a.Sync(); d != 8 || err != nil || s.Stats().Syncs != 2 {
		t.Fatalf("Sync = %d, %v, %d fdatasyncs; want 8, nil and one more", d, err, s.Stats().Syncs)
	}
	if err := b.Append(gentries(2, 3, 4)); err != nil {
		t.Fatal(err)
	}
	if d := b.Durable(); d != 2 {
		t.Fatalf("Durable %d after an Append, want 2", d)
	}
	// The machine crashes: what was not synced is gone.
	s.wmu.Lock()
	tail := s.segs[len(s.segs)-1]
	synced, path := tail.synced, tail.path
	s.wmu.Unlock()
	crashed := copyDir(t, dir)
	if err := os.Truncate(filepath.Join(crashed, filepath.Base(path)), synced); err != nil {
		t.Fatal(err)
	}
	c := openShared(t, crashed, Options{})
	m.check(t, c)
	// Without the crash, all of it.
	m[2] = gentries(2, 1, 4)
	s = reopenShared(t, s, dir, Options{})
	m.check(t, s)
	if d := group(t, s, 2).Durable(); d != 4 {
		t.Fatalf("reopened: Durable %d, want 4", d)
	}
}

// TestSharedStable: each group has its own stable keys, kept across a
// reopen; Drop deletes a group's entries and keys, and the others stay.
func TestSharedStable(t *testing.T) {
	dir := t.TempDir()
	s := openShared(t, dir, Options{})
	a, b := group(t, s, 1), group(t, s, 2)
	if _, err := a.Get([]byte("CurrentTerm")); !errors.Is(err, ErrKeyNotFound) || err.Error() != "not found" {
		t.Fatalf("Get of a missing key: %v", err)
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := b.SetUint64([]byte("CurrentTerm"), 9); err != nil {
		t.Fatal(err)
	}
	if err := a.Set([]byte("LastVoteCand"), []byte("node-a")); err != nil {
		t.Fatal(err)
	}
	if err := a.SetUint64([]byte("CurrentTerm"), 8); err != nil {
		t.Fatal(err)
	}
	m := model{}
	m.store(t, a, gentries(1, 1, 3))
	m.store(t, b, gentries(2, 1, 3))
	check := func(s *Shared, bTerm uint64) {
		t.Helper()
		a, b := group(t, s, 1), group(t, s, 2)
		if v, err := a.GetUint64([]byte("CurrentTerm")); v != 8 || err != nil {
			t.Fatalf("group 1's CurrentTerm %d, %v; want 8", v, err)
		}
		if v, err := a.Get([]byte("LastVoteCand")); string(v) != "node-a" || err != nil {
			t.Fatalf("group 1's LastVoteCand %q, %v", v, err)
		}
		v, err := b.GetUint64([]byte("CurrentTerm"))
		if bTerm == 0 {
			if !errors.Is(err, ErrKeyNotFound) {
				t.Fatalf("dropped group's CurrentTerm %d, %v; want ErrKeyNotFound", v, err)
			}
		} else if v != bTerm || err != nil {
			t.Fatalf("group 2's CurrentTerm %d, %v; want %d", v, err, bTerm)
		}
		if _, err := b.Get([]byte("LastVoteCand")); !errors.Is(err, ErrKeyNotFound) {
			t.Fatalf("group 2 sees group 1's key: %v", err)
		}
	}
	check(s, 9)
	s = reopenShared(t, s, dir, Options{})
	check(s, 9)

	if err := s.Drop(2); err != nil {
		t.Fatal(err)
	}
	m[2] = nil
	check(s, 0)
	m.check(t, s)
	if got := s.Groups(); !slices.Equal(got, []uint32{1}) {
		t.Fatalf("Groups after Drop = %v, want [1]", got)
	}
	s = reopenShared(t, s, dir, Options{})
	check(s, 0)
	m.check(t, s)
	m.store(t, group(t, s, 2), gentries(2, 10, 11)) // a dropped group starts anew
	s = reopenShared(t, s, dir, Options{})
	m.check(t, s)
}

// TestSharedSyncFailureBreaks: a failed fdatasync breaks the log for
// every group (ErrSyncFailed) until it is reopened, which reads what is
// on disk.
func TestSharedSyncFailureBreaks(t *testing.T) {
	dir := t.TempDir()
	s := openShared(t, dir, Options{})
	a, b := group(t, s, 1), group(t, s, 2)
	m := model{}
	m.store(t, a, gentries(1, 1, 3))
	m.store(t, b, gentries(2, 1, 3))
	setFsync(s, func(*os.File) error { return errInjected })
	if err := a.StoreLogs(gentries(1, 4, 4)); !errors.Is(err, ErrSyncFailed) || !errors.Is(err, errInjected) {
		t.Fatalf("StoreLogs with fdatasync failing: %v", err)
	}
	setFsync(s, fdatasync)
	if err := b.StoreLogs(gentries(2, 4, 4)); !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("another group's StoreLogs after a failed sync: %v", err)
	}
	if err := b.Append(gentries(2, 4, 4)); !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("Append after a failed sync: %v", err)
	}
	if _, err := b.Sync(); !errors.Is(err, ErrSyncFailed) {
		t.Fatalf("Sync after a failed sync: %v", err)
	}
	if d := a.Durable(); d != 3 {
		t.Fatalf("Durable %d after a failed sync, want 3", d)
	}
	s = reopenShared(t, s, dir, Options{})
	// The failed StoreLogs' record was written: the page cache still
	// has it, and the reopen reads it.
	m[1] = gentries(1, 1, 4)
	m.check(t, s)
	m.store(t, group(t, s, 2), gentries(2, 4, 4))
	m.check(t, s)
}

// TestSharedRefusesStore: a Store's folder is not opened as a shared log.
func TestSharedRefusesStore(t *testing.T) {
	dir := t.TempDir()
	st := open(t, dir, Options{})
	store(t, st, entries(1, 2, 1))
	st.Close()
	if _, err := OpenShared(dir, Options{}); !errors.Is(err, ErrNotShared) {
		t.Fatalf("OpenShared of a Store's folder: %v, want ErrNotShared", err)
	}
}

// A sync waits for other groups' appends only while two or more groups
// write: one group alone never waits, and a group idle past activeWindow
// no longer counts. Appends stamp their group (wroteAt); the times
// checked are set here, so that a slow sync on a loaded machine cannot
// age a write past the window.
func TestSharedLingersWhileGroupsWrite(t *testing.T) {
	s := openShared(t, t.TempDir(), Options{})
	g1, g2, _ := group(t, s, 1), group(t, s, 2), group(t, s, 3) // group 3 is opened, never written: it never counts
	if s.lingers(time.Now().UnixNano()) {
		t.Fatal("lingers with no group written")
	}
	if err := g1.StoreLogs(gentries(1, 1, 3)); err != nil {
		t.Fatal(err)
	}
	if err := g2.Append(gentries(2, 1, 1)); err != nil {
		t.Fatal(err)
	}
	if g1.wroteAt.Load() == 0 || g2.wroteAt.Load() == 0 {
		t.Fatal("an append did not stamp its group")
	}
	t0 := time.Now().UnixNano()
	ms := int64(time.Millisecond)
	g1.wroteAt.Store(t0)
	g2.wroteAt.Store(t0 - 10*int64(activeWindow))
	if s.lingers(t0 + ms) {
		t.Fatal("lingers with one group written within activeWindow")
	}
	g2.wroteAt.Store(t0 + ms)
	if !s.lingers(t0 + 2*ms) {
		t.Fatal("does not linger with two groups written within activeWindow")
	}
	if s.lingers(t0 + ms + int64(activeWindow)) {
		t.Fatal("lingers once both groups are idle past activeWindow")
	}
}
