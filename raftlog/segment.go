package raftlog

import (
	"fmt"
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

// storeFrames is a Store's record format, for scan.
var storeFrames = frames{min: fixedSize, check: checkBody, what: "index"}

// scan reads every record of g's file from the start, filling g.offsets
// and g.size up to the first bad record, which it returns (nil: the
// whole file is good).
func (g *segment) scan() (*frameError, error) {
	fi, err := g.f.Stat()
	if err != nil {
		return nil, err
	}
	g.alloc = fi.Size()
	end, bad, err := storeFrames.scan(g.f, g.alloc, g.first, func(off int64, body []byte) error {
		g.offsets = append(g.offsets, off)
		return nil
	})
	g.size = end
	return bad, err
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
