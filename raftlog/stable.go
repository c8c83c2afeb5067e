package raftlog

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sync"
)

// The stable file's layout, and why it is written in place, is in doc.go.
const (
	stableName     = "stable"
	slotHeaderSize = 16 // seq, length, crc
	minSlotSize    = 4096
)

// stableFile is the stable store plus the log's first index. Its own mutex
// guards it: Raft's Set and GetUint64 come from other goroutines than
// its StoreLogs, and a front deletion (under the Store's wmu) writes it
// too.
type stableFile struct {
	mu       sync.Mutex
	path     string
	f        *os.File // nil once closed
	slotSize int64
	seq      uint64 // the newest valid slot's
	first    uint64 // the log's first index; 0: none stored
	kv       map[string][]byte
	buf      []byte

	// unsure: the last write failed, and the slot it went to may hold
	// it all the same (a sync that failed after the data reached the
	// disk). The next write goes to that slot again, over it.
	unsure bool

	sync    func(*os.File) error // of a file's data, unless NoSync
	syncDir func() error         // of the store's folder, unless NoSync
}

// openStable loads dir's stable file, creating it when there is none.
func openStable(dir string, sync func(*os.File) error, syncDir func() error) (*stableFile, error) {
	st := &stableFile{path: filepath.Join(dir, stableName), kv: map[string][]byte{}, sync: sync, syncDir: syncDir}
	data, err := os.ReadFile(st.path)
	if errors.Is(err, fs.ErrNotExist) {
		st.f, err = st.rewrite(minSlotSize, 1, 0, st.kv)
		if err != nil {
			if st.f != nil {
				st.f.Close()
			}
			return nil, err
		}
		st.seq, st.slotSize = 1, minSlotSize
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := st.load(data); err != nil {
		return nil, fmt.Errorf("raftlog: %s: %w", st.path, err)
	}
	st.f, err = os.OpenFile(st.path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	return st, nil
}

// load takes the newest valid slot of data, the whole file.
func (st *stableFile) load(data []byte) error {
	size := int64(len(data))
	if size < 2*minSlotSize || size%2 != 0 {
		return fmt.Errorf("%w: %d bytes, not two slots", ErrCorrupt, size)
	}
	st.slotSize = size / 2
	found := false
	for i := range int64(2) {
		slot := data[i*st.slotSize : (i+1)*st.slotSize]
		seq, payload, ok := parseSlot(slot)
		if !ok || (found && seq <= st.seq) {
			continue
		}
		first, kv, err := parsePayload(payload)
		if err != nil {
			return fmt.Errorf("slot %d (offset %d): %w", i, i*st.slotSize, err)
		}
		st.seq, st.first, st.kv, found = seq, first, kv, true
	}
	if !found {
		return fmt.Errorf("%w: neither slot is valid", ErrCorrupt)
	}
	return nil
}

// parseSlot checks a slot's CRC and returns its seq and payload.
func parseSlot(slot []byte) (seq uint64, payload []byte, ok bool) {
	seq = binary.LittleEndian.Uint64(slot)
	n := uint64(binary.LittleEndian.Uint32(slot[8:]))
	if seq == 0 || n > uint64(len(slot)-slotHeaderSize) {
		return 0, nil, false
	}
	payload = slot[slotHeaderSize : slotHeaderSize+n]
	crc := crc32.Update(crc32.Checksum(slot[:12], castagnoli), castagnoli, payload)
	return seq, payload, crc == binary.LittleEndian.Uint32(slot[12:])
}

func parsePayload(p []byte) (first uint64, kv map[string][]byte, err error) {
	bad := fmt.Errorf("%w: payload does not parse", ErrCorrupt)
	if len(p) < 12 {
		return 0, nil, bad
	}
	first = binary.LittleEndian.Uint64(p)
	count := binary.LittleEndian.Uint32(p[8:])
	p = p[12:]
	field := func() ([]byte, bool) {
		if len(p) < 4 {
			return nil, false
		}
		n := uint64(binary.LittleEndian.Uint32(p))
		if n > uint64(len(p)-4) {
			return nil, false
		}
		v := bytes.Clone(p[4 : 4+n])
		p = p[4+n:]
		return v, true
	}
	kv = make(map[string][]byte, count)
	for range count {
		k, ok1 := field()
		v, ok2 := field()
		if !ok1 || !ok2 {
			return 0, nil, bad
		}
		kv[string(k)] = v
	}
	if len(p) != 0 {
		return 0, nil, bad
	}
	return first, kv, nil
}

// encodeSlot builds the slot for seq holding first and kv into st.buf.
func (st *stableFile) encodeSlot(seq, first uint64, kv map[string][]byte) []byte {
	b := append(st.buf[:0], make([]byte, slotHeaderSize)...)
	b = binary.LittleEndian.AppendUint64(b, first)
	b = binary.LittleEndian.AppendUint32(b, uint32(len(kv)))
	keys := make([]string, 0, len(kv))
	for k := range kv {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(k)))
		b = append(b, k...)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(kv[k])))
		b = append(b, kv[k]...)
	}
	binary.LittleEndian.PutUint64(b, seq)
	binary.LittleEndian.PutUint32(b[8:], uint32(len(b)-slotHeaderSize))
	crc := crc32.Update(crc32.Checksum(b[:12], castagnoli), castagnoli, b[slotHeaderSize:])
	binary.LittleEndian.PutUint32(b[12:], crc)
	st.buf = b
	return b
}

