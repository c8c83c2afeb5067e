package kv

import (
	"math/bits"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/values"
)

// Bitmaps and LCS: SETBIT, GETBIT, BITCOUNT, BITPOS and LCS, as Redis
// 7.0's bitops.c and t_string.c answer them. A bitmap is a string; bit 0
// is the most significant bit of the first byte. An integer string is
// read as its decimal text, as Redis reads it.

// Texts of these commands' errors.
const (
	ErrBitOffset = "ERR bit offset is not an integer or out of range"
	ErrBitValue  = "ERR bit is not an integer or out of range"
	ErrBitArg    = "ERR The bit argument must be 1 or 0."
	ErrLCSType   = "ERR The specified keys must contain string values"
	ErrLCSBoth   = "ERR If you want both the length and indexes, please just use IDX."
)

// maxLCSTable bounds LCS's table of (len(a)+1)*(len(b)+1) 32-bit cells,
// built and walked inside one shard's goroutine: 32 MiB, about two
// strings of 2,900 bytes (Redis bounds it by proto-max-bulk-len, 512 MB).
const maxLCSTable = 32 << 20

// ErrLCSMemory refuses an LCS whose table would pass maxLCSTable.
var ErrLCSMemory = "ERR Insufficient memory, transient memory for LCS exceeds " + strconv.Itoa(maxLCSTable) + " bytes"

func init() {
	str := oneKeySpec("bitmap")
	register(
		str("setbit", 4, []string{"write", "denyoom"}, []string{"@write", "@bitmap", "@slow"}, "2.2.0",
			"Sets or clears the bit at offset in the string value stored at key", setbit),
		str("getbit", 3, []string{"readonly", "fast"}, []string{"@read", "@bitmap", "@fast"}, "2.2.0",
			"Returns the bit value at offset in the string value stored at key", getbit),
		str("bitcount", -2, []string{"readonly"}, []string{"@read", "@bitmap", "@slow"}, "2.6.0",
			"Count set bits in a string", bitcount),
		str("bitpos", -3, []string{"readonly"}, []string{"@read", "@bitmap", "@slow"}, "2.8.7",
			"Find first bit set or clear in a string", bitpos),
		&Spec{Name: "lcs", Arity: -3, FirstKey: 1, LastKey: 2, KeyStep: 1, Flags: []string{"readonly"},
			ACL: []string{"@read", "@string", "@slow"}, Group: "string", Since: "7.0.0",
			Summary: "Find longest common substring", run: lcs},
	)
}

// bitOffset parses a bit offset: a non-negative integer whose byte is
// within values.MaxValueLen (Redis: within proto-max-bulk-len).
func bitOffset(arg []byte) (uint64, bool) {
	n, ok := values.ParseInt(arg)
	if !ok || n < 0 || n>>3 >= values.MaxValueLen {
		return 0, false
	}
	return uint64(n), true
}

// setbit is SETBIT key offset bit: it replies the bit's old value and
// pads the string with zero bytes up to the offset's byte.
func setbit(c *Cmd, ks engine.Keyspace, w *Writer) {
	off, ok := bitOffset(c.Args[2])
	if !ok {
		w.Error(ErrBitOffset)
		return
	}
	on, ok := values.ParseInt(c.Args[3])
	if !ok || on&^1 != 0 {
		w.Error(ErrBitValue)
		return
	}
	key := c.Args[1]
	e, msg := getString(ks, key)
	if msg != "" {
		w.Error(msg)
		return
	}
	byteAt, shift := int(off>>3), 7-uint(off&7)
	var cur []byte
	if e != nil {
		cur = stringBytes(e)
	}
	old := 0
	if byteAt < len(cur) {
		old = int(cur[byteAt]>>shift) & 1
	}
	grows := byteAt >= len(cur)
	if e != nil && !grows && int64(old) == on {
		w.Int(int64(old)) // nothing changes (Redis leaves the key untouched)
		return
	}
	b := make([]byte, max(len(cur), byteAt+1))
	copy(b, cur)
	b[byteAt] = b[byteAt]&^(1<<shift) | byte(on)<<shift
	if e == nil {
		var err error
		if e, err = ks.Create(key, values.TypeString); err != nil {
			w.Error(errorText(err))
			return
		}
	}
	e.Int, e.Obj = 0, &values.Str{B: b, Raw: true}
	ks.Changed(key)
	w.Int(int64(old))
}

