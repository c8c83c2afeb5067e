package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/persist"
)

// TestSnapshotCost measures what a Raft snapshot of a large group costs,
// the way snapshots were taken before they were streamed (the state
// copied and sorted under the FSM's lock, Persist writing that copy;
// Restore decoding the whole snapshot, then importing it) and the way
// they are now (a mark under the lock, a point-in-time walk in Persist;
// Restore streaming), side by side in one process:
//
//   - snapshot time: Snapshot plus Persist into a file;
//   - the longest pause in applies during it: a goroutine applies entries
//     of 32 RL.ALLOWs back to back and the longest Apply call is kept;
//   - transfer: the file copied over a loopback TCP connection into
//     another file (what Raft's network transport and file snapshot store
//     do with InstallSnapshot);
//   - restore time, and the receiver's memory: the peak, sampled every
//     10 ms, of the Go heap plus the engine's off-heap tables during the
//     restore, above what the process held before it.
//
// It runs only when RLSERVER_SNAPSHOT_KEYS is set (make snapshot-cost):
// RLSERVER_SNAPSHOT_KEYS=10000000 needs about 6 GiB and a few minutes.
func TestSnapshotCost(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("RLSERVER_SNAPSHOT_KEYS"))
	if n <= 0 {
		t.Skip("set RLSERVER_SNAPSHOT_KEYS (make snapshot-cost)")
	}
	shards := runtime.GOMAXPROCS(0)
	eng := engine.New(shards)
	defer eng.Close()
	f := newFSM(eng)
	start := time.Now()
	idx := uint64(0)
	const batch = 1000
	for i := 0; i < n; i += batch {
		reqs := make([]engine.Request, 0, batch)
		for j := i; j < min(i+batch, n); j++ {
			reqs = append(reqs, allow(t, costKey(j), 100, 0.001, 1))
		}
		idx++
		f.Apply(&raft.Log{Index: idx, Type: raft.LogCommand, Data: snapEntry(t0, reqs...)})
	}
	t.Logf("%d keys on %d shards, loaded in %v; off-heap tables %d MiB", n, shards, time.Since(start).Round(time.Millisecond), engine.OffHeapBytes()>>20)
	dir := t.TempDir()

	// Applies run all along a snapshot; load returns the longest Apply.
	load := func(stop <-chan struct{}) <-chan time.Duration {
		out := make(chan time.Duration, 1)
		go func() {
			r := rand.New(rand.NewPCG(1, 2))
			var longest time.Duration
			for k := 0; ; k++ {
				select {
				case <-stop:
					out <- longest
					return
				default:
				}
				reqs := make([]engine.Request, 32)
				for i := range reqs {
					reqs[i] = allow(t, costKey(r.IntN(n)), 100, 0.001, 1)
				}
				data := snapEntry(t0+int64(k), reqs...)
				i := atomic.AddUint64(&idx, 1)
				s := time.Now()
				f.Apply(&raft.Log{Index: i, Type: raft.LogCommand, Data: data})
				longest = max(longest, time.Since(s))
			}
		}()
		return out
	}
	measure := func(name string, take func(path string) error) string {
		runtime.GC()
		path := filepath.Join(dir, name)
		stop := make(chan struct{})
		longest := load(stop)
		s := time.Now()
		err := take(path)
		took := time.Since(s)
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		fi, _ := os.Stat(path)
		t.Logf("%-6s snapshot: %8v, %4d MiB, longest apply during it %v", name, took.Round(time.Millisecond), fi.Size()>>20, (<-longest).Round(time.Microsecond))
		return path
	}
	// The machine's own noise: the same load for a while, no snapshot.
	{
		stop := make(chan struct{})
		longest := load(stop)
		time.Sleep(3 * time.Second)
		close(stop)
		t.Logf("no snapshot (3 s of the same load): longest apply %v", (<-longest).Round(time.Microsecond))
	}
	// RLSERVER_SNAPSHOT_ONLY=after skips the old way (to profile the new).
	old := os.Getenv("RLSERVER_SNAPSHOT_ONLY") != "after"
	before := ""
	if old {
		before = measure("before", beforeSnapshot(f))
	}
	after := measure("after", func(path string) error {
		snap, err := f.Snapshot()
		if err != nil {
			return err
		}
		defer snap.Release()
		return writeFile(path, func(w io.Writer) error {
			return snap.Persist(&fileSink{w: w})
		})
	})

	// Transfer: loopback TCP, file to file.
	copied := filepath.Join(dir, "received")
	s := time.Now()
	if err := tcpCopy(after, copied); err != nil {
		t.Fatal(err)
	}
	t.Logf("transfer over loopback TCP (file to file): %v", time.Since(s).Round(time.Millisecond))

	restore := func(name string, path string, fn func(g *fsm, r io.ReadCloser) error) {
		eng2 := engine.New(shards)
		defer eng2.Close()
		g := newFSM(eng2)
		fh, err := os.Open(path)
		if err != nil {
			t.Fatal(err)
		}
		runtime.GC()
		base := memNow()
		stop := make(chan struct{})
		peak := make(chan int64, 1)
		go func() {
			var p int64
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				p = max(p, memNow())
				select {
				case <-stop:
					peak <- p
					return
				case <-tick.C:
				}
			}
		}()
		s := time.Now()
		err = fn(g, fh)
		took := time.Since(s)
		close(stop)
		if err != nil {
			t.Fatal(err)
		}
		if got, _ := eng2.Len(context.Background(), t0); got != n {
			t.Fatalf("%s restore: %d keys, want %d", name, got, n)
		}
		runtime.GC()
		state := memNow() - base
		t.Logf("%-6s restore: %8v, receiver's peak %5d MiB above its start (the restored state itself: %d MiB)", name, took.Round(time.Millisecond), (<-peak-base)>>20, state>>20)
	}
	if old {
		restore("before", before, restoreWhole)
	}
	restore("after", copied, func(g *fsm, r io.ReadCloser) error { return g.Restore(r) })
}

