package raftlog

import (
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// BenchmarkSharedAppend has 1, 3 and 9 groups, one goroutine each (Raft
// stores a group's entries from one goroutine), append one 256-byte
// entry per StoreLogs, synced, until b.N appends are done in all: on one
// shared log, and for comparison on one Store per group (today's layout).
// fsyncs/append is the fdatasyncs of segment files per StoreLogs.
// Run it alone: it measures the disk as much as the code.
func BenchmarkSharedAppend(b *testing.B) {
	data := make([]byte, 256)
	for i := range data {
		data[i] = byte(i * 31)
	}
	run := func(b *testing.B, stores []raft.LogStore, syncs func() uint64) {
		b.SetBytes(int64(len(data)))
		var done atomic.Int64
		var wg sync.WaitGroup
		errc := make(chan error, len(stores))
		before := syncs()
		b.ResetTimer()
		for _, st := range stores {
			wg.Add(1)
			go func() {
				defer wg.Done()
				l := &raft.Log{Term: 1, Type: raft.LogCommand, Data: data}
				for i := uint64(1); done.Add(1) <= int64(b.N); i++ {
					l.Index = i
					l.AppendedAt = time.Now()
					if err := st.StoreLogs([]*raft.Log{l}); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		b.StopTimer()
		close(errc)
		for err := range errc {
			b.Fatal(err)
		}
		b.ReportMetric(float64(syncs()-before)/float64(b.N), "fsyncs/append")
	}
	for _, n := range []int{1, 3, 9} {
		b.Run(fmt.Sprintf("shared/groups=%d", n), func(b *testing.B) {
			s, err := OpenShared(b.TempDir(), Options{})
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			var stores []raft.LogStore
			for id := range n {
				g, err := s.Group(uint32(id))
				if err != nil {
					b.Fatal(err)
				}
				stores = append(stores, g)
			}
			run(b, stores, func() uint64 { return s.Stats().Syncs })
		})
		b.Run(fmt.Sprintf("store-per-group/groups=%d", n), func(b *testing.B) {
			var stores []raft.LogStore
			var count atomic.Uint64
			for range n {
				st, err := Open(b.TempDir(), Options{})
				if err != nil {
					b.Fatal(err)
				}
				defer st.Close()
				st.fsync = func(f *os.File) error { count.Add(1); return fdatasync(f) }
				stores = append(stores, st)
			}
			run(b, stores, count.Load)
		})
	}
}
