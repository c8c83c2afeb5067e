package raftlog

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"time"

	"github.com/hashicorp/raft"
)

// A record's layout is in doc.go.
const (
	headerSize = 8  // length, crc
	fixedSize  = 29 // index, term, appended, type, dataLen
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// appendRecord appends l's record to buf.
func appendRecord(buf []byte, l *raft.Log) ([]byte, error) {
	body := uint64(fixedSize) + uint64(len(l.Data)) + uint64(len(l.Extensions))
	if body > math.MaxUint32 {
		return buf, fmt.Errorf("raftlog: %w: index %d is %d bytes", ErrTooLarge, l.Index, body)
	}
	start := len(buf)
	buf = binary.LittleEndian.AppendUint32(buf, uint32(body))
	buf = binary.LittleEndian.AppendUint32(buf, 0) // the CRC, once the body is in
	buf = appendEntry(buf, l)
	binary.LittleEndian.PutUint32(buf[start+4:], crc32.Checksum(buf[start+headerSize:], castagnoli))
	return buf, nil
}

// appendEntry appends l's fields as a record's body holds them (doc.go):
// index, term, appended, type, dataLen, data, ext. The shared log's
// entry records carry the same fields after their own prefix.
func appendEntry(buf []byte, l *raft.Log) []byte {
	buf = binary.LittleEndian.AppendUint64(buf, l.Index)
	buf = binary.LittleEndian.AppendUint64(buf, l.Term)
	var appended int64
	if !l.AppendedAt.IsZero() {
		appended = l.AppendedAt.UnixNano()
	}
	buf = binary.LittleEndian.AppendUint64(buf, uint64(appended))
	buf = append(buf, byte(l.Type))
	buf = binary.LittleEndian.AppendUint32(buf, uint32(len(l.Data)))
	buf = append(buf, l.Data...)
	return append(buf, l.Extensions...)
}

// entryBad says why p cannot be an entry's fields ("" when it can).
func entryBad(p []byte) string {
	if len(p) < fixedSize {
		return fmt.Sprintf("entry of %d bytes, below the minimum %d", len(p), fixedSize)
	}
	if dataLen := uint64(binary.LittleEndian.Uint32(p[25:])); dataLen > uint64(len(p)-fixedSize) {
		return fmt.Sprintf("data length %d past the record's end", dataLen)
	}
	return ""
}

// decodeEntry decodes p, entry fields entryBad accepts, into out. Data
// and Extensions point into p: the caller must not reuse it.
func decodeEntry(p []byte, out *raft.Log) {
	out.Index = binary.LittleEndian.Uint64(p)
	out.Term = binary.LittleEndian.Uint64(p[8:])
	out.AppendedAt = time.Time{}
	if at := int64(binary.LittleEndian.Uint64(p[16:])); at != 0 {
		out.AppendedAt = time.Unix(0, at)
	}
	out.Type = raft.LogType(p[24])
	dataEnd := fixedSize + int(binary.LittleEndian.Uint32(p[25:]))
	out.Data, out.Extensions = nil, nil
	if dataEnd > fixedSize {
		out.Data = p[fixedSize:dataEnd:dataEnd]
	}
	if len(p) > dataEnd {
		out.Extensions = p[dataEnd:]
	}
}

// checkHeader checks a record's header against the bytes that follow it
// (avail) and returns the body's length; it does not read the body.
func checkHeader(h []byte, avail int64) (int64, string) {
	n := int64(binary.LittleEndian.Uint32(h))
	switch {
	case n == 0:
		return 0, "zero length"
	case n < fixedSize:
		return 0, fmt.Sprintf("length %d below the minimum %d", n, fixedSize)
	case n > avail:
		return 0, fmt.Sprintf("length %d past the end of the file (%d bytes left)", n, avail)
	}
	return n, ""
}

// checkBody checks body against the CRC in its header h. A body whose CRC
// is right but whose fields do not fit is reported separately (bad): no
// torn write makes one.
func checkBody(h, body []byte) (torn, bad string) {
	if crc32.Checksum(body, castagnoli) != binary.LittleEndian.Uint32(h[4:]) {
		return "CRC mismatch", ""
	}
	return "", entryBad(body)
}

// bodyIndex is the index in a checked body.
func bodyIndex(body []byte) uint64 { return binary.LittleEndian.Uint64(body) }

// decodeRecord checks rec (header and body, exactly one record, read
// into a buffer of its own) and decodes it into out. Data and Extensions
// point into rec: the caller must not reuse it.
func decodeRecord(rec []byte, index uint64, out *raft.Log) error {
	if len(rec) < headerSize+fixedSize {
		return fmt.Errorf("%w: %d bytes", ErrCorrupt, len(rec))
	}
	h, body := rec[:headerSize], rec[headerSize:]
	if n, why := checkHeader(h, int64(len(body))); why != "" || n != int64(len(body)) {
		return fmt.Errorf("%w: length %d in a record of %d bytes", ErrCorrupt, n, len(body))
	}
	if torn, bad := checkBody(h, body); torn+bad != "" {
		return fmt.Errorf("%w: %s%s", ErrCorrupt, torn, bad)
	}
	if got := bodyIndex(body); got != index {
		return fmt.Errorf("%w: index %d where %d belongs", ErrCorrupt, got, index)
	}
	decodeEntry(body, out)
	return nil
}
