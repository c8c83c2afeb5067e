package raftlog

import (
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	raftboltdb "github.com/hashicorp/raft-boltdb/v2"
)

// BenchmarkStoreLogs appends one 12 KiB entry per StoreLogs, synced, to
// this store and to raft-boltdb (what cluster used before), in the
// benchmark's temporary folder: the cost of one Raft append on this disk.
// Run it alone: it measures the disk as much as the code.
func BenchmarkStoreLogs(b *testing.B) {
	data := make([]byte, 12<<10)
	for i := range data {
		data[i] = byte(i * 31)
	}
	run := func(b *testing.B, s raft.LogStore) {
		l := &raft.Log{Term: 1, Type: raft.LogCommand, Data: data}
		b.SetBytes(int64(len(data)))
		b.ResetTimer()
		for i := range b.N {
			l.Index = uint64(i) + 1
			l.AppendedAt = time.Now()
			if err := s.StoreLogs([]*raft.Log{l}); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("raftlog", func(b *testing.B) {
		s, err := Open(b.TempDir(), Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, s)
	})
	b.Run("raftboltdb", func(b *testing.B) {
		s, err := raftboltdb.New(raftboltdb.Options{Path: filepath.Join(b.TempDir(), "raft.db")})
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		run(b, s)
	})
}
