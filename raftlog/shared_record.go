package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/hashicorp/raft"
)

// The shared log's record layout is in doc.go (Shared log).
const (
	walPrefixSize = 13 // seq, group, kind: the least a record's body holds
	walPrefix     = "wal-"
)

// walKind is what a shared log record does. The values are on disk:
// append-only, never renumbered.
type walKind uint8

const (
	walEntry walKind = 1 // payload: a raft.Log's fields (appendEntry); puts the group's entry at its index
	walFront walKind = 2 // payload: first uint64; deletes the group's entries below first
	walBack  walKind = 3 // payload: lo uint64; deletes the group's entries from lo on (0: all of them)
	walSet   walKind = 4 // payload: keyLen uint32, key, value; sets one of the group's stable keys
	walDrop  walKind = 5 // no payload; deletes the group's entries and stable keys
)

func walName(first uint64) string { return fmt.Sprintf("%s%020d%s", walPrefix, first, segSuffix) }

// parseWalName returns the seq a shared segment's file name carries.
func parseWalName(name string) (uint64, bool) {
	digits, ok := strings.CutPrefix(name, walPrefix)
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

// walBegin appends the header (length and CRC still zero) and prefix of
// a record to buf; walEnd completes it.
func walBegin(buf []byte, seq uint64, group uint32, kind walKind) []byte {
	buf = append(buf, 0, 0, 0, 0, 0, 0, 0, 0)
	buf = binary.LittleEndian.AppendUint64(buf, seq)
	buf = binary.LittleEndian.AppendUint32(buf, group)
	return append(buf, byte(kind))
}

// walEnd fills in the length and CRC of the record begun at start.
func walEnd(buf []byte, start int) []byte {
	binary.LittleEndian.PutUint32(buf[start:], uint32(len(buf)-start-headerSize))
	walSeal(buf[start:])
	return buf
}

// walSeal sets the CRC of rec, one whole record.
func walSeal(rec []byte) {
	binary.LittleEndian.PutUint32(rec[4:], crc32.Checksum(rec[headerSize:], castagnoli))
}

// walEntrySize is the body length of l's entry record; above
// math.MaxUint32 it cannot be written.
func walEntrySize(l *raft.Log) uint64 {
	return walPrefixSize + fixedSize + uint64(len(l.Data)) + uint64(len(l.Extensions))
}

// walCheck checks body against the CRC in its header h: torn when the
// CRC does not match, bad when it does but the fields do not fit (no
// torn write makes that).
func walCheck(h, body []byte) (torn, bad string) {
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return "CRC mismatch", ""
	}
	p := body[walPrefixSize:]
	switch kind := walKind(body[12]); kind {
	case walEntry:
		if why := entryBad(p); why != "" {
			return "", why
		}
		if bodyIndex(p) == 0 {
			return "", "entry at index 0"
		}
	case walFront, walBack:
		if len(p) != 8 {
			return "", fmt.Sprintf("deletion of %d bytes, not 8", len(p))
		}
	case walSet:
		if len(p) < 4 || uint64(binary.LittleEndian.Uint32(p)) > uint64(len(p)-4) {
			return "", "stable key past the record's end"
		}
	case walDrop:
		if len(p) != 0 {
			return "", fmt.Sprintf("group drop with %d bytes", len(p))
		}
	default:
		return "", fmt.Sprintf("unknown record kind %d", kind)
	}
	return "", ""
}

// walRec is one checked record, as scan hands it on.
type walRec struct {
	off     int64
	n       uint32 // header and body
	seq     uint64
	group   uint32
	kind    walKind
	payload []byte // valid during the callback only
}