// write stores first and kv as the next slot; the caller holds st.mu.
// On failure nothing changes in memory or in the last slot written
// successfully.
func (st *stableFile) write(first uint64, kv map[string][]byte) error {
	if st.f == nil {
		return ErrClosed
	}
	seq := st.seq + 1
	slot := st.encodeSlot(seq, first, kv)
	if size := int64(len(slot)); size > st.slotSize {
		// Grow the slots: a new file, through a rename.
		slotSize := (size + minSlotSize - 1) / minSlotSize * minSlotSize
		f, err := st.rewrite(slotSize, seq, first, kv)
		if f == nil {
			return err
		}
		// Renamed: the new file is the stable file now, even when
		// syncing the folder failed.
		st.f.Close()
		st.f, st.slotSize = f, slotSize
		st.seq, st.first, st.kv, st.unsure = seq, first, kv, false
		return err
	}
	_, err := st.f.WriteAt(slot, int64(seq%2)*st.slotSize)
	if err == nil {
		err = st.sync(st.f)
	}
	if err != nil {
		st.unsure = true
		return fmt.Errorf("raftlog: %w", err)
	}
	st.seq, st.first, st.kv, st.unsure = seq, first, kv, false
	return nil
}

// rewrite creates the file anew, with slots of slotSize and the slot for
// seq holding first and kv, through a temporary file and a rename, and
// returns it open: non-nil once renamed, even with an error (syncing the
// folder failed).
func (st *stableFile) rewrite(slotSize int64, seq, first uint64, kv map[string][]byte) (*os.File, error) {
	tmp := st.path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	data := make([]byte, 2*slotSize)
	copy(data[int64(seq%2)*slotSize:], st.encodeSlot(seq, first, kv))
	_, err = f.Write(data)
	if err == nil {
		err = st.sync(f)
	}
	if err == nil {
		err = os.Rename(tmp, st.path)
	}
	if err != nil {
		f.Close()
		os.Remove(tmp)
		return nil, fmt.Errorf("raftlog: %w", err)
	}
	if err := st.syncDir(); err != nil {
		return f, err
	}
	return f, nil
}

func (st *stableFile) set(key, val []byte) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	kv := make(map[string][]byte, len(st.kv)+1)
	for k, v := range st.kv {
		kv[k] = v
	}
	kv[string(key)] = bytes.Clone(val)
	return st.write(st.first, kv)
}

func (st *stableFile) get(key []byte) ([]byte, error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.f == nil {
		return nil, ErrClosed
	}
	v, ok := st.kv[string(key)]
	if !ok {
		return nil, ErrKeyNotFound
	}
	return bytes.Clone(v), nil
}

// setFirst stores the log's first index (0: none).
func (st *stableFile) setFirst(first uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if first == st.first && !st.unsure {
		return nil
	}
	return st.write(first, st.kv)
}

func (st *stableFile) storedFirst() uint64 {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.first
}

// allowFirst makes sure the stored first index, including one a failed
// write may have left on disk, does not hide index.
func (st *stableFile) allowFirst(index uint64) error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.first <= index && !st.unsure {
		return nil
	}
	return st.write(0, st.kv)
}

func (st *stableFile) close() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.f == nil {
		return nil
	}
	err := st.f.Close()
	st.f = nil
	return err
}
