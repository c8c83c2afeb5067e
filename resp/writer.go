package resp

import (
	"io"
	"strconv"
	"sync/atomic"

	"github.com/tidwall/redcon"
)

// Writer buffers the replies to one connection until Flush, in RESP2 or,
// after SetRESP3, in RESP3 where the two differ (maps, sets, null,
// verbatim strings). It counts the bytes it writes and can be muted.
// redcon's Writer encodes underneath.
type Writer struct {
	wr      *redcon.Writer // where replies go: out, or sink while muted
	out     *redcon.Writer
	sink    *redcon.Writer // discards; made on first Mute
	resp3   bool
	scratch []byte
	netOut  int // bytes written not yet taken by TakeBytesWritten

	// What Buffered reports to other goroutines (CLIENT LIST): the bytes
	// of the flush under way, and the capacity of the reply buffer.
	pending, capacity atomic.Int64
	lastCap           int // capacity last stored, to store it only when it changes
}

// redconMaxBufferCap is redcon's maxBufferCap (v1.6.4): Flush drops a
// reply buffer of larger capacity rather than keep it for the next replies.
const redconMaxBufferCap = 262144

// NewWriter returns a RESP2 writer of replies to w.
func NewWriter(w io.Writer) *Writer {
	rw := &Writer{}
	rw.out = redcon.NewWriter(countingWriter{w, rw})
	rw.wr = rw.out
	return rw
}

// countingWriter counts the bytes written to w (redcon's Writer.Buffer
// would copy the buffer to measure it).
type countingWriter struct {
	w  io.Writer
	rw *Writer
}

// Write writes p, redcon's reply buffer, which Flush writes whole: its
// length is what Buffered reports as pending until the write returns (a
// client that does not read keeps it there), its capacity what stays
// allocated afterwards.
func (c countingWriter) Write(p []byte) (int, error) {
	c.rw.pending.Store(int64(len(p)))
	n, err := c.w.Write(p)
	c.rw.netOut += n
	c.rw.pending.Store(0)
	keep := cap(p)
	if keep > redconMaxBufferCap {
		keep = 0
	}
	if keep != c.rw.lastCap {
		c.rw.lastCap = keep
		c.rw.capacity.Store(int64(keep))
	}
	return n, err
}

// Buffered reports, from any goroutine, the bytes of replies being
// written to the connection (0 but while a flush is under way, as for a
// client that does not read its replies) and the capacity of the buffer
// replies are gathered in.
func (w *Writer) Buffered() (pending, capacity int) {
	return int(w.pending.Load()), int(w.capacity.Load())
}

// TakeBytesWritten returns the bytes written to the connection since the
// last call.
func (w *Writer) TakeBytesWritten() int {
	n := w.netOut
	w.netOut = 0
	return n
}

// Flush writes the buffered replies.
func (w *Writer) Flush() error { return w.wr.Flush() }

// SetRESP3 chooses RESP3 (true) or RESP2 for the replies written next.
func (w *Writer) SetRESP3(on bool) { w.resp3 = on }

// RESP3 reports whether replies are written in RESP3.
func (w *Writer) RESP3() bool { return w.resp3 }

// Mute makes the replies written from now on vanish, until Unmute.
func (w *Writer) Mute() {
	if w.sink == nil {
		w.sink = redcon.NewWriter(io.Discard)
	}
	w.wr = w.sink
}

// Unmute sends replies to the connection again.
func (w *Writer) Unmute() {
	if w.wr == w.sink && w.sink != nil {
		w.sink.Flush() // empties its buffer
		w.wr = w.out
	}
}

// WriteError writes the error reply msg, which starts with its code ("ERR ...").
func (w *Writer) WriteError(msg string) { w.wr.WriteError(msg) }

// WriteString writes a simple string reply.
func (w *Writer) WriteString(s string) { w.wr.WriteString(s) }

// WriteBulk writes a bulk string reply.
func (w *Writer) WriteBulk(b []byte) { w.wr.WriteBulk(b) }

// WriteBulkString writes a bulk string reply.
func (w *Writer) WriteBulkString(s string) { w.wr.WriteBulkString(s) }

// WriteInt writes an integer reply.
func (w *Writer) WriteInt(n int) { w.wr.WriteInt(n) }

// WriteInt64 writes an integer reply.
func (w *Writer) WriteInt64(n int64) { w.wr.WriteInt64(n) }

// WriteArray starts an array of n replies.
func (w *Writer) WriteArray(n int) { w.wr.WriteArray(n) }

// WriteNull writes RESP2's null bulk string, whatever the protocol.
func (w *Writer) WriteNull() { w.wr.WriteNull() }

// WriteRaw writes b, already encoded, as it is.
func (w *Writer) WriteRaw(b []byte) { w.wr.WriteRaw(b) }

// WriteMap starts a map of n pairs (an array of 2n in RESP2).
func (w *Writer) WriteMap(n int) {
	if w.resp3 {
		w.header('%', n)
		return
	}
	w.wr.WriteArray(2 * n)
}

// WriteSet starts a set of n replies (an array in RESP2).
func (w *Writer) WriteSet(n int) {
	if w.resp3 {
		w.header('~', n)
		return
	}
	w.wr.WriteArray(n)
}

// WriteNil writes the protocol's null: `_` in RESP3, the null bulk
// string in RESP2.
func (w *Writer) WriteNil() {
	if w.resp3 {
		w.wr.WriteRaw([]byte("_\r\n"))
		return
	}
	w.wr.WriteNull()
}

// WriteVerbatim writes a text reply (INFO, CLIENT INFO): a verbatim
// string of format txt in RESP3, a bulk string in RESP2.
func (w *Writer) WriteVerbatim(s string) {
	if !w.resp3 {
		w.wr.WriteBulkString(s)
		return
	}
	w.scratch = append(w.scratch[:0], '=')
	w.scratch = strconv.AppendInt(w.scratch, int64(len(s)+4), 10)
	w.scratch = append(w.scratch, "\r\ntxt:"...)
	w.scratch = append(w.scratch, s...)
	w.scratch = append(w.scratch, '\r', '\n')
	w.wr.WriteRaw(w.scratch)
}

// header writes a type prefix and a count line.
func (w *Writer) header(prefix byte, n int) {
	w.scratch = append(w.scratch[:0], prefix)
	w.scratch = strconv.AppendInt(w.scratch, int64(n), 10)
	w.scratch = append(w.scratch, '\r', '\n')
	w.wr.WriteRaw(w.scratch)
}

// AppendInt appends the integer reply n (the same in RESP2 and RESP3),
// with its own digit loop: strconv.AppendInt costs several times as much
// for the numbers a rate-limit decision holds.
func AppendInt(b []byte, n int64) []byte {
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