// walSeg is one shared segment file. Its fields change under the
// writer's lock (Shared.wmu) and, those readers use, under mu too.
type walSeg struct {
	ord    uint32 // its place in the open log: 1, 2, 3 from the oldest; locs name it (never on disk)
	first  uint64 // seq of its first record, from the file's name
	next   uint64 // seq its next record gets: first when empty
	path   string
	f      *os.File
	size   int64 // end of the last record
	alloc  int64 // the file's length: past size it holds zeros (preallocated)
	synced int64 // the records before it are synced
	live   int64 // bytes of records some group still needs (reclaim.go)
}

func openWalSeg(dir string, first uint64, ord uint32, flag int) (*walSeg, error) {
	path := filepath.Join(dir, walName(first))
	f, err := os.OpenFile(path, os.O_RDWR|flag, 0o644)
	if err != nil {
		return nil, err
	}
	return &walSeg{ord: ord, first: first, next: first, path: path, f: f}, nil
}

// walFrames is the shared log's record format, for scan.
var walFrames = frames{min: walPrefixSize, check: walCheck, what: "record"}

// walScanError is the first bad record of a shared segment, and the group
// it names (or what is known of it).
type walScanError struct {
	*frameError
	group string
}

// scan reads every record of g's file from the start, calling fn for
// each good one in order, and sets g.size and g.next past them. It stops
// at the first bad record, which it returns (nil: the whole file is
// good), or at fn's first error, which it returns as damage.
func (g *walSeg) scan(fn func(walRec) error) (*walScanError, error) {
	fi, err := g.f.Stat()
	if err != nil {
		return nil, err
	}
	g.alloc = fi.Size()
	end, bad, err := walFrames.scan(g.f, g.alloc, g.first, func(off int64, body []byte) error {
		err := fn(walRec{
			off:     off,
			n:       uint32(headerSize + len(body)),
			seq:     binary.LittleEndian.Uint64(body),
			group:   binary.LittleEndian.Uint32(body[8:]),
			kind:    walKind(body[12]),
			payload: body[walPrefixSize:],
		})
		if err == nil {
			g.next++
		}
		return err
	})
	g.size = end
	if bad == nil || err != nil {
		return nil, err
	}
	// The group the record names: as checked, or as it reads when its
	// CRC is wrong (the group field may be the damaged part).
	group := "group unknown"
	if len(bad.rec) >= headerSize+walPrefixSize {
		group = fmt.Sprintf("group %d", binary.LittleEndian.Uint32(bad.rec[headerSize+8:]))
		if !bad.checked {
			group += " (unchecked)"
		}
	}
	return &walScanError{bad, group}, nil
}

// decodeWalEntry checks rec (exactly one record, read into a buffer of
// its own) as group's entry at index, and decodes it into out. Data and
// Extensions point into rec.
func decodeWalEntry(rec []byte, group uint32, index uint64, out *raft.Log) error {
	if len(rec) < headerSize+walPrefixSize+fixedSize {
		return fmt.Errorf("%w: %d bytes", ErrCorrupt, len(rec))
	}
	h, body := rec[:headerSize], rec[headerSize:]
	if n := binary.LittleEndian.Uint32(h); uint64(n) != uint64(len(body)) {
		return fmt.Errorf("%w: length %d in a record of %d bytes", ErrCorrupt, n, len(body))
	}
	if torn, bad := walCheck(h, body); torn+bad != "" {
		return fmt.Errorf("%w: %s%s", ErrCorrupt, torn, bad)
	}
	p := body[walPrefixSize:]
	if g, k := binary.LittleEndian.Uint32(body[8:]), walKind(body[12]); g != group || k != walEntry || bodyIndex(p) != index {
		return fmt.Errorf("%w: record of group %d, kind %d, index %d where group %d's entry %d belongs",
			ErrCorrupt, g, k, bodyIndex(p), group, index)
	}
	decodeEntry(p, out)
	return nil
}

// walTooLarge is the error for a record whose body passes 4 GiB.
func walTooLarge(what string, size uint64) error {
	return fmt.Errorf("raftlog: %w: %s is %d bytes", ErrTooLarge, what, size)
}
