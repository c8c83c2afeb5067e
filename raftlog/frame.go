package raftlog

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
)

// Both formats, a Store's segments and a Shared log's, are frames: a
// header (length, CRC-32C of the body) and a body that starts with the
// record's number (a Store's index, a Shared log's seq), one more than
// the record before it. scan reads them and tells a torn tail from
// damage the same way for both; a frames value says what differs.
type frames struct {
	min   int64                                   // the shortest body
	check func(h, body []byte) (torn, bad string) // the CRC (torn), then the fields (bad)
	what  string                                  // what the number is called in errors: "index", "record"
}

// frameError is the first bad record of a file. torn: it may be the tail
// of a write that never completed, and may be cut off the last file;
// otherwise it is damage no write makes. rec is the file from off on
// (at most a header and min bytes of body), and checked whether its CRC
// is right.
type frameError struct {
	off     int64
	reason  string
	torn    bool
	rec     []byte
	checked bool
}

// header checks a record's header against the bytes that follow it
// (avail) and returns the body's length; it does not read the body.
func (ff frames) header(h []byte, avail int64) (int64, string) {
	n := int64(binary.LittleEndian.Uint32(h))
	switch {
	case n == 0:
		return 0, "zero length"
	case n < ff.min:
		return 0, fmt.Sprintf("length %d below the minimum %d", n, ff.min)
	case n > avail:
		return 0, fmt.Sprintf("length %d past the end of the file (%d bytes left)", n, avail)
	}
	return n, ""
}

// scan reads f's records from the start (fileSize bytes), calling fn
// with each good one's offset and body (valid during the call only) in
// order; next is the number the first must have. It stops at the end of
// the file, at zeros where a header would start (the zeros written ahead
// of the records: the end), at the first bad record, or at fn's first
// error (damage). end is the offset after the last good record; bad the
// first bad record, nil when there is none.
func (ff frames) scan(f *os.File, fileSize int64, next uint64, fn func(off int64, body []byte) error) (end int64, bad *frameError, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, fileSize), 1<<20)
	var h [headerSize]byte
	var body []byte
	off := int64(0)
	for off < fileSize {
		if _, err := io.ReadFull(r, h[:]); err != nil {
			if errors.Is(err, io.ErrUnexpectedEOF) {
				return off, &frameError{off: off, reason: "short header", torn: true}, nil
			}
			return off, nil, err
		}
		n, why := ff.header(h[:], fileSize-off-headerSize)
		if n == 0 && h == ([headerSize]byte{}) {
			// The last file is cut here at Open, so no bytes of an older
			// write can outlive the zeros before them.
			return off, nil, nil
		}
		if why != "" {
			bad, err := ff.classify(f, off, why, fileSize, next)
			return off, bad, err
		}
		if int64(cap(body)) < n {
			body = make([]byte, n)
		}
		body = body[:n]
		if _, err := io.ReadFull(r, body); err != nil {
			return off, nil, err
		}
		torn, why := ff.check(h[:], body)
		if torn != "" {
			bad, err := ff.classify(f, off, torn, fileSize, next)
			return off, bad, err
		}
		if why == "" {
			if got := binary.LittleEndian.Uint64(body); got != next {
				why = fmt.Sprintf("%s %d where %d belongs", ff.what, got, next)
			} else if err := fn(off, body); err != nil {
				why = err.Error()
			}
		}
		if why != "" {
			rec := append(h[:], body[:min(n, ff.min)]...)
			return off, &frameError{off: off, reason: why, rec: rec, checked: true}, nil
		}
		off += headerSize + n
		next++
	}
	return off, nil, nil
}

// sectorSize is the unit a disk writes whole or not at all.
const sectorSize = 512

// classify decides whether the bad record at off (why), where a record
// numbered next belongs, is a torn write, which Open may cut off the last
// file, or damage, which it must refuse. A crash leaves an unsynced final
// write short, or with sectors that never reached the disk (zeros, or
// what the preallocated file held there), maybe with later sectors of the
// same write intact. A bit that flipped in a written record leaves every
// sector of it written. So the record is torn when no valid record
// follows it, or when a whole sector between it and the next valid
// record is zeros; otherwise a valid record follows a bad one that lost
// no sector: damage, which would otherwise cut acknowledged records.
func (ff frames) classify(f *os.File, off int64, why string, fileSize int64, next uint64) (*frameError, error) {
	rest := make([]byte, fileSize-off)
	if _, err := f.ReadAt(rest, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, err
	}
	bad := &frameError{off: off, reason: why, torn: true, rec: rest[:min(len(rest), headerSize+int(ff.min))]}
	at, num := ff.find(rest[1:], next)
	if at < 0 {
		return bad, nil
	}
	at++ // in rest
	if sectorLost(rest, off, at) {
		return bad, nil
	}
	bad.torn = false
	bad.reason = fmt.Sprintf("%s, with a valid record (%s %d) after it at offset %d: damage, not a torn write", why, ff.what, num, off+int64(at))
	return bad, nil
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

// find returns the offset in b of the first whole record with a right
// CRC and a number at least min (and not absurdly far past it), -1 when
// there is none.
func (ff frames) find(b []byte, min uint64) (int, uint64) {
	for p := 0; p+headerSize+int(ff.min) <= len(b); p++ {
		n := int64(binary.LittleEndian.Uint32(b[p:]))
		if n < ff.min || int64(p)+headerSize+n > int64(len(b)) {
			continue
		}
		body := b[p+headerSize : int64(p)+headerSize+n]
		num := binary.LittleEndian.Uint64(body)
		if num < min || num-min > 1<<24 {
			continue
		}
		if torn, bad := ff.check(b[p:p+headerSize], body); torn == "" && bad == "" {
			return p, num
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
