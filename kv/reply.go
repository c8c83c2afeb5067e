package kv

import (
	"math"
	"strconv"
)

// Writer appends RESP replies for one protocol version.
type Writer struct {
	B     []byte
	RESP3 bool
}

func (w *Writer) header(prefix byte, n int) {
	w.B = append(w.B, prefix)
	w.B = strconv.AppendInt(w.B, int64(n), 10)
	w.B = append(w.B, '\r', '\n')
}

// Int writes an integer.
func (w *Writer) Int(n int64) {
	w.B = append(w.B, ':')
	w.B = strconv.AppendInt(w.B, n, 10)
	w.B = append(w.B, '\r', '\n')
}

// Bulk writes a bulk string.
func (w *Writer) Bulk(b []byte) {
	w.header('$', len(b))
	w.B = append(w.B, b...)
	w.B = append(w.B, '\r', '\n')
}

// BulkString writes a bulk string.
func (w *Writer) BulkString(s string) {
	w.header('$', len(s))
	w.B = append(w.B, s...)
	w.B = append(w.B, '\r', '\n')
}

// BulkInt writes n's text as a bulk string (GET of an integer string).
func (w *Writer) BulkInt(n int64) {
	var buf [20]byte
	w.Bulk(strconv.AppendInt(buf[:0], n, 10))
}

// Nil writes a null bulk string ($-1, RESP3 _).
func (w *Writer) Nil() {
	if w.RESP3 {
		w.B = append(w.B, "_\r\n"...)
		return
	}
	w.B = append(w.B, "$-1\r\n"...)
}

// NilArray writes a null array (*-1, RESP3 _).
func (w *Writer) NilArray() {
	if w.RESP3 {
		w.B = append(w.B, "_\r\n"...)
		return
	}
	w.B = append(w.B, "*-1\r\n"...)
}

// Array writes an array header of n elements.
func (w *Writer) Array(n int) { w.header('*', n) }

// Map writes a map header of n pairs (RESP2: an array of 2n).
func (w *Writer) Map(n int) {
	if w.RESP3 {
		w.header('%', n)
		return
	}
	w.header('*', 2*n)
}

// Status writes a simple string (+OK).
func (w *Writer) Status(s string) {
	w.B = append(w.B, '+')
	w.B = append(w.B, s...)
	w.B = append(w.B, '\r', '\n')
}

// OK writes +OK.
func (w *Writer) OK() { w.B = append(w.B, "+OK\r\n"...) }

// Error writes an error; msg starts with its code (ERR, WRONGTYPE...).
func (w *Writer) Error(msg string) {
	w.B = append(w.B, '-')
	w.B = append(w.B, msg...)
	w.B = append(w.B, '\r', '\n')
}

// Double writes a score: a RESP3 double, or in RESP2 a bulk string
// formatted as Redis formats doubles (FormatDouble).
func (w *Writer) Double(f float64) {
	if w.RESP3 {
		w.B = append(w.B, ',')
		switch {
		case math.IsInf(f, 1):
			w.B = append(w.B, "inf"...)
		case math.IsInf(f, -1):
			w.B = append(w.B, "-inf"...)
		default:
			w.B = AppendDouble(w.B, f)
		}
		w.B = append(w.B, '\r', '\n')
		return
	}
	var buf [32]byte
	w.Bulk(AppendDouble(buf[:0], f))
}

// AppendDouble appends f as Redis 7.0 writes a double reply (%.17g):
// "inf", "-inf", integers without a point.
func AppendDouble(b []byte, f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return append(b, "inf"...)
	case math.IsInf(f, -1):
		return append(b, "-inf"...)
	}
	return strconv.AppendFloat(b, f, 'g', 17, 64)
}

// SetHeader writes a set header of n elements (RESP2: an array).
func (w *Writer) SetHeader(n int) {
	if w.RESP3 {
		w.header('~', n)
		return
	}
	w.header('*', n)
}
