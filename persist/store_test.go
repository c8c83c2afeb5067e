package persist

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
)

func openStore(t testing.TB, dir string) *Store {
	t.Helper()
	s, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func TestStoreWriteLoad(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	e := newEngine(t, 4)
	now := buildState(t, e, "s:")
	h, recs := exportSorted(t, e, now)
	size, err := s.Write(h, recs)
	if err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Stat(s.Path()); err != nil || fi.Size() != size {
		t.Fatalf("file: %v, %v; Write reported %d bytes", fi, err, size)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{FileName}) {
		t.Errorf("folder holds %q, want only the snapshot", names)
	}
	dst := newEngine(t, 1)
	st, err := s.Load(context.Background(), dst, now-sec) // the wall clock is behind the snapshot's
	if err != nil || !st.Found || st.Records != len(recs) || st.Bytes != size || st.Clock != now {
		t.Fatalf("Load: %+v, %v", st, err)
	}
	_, got := exportSorted(t, dst, 0)
	if !reflect.DeepEqual(got, recs) {
		t.Errorf("loaded state differs:\n got %v\nwant %v", got, recs)
	}
	// The clock came back too: a request at an earlier time is decided at
	// the snapshot's clock.
	req := must(engine.TokenBucket([]byte("s:gcra"), 10, 0.5, 0))
	a, b := make([]engine.Result, 1), make([]engine.Result, 1)
	e.Do(context.Background(), now, []engine.Request{req}, a)
	dst.Do(context.Background(), t0, []engine.Request{req}, b)
	if a[0] != b[0] {
		t.Errorf("after load, at an earlier time: %+v, want %+v (decided at the snapshot's clock)", b[0], a[0])
	}
}

func TestStoreMissingFile(t *testing.T) {
	s := openStore(t, t.TempDir())
	e := newEngine(t, 2)
	st, err := s.Load(context.Background(), e, t0)
	if err != nil || st.Found {
		t.Errorf("Load without a file: %+v, %v", st, err)
	}
	if _, _, err := s.Read(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Read without a file: %v", err)
	}
}

// TestStoreLoadDamaged: a damaged file, or one whose records the engine
// refuses, loads nothing and stays where it is.
func TestStoreLoadDamaged(t *testing.T) {
	data := smallSnapshot(t)
	badRecord := encode(t, Header{ClockNanos: t0}, []engine.Record{
		{Key: "a", Kind: engine.KindGCRA, Fields: []int64{t0 + sec}},
		{Key: "b", Kind: engine.KindFixed, Fields: []int64{t0 + 7, 10, 1}}, // end not a multiple of the window
	})
	cases := map[string][]byte{"bad record": badRecord}
	for i := 0; i < len(data); i += 7 {
		b := bytes.Clone(data)
		b[i] ^= 0x10
		cases["flip "+strconv.Itoa(i)] = b
		cases["cut "+strconv.Itoa(i)] = data[:i]
	}
	for name, b := range cases {
		dir := t.TempDir()
		path := filepath.Join(dir, FileName)
		if err := os.WriteFile(path, b, 0o600); err != nil {
			t.Fatal(err)
		}
		e := newEngine(t, 2)
		st, err := openStore(t, dir).Load(context.Background(), e, t0)
		if (!errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrTruncated)) || !st.Found {
			t.Fatalf("%s: %+v, %v", name, st, err)
		}
		if n, _ := e.Len(context.Background(), t0); n != 0 || e.Changes() != 0 {
			t.Fatalf("%s: %d keys loaded from a damaged file", name, n)
		}
		if got, _ := os.ReadFile(path); !bytes.Equal(got, b) {
			t.Fatalf("%s: the file changed", name)
		}
		if !bytes.Contains([]byte(err.Error()), []byte(path)) {
			t.Errorf("%s: %q does not name the file", name, err)
		}
	}
}

