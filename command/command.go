package command

import (
	"strconv"
	"unsafe"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
)

// BatchFunc appends a batched command's requests to reqs, or returns its
// error reply. m is the connection's memo of limit arguments.
type BatchFunc func(m *Memo, reqs []engine.Request, args [][]byte) ([]engine.Request, string)

// RenderFunc appends a batched command's reply, made from the results of
// its requests (none of which failed), to w; it reports how many
// decisions allowed and denied, for INFO.
type RenderFunc func(w *kv.Writer, res []engine.Result) (allowed, denied int64)

// str views b as a string without copying; only for immediate parsing.
func str(b []byte) string {
	return unsafe.String(unsafe.SliceData(b), len(b))
}

// ParseInt parses a Redis integer argument: optional '-', decimal digits,
// no spaces, within int64.
func ParseInt(b []byte) (int64, bool) {
	// Fast path: up to 18 digits, no sign, cannot overflow.
	if n := len(b); n > 0 && n <= 18 {
		v := int64(0)
		for _, c := range b {
			d := c - '0'
			if d > 9 {
				goto slow
			}
			v = v*10 + int64(d)
		}
		return v, true
	}
slow:
	if len(b) == 0 || len(b) > 20 || b[0] == '+' {
		return 0, false
	}
	n, err := strconv.ParseInt(str(b), 10, 64)
	return n, err == nil
}

// ParseFloat parses a Redis float argument. NaN and infinities parse; the
// caller decides whether they are allowed.
func ParseFloat(b []byte) (float64, bool) {
	if len(b) == 0 || len(b) > 64 {
		return 0, false
	}
	f, err := strconv.ParseFloat(str(b), 64)
	if err != nil {
		// ParseFloat reports out-of-range values with an error but returns
		// ±Inf; treat them as the infinities they are.
		if ne, ok := err.(*strconv.NumError); ok && ne.Err == strconv.ErrRange {
			return f, true
		}
		return 0, false
	}
	return f, true
}

// EqualFold reports whether b is the lower-case word lower, in any case.
func EqualFold(b []byte, lower string) bool {
	if len(b) != len(lower) {
		return false
	}
	for i := range b {
		c := b[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != lower[i] {
			return false
		}
	}
	return true
}

// ceilDiv rounds a non-negative duration in ns up to whole units; -1
// ("never") stays -1.
func ceilDiv(ns, unit int64) int64 {
	if ns < 0 {
		return -1
	}
	return (ns + unit - 1) / unit
}

const (
	msNanos  = int64(1e6)
	secNanos = int64(1e9)
)
