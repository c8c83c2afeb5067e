package raftlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// segment is one log file. Its fields change only under the Store's wmu
// and mu both, so readers holding mu.RLock see them stable.
type segment struct {
	first   uint64 // index of offsets[0], from the file's name
	path    string
	f       *os.File
	offsets []int64 // start of each record, in index order
	size    int64   // end of the last record: the file's good size
	alloc   int64   // the file's length: past size it holds zeros (preallocated)
	synced  int64   // the records before it are synced (Append leaves some that are not)
}

// last is the index of the segment's last record, first-1 when it has none.
func (g *segment) last() uint64 { return g.first + uint64(len(g.offsets)) - 1 }

// span is the byte range of index's record; index is in the segment.
func (g *segment) span(index uint64) (start, end int64) {
	k := index - g.first
	start, end = g.offsets[k], g.size
	if k+1 < uint64(len(g.offsets)) {
		end = g.offsets[k+1]
	}
	return start, end
}

const (
	segPrefix = "log-"
	segSuffix = ".seg"
)

func segName(first uint64) string { return fmt.Sprintf("%s%020d%s", segPrefix, first, segSuffix) }

// parseSegName returns the first index a segment's file name carries.
func parseSegName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, segPrefix)
	if !ok {
		return 0, false
	}
	digits, ok = strings.CutSuffix(digits, segSuffix)
	if !ok || len(digits) != 20 {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 64)
	return v, err == nil
}

// scanError is the first bad record of a segment. torn: it may be the
// tail of a write that never completed, and may be cut off in the last
// segment; otherwise it is damage no write makes.
type scanError struct {
	off    int64
	reason string
	torn   bool
}

// scan reads every record of g's file from the start, filling g.offsets
// and g.size up to the first bad record, which it returns (nil: the
// whole file is good).
func (g *segment) scan() (*scanError, error) {
	fi, err := g.f.Stat()
	if err != nil {
		return nil, err
	}
	fileSize := fi.Size()
	g.alloc = fileSize
	r := bufio.NewReaderSize(io.NewSectionReader(g.f, 0, fileSize), 1<<20)
	var h [headerSize]byte
	var body []byte
	off := int64(0)
	for off < fileSize {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return &scanError{off, "short header", true}, nil
			}
			return nil, err
		}
		n, why := checkHeader(h[:], fileSize-off-headerSize)
		if n == 0 && h == ([headerSize]byte{}) {
			// The zeros StoreLogs writes ahead of its records: the end.
			// (The last segment is cut here at Open, so no bytes of an
			// older write can outlive the zeros before them.)
			return nil, nil
		}
		if why != "" {
			return g.classify(off, why, fileSize)
		}
		if int64(cap(body)) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return nil, err
		}
		torn, bad := checkBody(h[:], body)
		if torn != "" {
			return g.classify(off, torn, fileSize)
		}
		if bad != "" {
			return &scanError{off, bad, false}, nil
		}
		if got, want := bodyIndex(body), g.first+uint64(len(g.offsets)); got != want {
			return &scanError{off, fmt.Sprintf("index %d where %d belongs", got, want), false}, nil
		}
		g.offsets = append(g.offsets, off)
		off += headerSize + n
		g.size = off
	}
	return nil, nil
}

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// classify decides whether the bad record at off (why) is a torn write,
// which Open may cut off the last segment, or damage, which it must
// refuse. A crash leaves an unsynced final write short, or with sectors
// that never reached the disk (zeros, or what the preallocated file held
// there), maybe with later sectors of the same write intact. A bit that
// flipped in a written record leaves every sector of it written. So the
// record is torn when no valid record follows it, or when a whole sector
// between it and the next valid record is zeros; otherwise a valid
// record follows a bad one that lost no sector: damage, which would
// otherwise cut acknowledged records.
func (g *segment) classify(off int64, why string, fileSize int64) (*scanError, error) {
	rest := make([]byte, fileSize-off)
	if _, err := g.f.ReadAt(rest, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	next := g.first + uint64(len(g.offsets))
	at, index := findRecord(rest[1:], next)
	if at < 0 {
		return &scanError{off, why, true}, nil
	}
	at++ // in rest
	if sectorLost(rest, off, at) {
		return &scanError{off, why, true}, nil
	}
	return &scanError{off, fmt.Sprintf("%s, with a valid record (index %d) after it at offset %d: damage, not a torn write", why, index, off+int64(at)), false}, nil
}

// sectorLost reports whether a whole sector of rest, the file from offset
// off on, lies wholly zero before rest[at]: a sector of the final write
// that never reached the disk, later ones having (classify).
func sectorLost(rest []byte, off int64, at int) bool {
	for s := (sectorSize - off%sectorSize) % sectorSize; s+sectorSize <= int64(at); s += sectorSize {
		if allZero(rest[s : s+sectorSize]) {
			return true
		}
	}
	return false
}

// findRecord returns the offset in b of the first whole record with a
// right CRC and an index at least min (and not absurdly far past it),
// -1 when there is none.
func findRecord(b []byte, min uint64) (int, uint64) {
	for p := 0; p+headerSize+fixedSize <= len(b); p++ {
		n := int64(binary.LittleEndian.Uint32(b[p:]))
		if n < fixedSize || int64(p)+headerSize+n > int64(len(b)) {
			continue
		}
		body := b[p+headerSize : int64(p)+headerSize+n]
		index := bodyIndex(body)
		if index < min || index-min > 1<<24 {
			continue
		}
		if torn, bad := checkBody(b[p:p+headerSize], body); torn == "" && bad == "" {
			return p, index
		}
	}
	return -1, 0
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// openSegment opens the segment file path for reading and appending.
func openSegment(dir string, first uint64, flag int) (*segment, error) {
	path := filepath.Join(dir, segName(first))
	f, err := os.OpenFile(path, os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, err
	}
	return &segment{first: first, path: path, f: f}, nil
}