// TestStoreCrashBeforeRename: until the rename, the previous snapshot is
// the one on disk, whole; the next Open removes the half-done save.
func TestStoreCrashBeforeRename(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	old := []engine.Record{{Key: "old", Kind: engine.KindGCRA, Fields: []int64{t0 + sec}}}
	if _, err := s.Write(Header{ClockNanos: t0}, old); err != nil {
		t.Fatal(err)
	}
	var tempSeen string
	s.BeforeRename = func(tmp string) {
		tempSeen = tmp
		_, recs, err := openStoreNoClean(dir).Read()
		if err != nil || !reflect.DeepEqual(recs, old) {
			t.Errorf("during the save, the snapshot reads %v, %v; want the previous one", recs, err)
		}
		// The temporary file is complete and would load.
		f, _ := os.Open(tmp)
		defer f.Close()
		if _, _, err := Decode(f); err != nil {
			t.Errorf("temporary file: %v", err)
		}
		panic("crash") // the save stops here
	}
	func() {
		defer func() { recover() }()
		s.Write(Header{ClockNanos: t0 + sec}, []engine.Record{{Key: "new", Kind: engine.KindGCRA, Fields: []int64{t0 + 2*sec}}})
	}()
	if tempSeen == "" {
		t.Fatal("BeforeRename did not run")
	}
	if _, err := os.Stat(tempSeen); err != nil {
		t.Fatalf("the crashed save's temporary file: %v", err)
	}
	s2 := openStore(t, dir) // the restart
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{FileName}) {
		t.Errorf("after Open the folder holds %q", names)
	}
	if _, recs, err := s2.Read(); err != nil || !reflect.DeepEqual(recs, old) {
		t.Errorf("after the crash: %v, %v; want the previous snapshot", recs, err)
	}
}

// openStoreNoClean opens a store without removing temporary files, as a
// reader during a save would see the folder.
func openStoreNoClean(dir string) *Store {
	return &Store{dir: dir, path: filepath.Join(dir, FileName)}
}

func TestStoreMoveAside(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir)
	at := time.Date(2026, 3, 4, 5, 6, 7, 0, time.UTC)
	var moved []string
	for range 2 {
		if err := os.WriteFile(s.Path(), []byte("junk"), 0o600); err != nil {
			t.Fatal(err)
		}
		to, err := s.MoveAside(at)
		if err != nil {
			t.Fatal(err)
		}
		moved = append(moved, filepath.Base(to))
	}
	want := []string{"snapshot.rls.corrupt-20260304T050607Z", "snapshot.rls.corrupt-20260304T050607Z-2"}
	if !reflect.DeepEqual(moved, want) || !reflect.DeepEqual(dirNames(t, dir), want) {
		t.Errorf("moved to %q, folder %q; want %q", moved, dirNames(t, dir), want)
	}
}

// blockingSource is an engine whose exports wait for release once started.
type blockingSource struct {
	*engine.Engine
	started chan struct{}
	release chan struct{}
	once    sync.Once
}

func (b *blockingSource) Export(ctx context.Context, now int64, fn func(engine.Record) error) (int64, error) {
	b.once.Do(func() { close(b.started) })
	<-b.release
	return b.Engine.Export(ctx, now, fn)
}

func do(t testing.TB, e *engine.Engine, now int64, reqs ...engine.Request) {
	t.Helper()
	res := make([]engine.Result, len(reqs))
	if err := e.Do(context.Background(), now, reqs, res); err != nil {
		t.Fatal(err)
	}
}

func TestSaverSavesChanges(t *testing.T) {
	dir := t.TempDir()
	store := openStore(t, dir)
	e := newEngine(t, 2)
	src := &blockingSource{Engine: e, started: make(chan struct{}), release: make(chan struct{})}
	sv := NewSaver(store, src, 0, nil)
	sv.now = func() int64 { return t0 }
	st := sv.Status()
	if st.Changes != 0 || st.Saves != 0 || !st.LastOK || st.LastBgDuration != -1 || st.InProgress {
		t.Errorf("new saver: %+v", st)
	}
	do(t, e, t0, kindRequests("a")...)
	if got := sv.Status().Changes; got != 7 {
		t.Errorf("Changes = %d after 7 writes", got)
	}
	// A background save; a second one is refused while it runs.
	if !sv.BackgroundSave() {
		t.Fatal("BackgroundSave refused")
	}
	<-src.started
	if sv.BackgroundSave() {
		t.Error("a second BackgroundSave started while one runs")
	}
	if st := sv.Status(); !st.InProgress {
		t.Errorf("during a background save: %+v", st)
	}
	// A write after the save read the change count, before its copy.
	do(t, e, t0, must(engine.TokenBucket([]byte("late"), 5, 1, 1)))
	close(src.release)
	if err := sv.Save(context.Background()); err != nil { // waits for the background save
		t.Fatal(err)
	}
	st = sv.Status()
	if st.InProgress || st.Saves != 2 || st.Changes != 0 || st.LastKeys != 8 || st.LastBgDuration < 0 || st.LastBytes == 0 {
		t.Errorf("after the saves: %+v", st)
	}
	// Nothing changed: Close writes nothing.
	before, _ := os.Stat(store.Path())
	os.Chtimes(store.Path(), time.Unix(1, 0), time.Unix(1, 0))
	if err := sv.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after, _ := os.Stat(store.Path()); !after.ModTime().Equal(time.Unix(1, 0)) {
		t.Errorf("Close rewrote an unchanged snapshot (%v, then %v)", before.ModTime(), after.ModTime())
	}
	if err := sv.Save(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Save after Close: %v", err)
	}
	if sv.BackgroundSave() {
		t.Error("BackgroundSave after Close started")
	}
}

