package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStable(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	if _, err := s.Get([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("Get of a missing key: %v, want exactly \"not found\"", err)
	}
	if _, err := s.GetUint64([]byte("CurrentTerm")); err == nil || err.Error() != "not found" {
		t.Fatalf("GetUint64 of a missing key: %v, want exactly \"not found\"", err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("empty"), nil); err != nil {
		t.Fatal(err)
	}
	for i := range uint64(5) { // both slots written, several times
		if err := s.SetUint64([]byte("LastVoteTerm"), 100+i); err != nil {
			t.Fatal(err)
		}
	}
	check := func(s *Store) {
		t.Helper()
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
			t.Fatalf("CurrentTerm: %d, %v", v, err)
		}
		if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 104 {
			t.Fatalf("LastVoteTerm: %d, %v", v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
			t.Fatalf("LastVoteCand: %q, %v", v, err)
		}
		if v, err := s.Get([]byte("CurrentTerm")); err != nil || !bytes.Equal(v, []byte{0, 0, 0, 0, 0, 0, 0, 7}) {
			t.Fatalf("CurrentTerm's bytes: %x, %v; want big-endian like raft-boltdb", v, err)
		}
		if v, err := s.Get([]byte("empty")); err != nil || len(v) != 0 {
			t.Fatalf("empty: %q, %v", v, err)
		}
		if _, err := s.GetUint64([]byte("LastVoteCand")); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("GetUint64 of a 6-byte value: %v", err)
		}
	}
	check(s)
	v, _ := s.Get([]byte("LastVoteCand"))
	v[0] = 'X' // the caller's copy
	check(s)
	s.Close()
	if _, err := s.Get([]byte("CurrentTerm")); !errors.Is(err, ErrClosed) {
		t.Fatalf("Get after Close: %v", err)
	}
	s = open(t, dir, Options{})
	check(s)

	// A torn write of the newer slot: the older one is read.
	s.Close()
	path := filepath.Join(dir, stableName)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	newer := int64(0)
	if binary.LittleEndian.Uint64(data[minSlotSize:]) > binary.LittleEndian.Uint64(data) {
		newer = minSlotSize
	}
	torn := bytes.Clone(data)
	torn[newer+20] ^= 1
	os.WriteFile(path, torn, 0o644)
	s = open(t, dir, Options{})
	if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 103 {
		t.Fatalf("after a torn write: LastVoteTerm %d, %v; want the older slot's 103", v, err)
	}
	if err := s.SetUint64([]byte("LastVoteTerm"), 200); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir, Options{})
	if v, err := s.GetUint64([]byte("LastVoteTerm")); err != nil || v != 200 {
		t.Fatalf("LastVoteTerm %d, %v; want 200", v, err)
	}

	// Both slots bad: Open refuses, naming the file.
	s.Close()
	torn[minSlotSize-newer+20] ^= 1
	os.WriteFile(path, torn, 0o644)
	if _, err := Open(dir, Options{}); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
		t.Fatalf("both slots bad: %v", err)
	}
}

// TestStableGrows: values beyond a slot move the file to larger slots.
func TestStableGrows(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, Options{})
	big := bytes.Repeat([]byte("0123456789"), 1000)
	if err := s.Set([]byte("big"), big); err != nil {
		t.Fatal(err)
	}
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	s = reopen(t, s, dir, Options{})
	if v, err := s.Get([]byte("big")); err != nil || !bytes.Equal(v, big) {
		t.Fatalf("big: %d bytes, %v", len(v), err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Fatalf("CurrentTerm %d, %v", v, err)
	}
	if size := fileSize(t, filepath.Join(dir, stableName)); size <= 2*minSlotSize {
		t.Fatalf("stable file %d bytes, want it grown", size)
	}
}
