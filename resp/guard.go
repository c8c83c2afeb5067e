package resp

import (
	"net"
	"sync/atomic"
)

// The guard is the per-connection half of framing: GuardListener accepts
// connections and gives each the limits its frames must keep (GuardConn),
// those before AUTH (Restrict) or the live configured ones (Follow). The
// Reader (reader.go) is the other half: it validates every frame against
// the limits its GuardConn holds as it parses it, answers the commands
// before a bad frame, then writes the error line and ends the stream.
// Without the limits, `*1\r\n$9223372036854775807\r\n` would overflow a
// reader's index arithmetic, a huge `*` count spin a core, a huge `$`
// length or an endless inline line grow its buffer without bound.

// GuardLimits are the framing limits enforced on every client byte stream.
// A zero or negative field takes its default. MaxBulkLen, MaxArgs and
// MaxQueryBuffer above 2^40 are lowered to 2^40, so no accepted length can
// overflow a reader's index arithmetic.
//
// A count is checked against MaxArgs alone, and reserves nothing: a
// client that announces `*1000000` and sends nothing more costs nothing
// beyond its connection. What one command may occupy while it arrives is
// bounded by MaxQueryBuffer, Redis's client-query-buffer-limit: the
// connection's buffer grows only as bytes arrive (Reader), and a command
// that does not fit closes the connection with a protocol error. The
// parsed arguments (a 24-byte slice header each, and at least 6 bytes of
// the buffer each, `$0\r\n\r\n`) follow the bytes that arrived, never
// the count announced.
type GuardLimits struct {
	MaxBulkLen     int64 // largest $ length accepted, bytes (default 8 MiB = 8<<20)
	MaxArgs        int64 // largest * count accepted (default 1,048,576 = 1<<20)
	MaxInlineLen   int   // longest inline line, bytes before its '\n' including any '\r' (default 64 KiB)
	MaxQueryBuffer int64 // most bytes one pending command may occupy (default 1 GiB)
}

const guardMaxLimit = 1 << 40

// DefaultGuardLimits returns the limits used for zero fields: 1 MiB bulks,
// 1,048,576 arguments, 64 KiB inline lines, 1 GiB pending commands.
func DefaultGuardLimits() GuardLimits {
	return GuardLimits{MaxBulkLen: 8 << 20, MaxArgs: 1 << 20, MaxInlineLen: 64 << 10, MaxQueryBuffer: 1 << 30}
}

// Normalized returns l with zero or negative fields set to their
// defaults and the 2^40 cap applied.
func (l GuardLimits) Normalized() GuardLimits {
	d := DefaultGuardLimits()
	if l.MaxBulkLen <= 0 {
		l.MaxBulkLen = d.MaxBulkLen
	}
	if l.MaxArgs <= 0 {
		l.MaxArgs = d.MaxArgs
	}
	if l.MaxInlineLen <= 0 {
		l.MaxInlineLen = d.MaxInlineLen
	}
	if l.MaxQueryBuffer <= 0 {
		l.MaxQueryBuffer = d.MaxQueryBuffer
	}
	l.MaxBulkLen = min(l.MaxBulkLen, guardMaxLimit)
	l.MaxArgs = min(l.MaxArgs, guardMaxLimit)
	l.MaxQueryBuffer = min(l.MaxQueryBuffer, guardMaxLimit)
	return l
}

// GuardListener wraps ln so every accepted connection is a *GuardConn
// holding lim (normalized). The accepted connections keep Read, Write,
// Close, addresses and deadlines of the real ones, but are not
// *net.TCPConn.
func GuardListener(ln net.Listener, lim GuardLimits) net.Listener {
	return &guardListener{Listener: ln, lim: lim.Normalized()}
}

type guardListener struct {
	net.Listener
	lim GuardLimits
}

func (l *guardListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return NewGuardConn(c, l.lim), nil
}

// NewGuardConn wraps nc so that a Reader of it validates frames against
// lim, as GuardListener's connections are.
func NewGuardConn(nc net.Conn, lim GuardLimits) *GuardConn {
	return &GuardConn{Conn: nc, fixed: lim.Normalized()}
}

// GuardConn is a connection and the framing limits of its client's byte
// stream, which a Reader of it enforces; Conn is the connection under it.
// Its fields belong to the one goroutine that reads.
type GuardConn struct {
	net.Conn

	// live, when set, holds the limits in force (CONFIG SET changes
	// them); otherwise fixed does. preAuth marks the limits before AUTH:
	// the Reader then returns one command at a time, as Redis parses
	// one command at a time, so a pipelined AUTH takes effect before the
	// frames after it are checked, and a count or length over the limit
	// gets Redis's "unauthenticated" error text.
	live    *atomic.Pointer[GuardLimits]
	fixed   GuardLimits
	preAuth bool

	cur  *GuardLimits // the live value normalized last, into norm
	norm GuardLimits
}

// limits returns the limits in force (normalized) and whether they are
// those before AUTH.
func (c *GuardConn) limits() (*GuardLimits, bool) {
	if c.live != nil {
		if l := c.live.Load(); l != c.cur {
			c.cur, c.norm = l, l.Normalized()
		}
		return &c.norm, false
	}
	return &c.fixed, c.preAuth
}

// Restrict applies lim (normalized) from the next frame on: tighter limits
// before authentication. It must be called by the goroutine that reads.
func (c *GuardConn) Restrict(lim GuardLimits) {
	c.live, c.fixed, c.preAuth = nil, lim.Normalized(), true
}

// Follow makes the limits in live (normalized) apply from the next frame
// on, and every later change to them (CONFIG SET proto-max-bulk-len, for
// example). It must be called by the goroutine that reads.
func (c *GuardConn) Follow(live *atomic.Pointer[GuardLimits]) {
	c.live, c.cur, c.preAuth = live, nil, false
}

// guardErr is a framing violation; guardOK is none.
type guardErr uint8

const (
	guardOK guardErr = iota
	guardMultibulkLen
	guardBulkLen
	guardInline
	guardDollar // a bulk header was expected; the byte found is named
	guardUnauthMultibulkLen
	guardUnauthBulkLen
)

// guardErrLine is the reply line for e. For guardDollar it names got, with
// '\r' and '\n' shown as spaces (as Redis does) so the line stays one line.
func guardErrLine(e guardErr, got byte) []byte {
	b := append(make([]byte, 0, 64), "-ERR "...)
	b = append(b, guardErrText[e]...)
	if e == guardDollar {
		if got == '\r' || got == '\n' {
			got = ' '
		}
		b = append(b, got, '\'')
	}
	return append(b, '\r', '\n')
}