func TestSaverPeriodic(t *testing.T) {
	store := openStore(t, t.TempDir())
	e := newEngine(t, 2)
	sv := NewSaver(store, e, time.Millisecond, nil)
	defer sv.Close(context.Background())
	// The loop saves at the wall clock; the state is young then. A save may
	// start while the batch is half applied (one shard done): the next one,
	// paced to 10 times the first's duration, then covers the rest.
	do(t, e, time.Now().UnixNano(), kindRequests("p")...)
	waitFor(t, "a periodic save of every change", func() bool {
		st := sv.Status()
		return st.Saves >= 1 && st.Changes == 0
	})
	_, recs, err := store.Read()
	if err != nil || len(recs) != 7 {
		t.Fatalf("after a periodic save: %d records, %v", len(recs), err)
	}
	st := sv.Status()
	if st.LastKeys != 7 || st.Changes != 0 {
		t.Errorf("status %+v", st)
	}
}

func TestSaverShutdownAndClose(t *testing.T) {
	for _, save := range []bool{true, false} {
		store := openStore(t, t.TempDir())
		e := newEngine(t, 2)
		sv := NewSaver(store, e, 0, nil)
		sv.now = func() int64 { return t0 }
		do(t, e, t0, kindRequests("x")...)
		if err := sv.Shutdown(context.Background(), save); err != nil {
			t.Fatal(err)
		}
		select {
		case <-sv.ShutdownRequested():
		default:
			t.Fatal("ShutdownRequested not closed")
		}
		do(t, e, t0, must(engine.TokenBucket([]byte("after"), 5, 1, 1)))
		if err := sv.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		_, recs, err := store.Read()
		switch {
		case save && (err != nil || len(recs) != 8):
			t.Errorf("SHUTDOWN then Close: %d records, %v; want the 8 keys (Close saves what came after)", len(recs), err)
		case !save && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("SHUTDOWN NOSAVE then Close: %d records, %v; want no file", len(recs), err)
		}
	}
}

func TestSaverFailure(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "gone")
	os.Mkdir(dir, 0o755)
	store := openStore(t, dir)
	e := newEngine(t, 1)
	sv := NewSaver(store, e, 0, nil)
	sv.now = func() int64 { return t0 }
	do(t, e, t0, kindRequests("f")...)
	os.Remove(dir)
	if err := sv.Save(context.Background()); err == nil {
		t.Fatal("Save into a removed folder succeeded")
	}
	if err := sv.Shutdown(context.Background(), true); !errors.Is(err, ErrShutdownSave) {
		t.Errorf("Shutdown with a failing save: %v", err)
	}
	select {
	case <-sv.ShutdownRequested():
		t.Error("a failed SHUTDOWN asked the process to stop")
	default:
	}
	st := sv.Status()
	if st.LastOK || st.Failures != 2 || st.Saves != 0 || st.Changes != 7 {
		t.Errorf("after failures: %+v", st)
	}
	os.Mkdir(dir, 0o755)
	if !sv.BackgroundSave() {
		t.Fatal("BackgroundSave refused")
	}
	waitFor(t, "the background save", func() bool { return sv.Status().Saves == 1 && !sv.Status().InProgress })
	if st := sv.Status(); !st.LastOK {
		t.Errorf("after a good save: %+v", st)
	}
	sv.Close(context.Background())
}

// waitFor polls cond until it holds or 10 s pass.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}