// getbit is GETBIT key offset: 0 past the string's end or for a missing
// key.
func getbit(c *Cmd, ks engine.Keyspace, w *Writer) {
	off, ok := bitOffset(c.Args[2])
	if !ok {
		w.Error(ErrBitOffset)
		return
	}
	e, msg := getString(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if e == nil {
		w.Int(0)
		return
	}
	b := stringBytes(e)
	if byteAt := off >> 3; byteAt < uint64(len(b)) {
		w.Int(int64(b[byteAt]>>(7-off&7)) & 1)
		return
	}
	w.Int(0)
}

// bitRange resolves BITCOUNT's and BITPOS's start and end (bytes, or
// bits when isBit) over a string of n bytes as Redis does: negative
// indexes count from the end, both are clamped, and in bit mode the
// masks clear the bits of the first and last bytes outside the range.
// It returns the byte range [start, end] (empty when start > end).
func bitRange(start, end, n int64, isBit bool) (s, e int64, firstMask, lastMask byte) {
	total := n
	if isBit {
		total <<= 3
	}
	if start < 0 {
		start += total
	}
	if end < 0 {
		end += total
	}
	start, end = max(start, 0), max(end, 0)
	end = min(end, total-1)
	if isBit && start <= end {
		firstMask = ^byte((1 << (8 - start&7)) - 1)
		lastMask = byte((1 << (7 - end&7)) - 1)
		start >>= 3
		end >>= 3
	}
	return start, end, firstMask, lastMask
}

// bitUnit parses BYTE or BIT (any case).
func bitUnit(arg []byte) (isBit, ok bool) {
	switch {
	case is(arg, "bit"):
		return true, true
	case is(arg, "byte"):
		return false, true
	}
	return false, false
}

// bitcount is BITCOUNT key [start end [BYTE|BIT]].
func bitcount(c *Cmd, ks engine.Keyspace, w *Writer) {
	e, msg := getString(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if e == nil {
		w.Int(0)
		return
	}
	p := stringBytes(e)
	var start, end int64
	var firstMask, lastMask byte
	switch len(c.Args) {
	case 2:
		start, end = 0, int64(len(p))-1
	case 4, 5:
		s, ok1 := values.ParseInt(c.Args[2])
		if !ok1 {
			w.Error(ErrNotInteger)
			return
		}
		en, ok2 := values.ParseInt(c.Args[3])
		if !ok2 {
			w.Error(ErrNotInteger)
			return
		}
		if s < 0 && en < 0 && s > en {
			w.Int(0)
			return
		}
		isBit := false
		if len(c.Args) == 5 {
			var ok bool
			if isBit, ok = bitUnit(c.Args[4]); !ok {
				w.Error(ErrSyntax)
				return
			}
		}
		start, end, firstMask, lastMask = bitRange(s, en, int64(len(p)), isBit)
	default:
		w.Error(ErrSyntax)
		return
	}
	if start > end {
		w.Int(0)
		return
	}
	n := popcount(p[start : end+1])
	n -= int64(bits.OnesCount8(p[start]&firstMask) + bits.OnesCount8(p[end]&lastMask))
	w.Int(n)
}

func popcount(b []byte) int64 {
	n := 0
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return int64(n)
}

// firstBit is Redis's redisBitpos: the position of the first bit equal
// to bit in b; when there is none, -1 for a 1 and len(b)*8 for a 0 (the
// string is taken as padded with zeros on the right).
func firstBit(b []byte, bit int) int64 {
	skip := byte(0)
	if bit == 0 {
		skip = 0xff
	}
	for i, x := range b {
		if x != skip {
			if bit == 0 {
				x = ^x
			}
			return int64(i)*8 + int64(bits.LeadingZeros8(x))
		}
	}
	if bit == 1 {
		return -1
	}
	return int64(len(b)) * 8
}

// bitpos is BITPOS key bit [start [end [BYTE|BIT]]], as Redis 7.0's
// bitposCommand.
func bitpos(c *Cmd, ks engine.Keyspace, w *Writer) {
	bit, ok := values.ParseInt(c.Args[2])
	if !ok {
		w.Error(ErrNotInteger)
		return
	}
	if bit != 0 && bit != 1 {
		w.Error(ErrBitArg)
		return
	}
	e, msg := getString(ks, c.Args[1])
	if msg != "" {
		w.Error(msg)
		return
	}
	if e == nil {
		w.Int(-bit) // a missing key is an endless run of zeros
		return
	}
	p := stringBytes(e)
	var start, end int64
	var firstMask, lastMask byte
	endGiven := false
	switch len(c.Args) {
	case 3:
		start, end = 0, int64(len(p))-1
	case 4, 5, 6:
		s, ok := values.ParseInt(c.Args[3])
		if !ok {
			w.Error(ErrNotInteger)
			return
		}
		isBit := false
		if len(c.Args) == 6 {
			if isBit, ok = bitUnit(c.Args[5]); !ok {
				w.Error(ErrSyntax)
				return
			}
		}
		var en int64
		if len(c.Args) >= 5 {
			if en, ok = values.ParseInt(c.Args[4]); !ok {
				w.Error(ErrNotInteger)
				return
			}
			endGiven = true
		} else if isBit {
			en = int64(len(p))<<3 + 7
		} else {
			en = int64(len(p)) - 1
		}
		start, end, firstMask, lastMask = bitRange(s, en, int64(len(p)), isBit)
	default:
		w.Error(ErrSyntax)
		return
	}
	if start > end {
		w.Int(-1)
		return
	}
	w.Int(bitposIn(p, start, end, firstMask, lastMask, int(bit), endGiven))
}

// bitposIn searches p[start..end] as bitposCommand does once the range is
// resolved: the first and last bytes have the bits outside the range set
// to the opposite of bit by their masks.
func bitposIn(p []byte, start, end int64, firstMask, lastMask byte, bit int, endGiven bool) int64 {
	mask := func(x, m byte) byte {
		if bit == 1 {
			return x &^ m
		}
		return x | m
	}
	bytes := end - start + 1
	var pos int64
	done := false
	if firstMask != 0 {
		x := mask(p[start], firstMask)
		if lastMask != 0 && bytes == 1 {
			x = mask(x, lastMask)
		}
		pos = firstBit([]byte{x}, bit)
		if bytes == 1 || (pos != -1 && pos != 8) {
			done = true
		} else {
			start++
			bytes--
		}
	}
	if !done {
		cur := bytes
		if lastMask != 0 {
			cur--
		}
		if cur > 0 {
			pos = firstBit(p[start:start+cur], bit)
			if bytes == cur || (pos != -1 && pos != cur<<3) {
				done = true
			} else {
				start += cur
				bytes -= cur
			}
		}
		if !done {
			pos = firstBit([]byte{mask(p[end], lastMask)}, bit)
		}
	}
	if endGiven && bit == 0 && pos == bytes<<3 {
		return -1
	}
	if pos != -1 {
		pos += start << 3
	}
	return pos
}

// lcs is LCS key1 key2 [LEN] [IDX] [MINMATCHLEN n] [WITHMATCHLEN], as
// Redis 7.0's lcsCommand: the longest common subsequence by the dynamic
// programming table, its length, or its matching ranges, longest last
// match first.
func lcs(c *Cmd, ks engine.Keyspace, w *Writer) {
	var ab [2][]byte
	for i := range ab {
		e, err := ks.Get(c.Args[1+i])
		if err != nil && err != engine.ErrWrongType {
			w.Error(errorText(err))
			return
		}
		if err == engine.ErrWrongType || (e != nil && e.Type() != values.TypeString) {
			w.Error(ErrLCSType)
			return
		}
		if e != nil {
			ab[i] = stringBytes(e)
		}
	}
	a, b := ab[0], ab[1]
	var getLen, getIdx, withLen bool
	var minLen int64
	for j := 3; j < len(c.Args); j++ {
		opt, more := c.Args[j], len(c.Args)-1-j
		switch {
		case is(opt, "idx"):
			getIdx = true
		case is(opt, "len"):
			getLen = true
		case is(opt, "withmatchlen"):
			withLen = true
		case is(opt, "minmatchlen") && more > 0:
			n, ok := values.ParseInt(c.Args[j+1])
			if !ok {
				w.Error(ErrNotInteger)
				return
			}
			minLen = max(n, 0)
			j++
		default:
			w.Error(ErrSyntax)
			return
		}
	}
	if getLen && getIdx {
		w.Error(ErrLCSBoth)
		return
	}
	alen, blen := len(a), len(b)
	if (int64(alen)+1)*(int64(blen)+1)*4 > maxLCSTable {
		w.Error(ErrLCSMemory)
		return
	}
	cols := blen + 1
	t := make([]uint32, (alen+1)*cols)
	for i := 1; i <= alen; i++ {
		for j := 1; j <= blen; j++ {
			switch {
			case a[i-1] == b[j-1]:
				t[i*cols+j] = t[(i-1)*cols+j-1] + 1
			default:
				t[i*cols+j] = max(t[(i-1)*cols+j], t[i*cols+j-1])
			}
		}
	}
	total := t[alen*cols+blen]
	if getLen {
		w.Int(int64(total))
		return
	}
	// Walk back from the end, as Redis does, building the subsequence and
	// the ranges of contiguous matches.
	type match struct{ a0, a1, b0, b1 int }
	var matches []match
	result := make([]byte, total)
	idx := int(total)
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0 // aStart == alen: no range open
	for i, j := alen, blen; i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if t[(i-1)*cols+j] > t[i*cols+j-1] {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		if emit {
			if n := aEnd - aStart + 1; minLen == 0 || int64(n) >= minLen {
				matches = append(matches, match{aStart, aEnd, bStart, bEnd})
			}
			aStart = alen
		}
	}
	if !getIdx {
		w.Bulk(result)
		return
	}
	w.Map(2)
	w.BulkString("matches")
	w.Array(len(matches))
	for _, m := range matches {
		if withLen {
			w.Array(3)
		} else {
			w.Array(2)
		}
		w.Array(2)
		w.Int(int64(m.a0))
		w.Int(int64(m.a1))
		w.Array(2)
		w.Int(int64(m.b0))
		w.Int(int64(m.b1))
		if withLen {
			w.Int(int64(m.a1 - m.a0 + 1))
		}
	}
	w.BulkString("len")
	w.Int(int64(total))
}
