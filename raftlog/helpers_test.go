package raftlog

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// t0 is the AppendedAt of entry 0; entry i is appended i ms later.
var t0 = time.Date(2026, 12, 1, 10, 0, 0, 123456789, time.UTC)

// entry is the log entry the tests store at index i (term term): every
// field depends on i, sizes vary from a few bytes to a few hundred, and
// every seventh has no data, every fifth no extensions, every eleventh a
// zero AppendedAt.
func entry(i, term uint64) *raft.Log {
	l := &raft.Log{
		Index:      i,
		Term:       term,
		Type:       raft.LogType(i % 6),
		AppendedAt: t0.Add(time.Duration(i) * time.Millisecond),
	}
	if i%7 != 0 {
		l.Data = bytes.Repeat([]byte{byte(i), byte(i >> 8), byte(term)}, int(1+i*37%150))
	}
	if i%5 != 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d-%d", i, term))
	}
	if i%11 == 0 {
		l.AppendedAt = time.Time{}
	}
	return l
}

func entries(from, to, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := from; i <= to; i++ {
		out = append(out, entry(i, term))
	}
	return out
}

// sameLog fails unless got is want, field by field (nil and empty alike).
func sameLog(t testing.TB, got, want *raft.Log) {
	t.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type ||
		!got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() ||
		!bytes.Equal(got.Data, want.Data) || !bytes.Equal(got.Extensions, want.Extensions) {
		t.Fatalf("index %d: got {%d %d %v %v data %d bytes ext %q}, want {%d %d %v %v data %d bytes ext %q}",
			want.Index, got.Index, got.Term, got.Type, got.AppendedAt, len(got.Data), got.Extensions,
			want.Index, want.Term, want.Type, want.AppendedAt, len(want.Data), want.Extensions)
	}
}

func open(t testing.TB, dir string, opts Options) *Store {
	t.Helper()
	s, err := Open(dir, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func store(t testing.TB, s *Store, logs []*raft.Log) {
	t.Helper()
	if err := s.StoreLogs(logs); err != nil {
		t.Fatalf("StoreLogs %d-%d: %v", logs[0].Index, logs[len(logs)-1].Index, err)
	}
}

// logReader is what bounds and holds read: a Store or a GroupLog.
type logReader interface {
	FirstIndex() (uint64, error)
	LastIndex() (uint64, error)
	GetLog(index uint64, out *raft.Log) error
}

// bounds fails unless the store holds first..last (0, 0: empty).
func bounds(t testing.TB, s logReader, first, last uint64) {
	t.Helper()
	f, err1 := s.FirstIndex()
	l, err2 := s.LastIndex()
	if err := errors.Join(err1, err2); err != nil {
		t.Fatal(err)
	}
	if f != first || l != last {
		t.Fatalf("log holds %d-%d, want %d-%d", f, l, first, last)
	}
}

// holds fails unless s holds exactly first..last with term(i) as each
// entry's term, and nothing around.
func holds(t testing.TB, s logReader, first, last uint64, term func(uint64) uint64) {
	t.Helper()
	bounds(t, s, first, last)
	var l raft.Log
	for i := first; i <= last && last != 0; i++ {
		if err := s.GetLog(i, &l); err != nil {
			t.Fatalf("GetLog %d: %v", i, err)
		}
		sameLog(t, &l, entry(i, term(i)))
	}
	for _, i := range []uint64{0, first - 1, last + 1} {
		if i == 0 && first == 0 {
			continue
		}
		if err := s.GetLog(i, &l); !errors.Is(err, raft.ErrLogNotFound) {
			t.Fatalf("GetLog %d outside %d-%d: %v, want ErrLogNotFound", i, first, last, err)
		}
	}
}

func term1(uint64) uint64 { return 1 }

// segFiles lists dir's segment files, oldest first.
func segFiles(t testing.TB, dir string) []string {
	t.Helper()
	m, err := filepath.Glob(filepath.Join(dir, "log-*.seg"))
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(m)
	return m
}

func fileSize(t testing.TB, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// copyDir copies the files of src into a new temporary folder.
func copyDir(t testing.TB, src string) string {
	t.Helper()
	dst := t.TempDir()
	es, err := os.ReadDir(src)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		in, err := os.Open(filepath.Join(src, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out, err := os.Create(filepath.Join(dst, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(out, in); err != nil {
			t.Fatal(err)
		}
		in.Close()
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}