// restoreWhole is how Restore worked before streaming: decode the whole
// snapshot, then import it.
func restoreWhole(g *fsm, r io.ReadCloser) error {
	defer r.Close()
	h, recs, err := persist.Decode(bufio.NewReaderSize(r, 256<<10))
	if err != nil {
		return err
	}
	ctx := context.Background()
	if err := g.eng.Flush(ctx); err != nil {
		return err
	}
	return g.eng.Import(ctx, h.ClockNanos, recs)
}

// beforeSnapshot is how a snapshot was taken before streaming: the state
// copied and sorted under the FSM's lock, then written.
func beforeSnapshot(f *fsm) func(path string) error {
	return func(path string) error {
		f.mu.Lock()
		clock, applied := f.now.Load(), f.applied.Load()
		var recs []engine.Record
		_, err := f.eng.Export(context.Background(), clock, func(r engine.Record) error {
			recs = append(recs, r)
			return nil
		})
		persist.SortRecords(recs)
		f.mu.Unlock()
		if err != nil {
			return err
		}
		return writeFile(path, func(w io.Writer) error {
			return writeSnapshotSorted(w, clock, applied, recs)
		})
	}
}

func costKey(i int) string { return "user:" + strconv.Itoa(i) }

// memNow is the Go heap in use plus the engine's off-heap tables.
func memNow() int64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc) + engine.OffHeapBytes()
}

// writeSnapshotSorted is how Persist wrote a snapshot before streaming:
// records sorted by key, no Unordered flag.
func writeSnapshotSorted(w io.Writer, clock int64, applied uint64, recs []engine.Record) error {
	meta := binary.AppendUvarint([]byte{metaVersion}, applied)
	return persist.Encode(w, persist.Header{ClockNanos: clock, Meta: meta}, recs)
}

func writeFile(path string, fn func(io.Writer) error) error {
	fh, err := os.Create(path)
	if err != nil {
		return err
	}
	w := bufio.NewWriterSize(fh, 256<<10)
	if err := fn(w); err != nil {
		fh.Close()
		return err
	}
	if err := w.Flush(); err != nil {
		fh.Close()
		return err
	}
	return fh.Close()
}

// fileSink is a raft.SnapshotSink over a writer.
type fileSink struct{ w io.Writer }

func (s *fileSink) Write(p []byte) (int, error) { return s.w.Write(p) }
func (s *fileSink) ID() string                  { return "cost" }
func (s *fileSink) Cancel() error               { return nil }
func (s *fileSink) Close() error                { return nil }

// tcpCopy sends the file src over a loopback TCP connection into dst.
func tcpCopy(src, dst string) error {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	defer ln.Close()
	var wg sync.WaitGroup
	var recvErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		c, err := ln.Accept()
		if err != nil {
			recvErr = err
			return
		}
		defer c.Close()
		recvErr = writeFile(dst, func(w io.Writer) error {
			_, err := io.Copy(w, bufio.NewReader(c))
			return err
		})
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return err
	}
	fh, err := os.Open(src)
	if err != nil {
		c.Close()
		return err
	}
	_, err = io.Copy(c, bufio.NewReader(fh))
	fh.Close()
	c.Close()
	wg.Wait()
	if err != nil {
		return err
	}
	if recvErr != nil {
		return fmt.Errorf("receiver: %w", recvErr)
	}
	return nil
}
