package server

import (
	"strconv"
)

// replier writes replies in the connection's protocol version. RESP3 types
// are used where they differ from RESP2 (maps, null, verbatim strings).
type replier struct {
	conn    *conn
	resp3   bool
	scratch []byte
	errors  int64       // error replies written since the server last counted them
	errs    *errorStats // counts them by code; nil: not counted
}

// appendIntReply appends the integer reply n (the same in RESP2 and
// RESP3), with its own digit loop: strconv.AppendInt costs several times
// as much for the numbers a decision holds.
func appendIntReply(b []byte, n int64) []byte {
	b = append(b, ':')
	u := uint64(n)
	if n < 0 {
		b = append(b, '-')
		u = -u // also right for math.MinInt64
	}
	var d [20]byte
	i := len(d) - 1
	for u >= 10 {
		d[i] = byte('0' + u%10)
		u /= 10
		i--
	}
	d[i] = byte('0' + u)
	b = append(b, d[i:]...)
	return append(b, '\r', '\n')
}

// error writes an error reply and counts it for INFO.
func (r *replier) error(text string) {
	r.errors++
	if r.errs != nil {
		r.errs.add(text)
	}
	r.conn.WriteError(text)
}

func (r *replier) raw(prefix byte, n int) {
	r.scratch = append(r.scratch[:0], prefix)
	r.scratch = strconv.AppendInt(r.scratch, int64(n), 10)
	r.scratch = append(r.scratch, '\r', '\n')
	r.conn.WriteRaw(r.scratch)
}

// mapHeader starts a map of n pairs (an array of 2n in RESP2).
func (r *replier) mapHeader(n int) {
	if r.resp3 {
		r.raw('%', n)
		return
	}
	r.conn.WriteArray(2 * n)
}

// setHeader starts a set (an array in RESP2).
func (r *replier) setHeader(n int) {
	if r.resp3 {
		r.raw('~', n)
		return
	}
	r.conn.WriteArray(n)
}

func (r *replier) null() {
	if r.resp3 {
		r.conn.WriteRaw([]byte("_\r\n"))
		return
	}
	r.conn.WriteNull()
}

// verbatim writes a text reply (INFO, CLIENT INFO): a verbatim string in
// RESP3, a bulk string in RESP2.
func (r *replier) verbatim(s string) {
	if !r.resp3 {
		r.conn.WriteBulkString(s)
		return
	}
	r.scratch = append(r.scratch[:0], '=')
	r.scratch = strconv.AppendInt(r.scratch, int64(len(s)+4), 10)
	r.scratch = append(r.scratch, "\r\ntxt:"...)
	r.scratch = append(r.scratch, s...)
	r.scratch = append(r.scratch, '\r', '\n')
	r.conn.WriteRaw(r.scratch)
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
