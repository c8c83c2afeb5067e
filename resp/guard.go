package resp

import (
	"bytes"
	"io"
	"net"
	"sync/atomic"
)

// The guard sits between the socket and the reader above it (Reader, or
// any other such as redcon's in tests) and enforces framing limits:
// without them `*1\r\n$9223372036854775807\r\n` overflows a reader's index
// arithmetic, a huge `*` count spins a core, a huge `$` length or an
// endless inline line grows its buffer without bound. GuardConn.Read runs an
// incremental framing validator over every chunk it hands to the reader and
// stops the stream before the first frame that breaks a limit.
//
// Ordering of replies: a reader calls Read only when its buffer holds no
// complete command, after it has executed and flushed the commands it had.
// So when a chunk contains a violation, Read returns just the bytes before
// the offending frame (complete frames, or nothing new if that frame began in
// an earlier chunk); the reader answers them, reads again, and only then does
// the guard write the error line and report io.EOF, on which the connection
// is closed.

// GuardLimits are the framing limits enforced on every client byte stream.
// A zero or negative field takes its default. MaxBulkLen, MaxArgs and
// MaxQueryBuffer above 2^40 are lowered to 2^40, so no accepted length can
// overflow a reader's index arithmetic.
//
// The guard holds no buffer and checks a count against MaxArgs alone: a
// client that announces `*1000000` and sends nothing more costs nothing
// beyond its connection. What one command may occupy while it arrives is
// bounded by MaxQueryBuffer, Redis's client-query-buffer-limit: the
// connection's buffer grows only as bytes arrive (Reader), and a command
// that does not fit closes the connection with a protocol error. The
// parsed arguments (a 24-byte slice header each, and at least 6 bytes of
// the buffer each, `$0\r\n\r\n`) follow the bytes that arrived, never
// the count announced.
type GuardLimits struct {
	MaxBulkLen     int64 // largest $ length accepted, bytes (default 1 MiB = 1<<20)
	MaxArgs        int64 // largest * count accepted (default 1,048,576 = 1<<20)
	MaxInlineLen   int   // longest inline line, bytes before its '\n' including any '\r' (default 64 KiB)
	MaxQueryBuffer int64 // most bytes one pending command may occupy (default 1 GiB)
}

const guardMaxLimit = 1 << 40

// DefaultGuardLimits returns the limits used for zero fields: 1 MiB bulks,
// 1,048,576 arguments, 64 KiB inline lines, 1 GiB pending commands.
func DefaultGuardLimits() GuardLimits {
	return GuardLimits{MaxBulkLen: 1 << 20, MaxArgs: 1 << 20, MaxInlineLen: 64 << 10, MaxQueryBuffer: 1 << 30}
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

// GuardListener wraps ln so every accepted connection's Read is validated.
// The accepted connections keep Write, Close, addresses and deadlines of the
// real ones, but are not *net.TCPConn.
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

// NewGuardConn wraps nc so that its Read is validated against lim, as
// GuardListener's connections are.
func NewGuardConn(nc net.Conn, lim GuardLimits) *GuardConn {
	return &GuardConn{Conn: nc, v: newGuardValidator(lim)}
}

// GuardConn is a connection whose Read passes on only bytes that frame
// validly; Conn is the connection under it. Its fields belong to the one
// goroutine that reads.
type GuardConn struct {
	net.Conn
	v        guardValidator
	bad      guardErr // the violation found, to report on the next Read
	reported bool     // the error line has been written

	// live, when set, holds the limits in force (CONFIG SET changes them);
	// Read picks up a change before it validates the next chunk. cur is
	// the value applied last. A connection restricted before AUTH has no
	// live limits.
	live *atomic.Pointer[GuardLimits]
	cur  *GuardLimits

	// Before AUTH, Read passes on one frame at a time, as Redis parses
	// one command at a time: a pipelined AUTH then takes effect before
	// the frames after it are checked against the tighter limits. pending
	// holds the bytes read but not yet passed on, pendErr the read error
	// that came with them.
	pending []byte
	pendErr error

	// lazy is set by the Reader (reader.go), which validates what
	// it parses. Then, once the limits follow the live ones, Read checks
	// only the rest of a frame an earlier read began and passes the bytes
	// after it on unchecked (raw reports that the last Read did, from
	// offset rawFrom); the reader vouches for the frames it can check
	// itself and hands the guard the rest (check). A frame is thus scanned
	// once instead of twice, however the reads split the stream.
	lazy, raw bool
	rawFrom   int
}

// Read reads from the real connection into p and validates what it read.
// It never returns 0 bytes with a nil error unless len(p) == 0. After a
// violation it returns the bytes that precede the offending frame; the next
// call writes `-ERR <text>\r\n` to the connection and returns io.EOF, as do
// all later calls.
func (c *GuardConn) Read(p []byte) (int, error) {
	if c.bad != guardOK {
		return 0, c.fail()
	}
	if len(p) == 0 {
		return c.Conn.Read(p)
	}
	for {
		var n int
		var err error
		switch {
		case len(c.pending) > 0:
			n = copy(p, c.pending)
			c.pending = c.pending[n:]
			if len(c.pending) == 0 {
				c.pending, err, c.pendErr = nil, c.pendErr, nil
			}
		case c.pendErr != nil:
			err, c.pendErr = c.pendErr, nil
		default:
			n, err = c.Conn.Read(p)
		}
		c.raw = false
		if n > 0 {
			c.followLimits()
			if c.lazy && c.live != nil && len(c.pending) == 0 && c.pendErr == nil {
				// The rest of a frame begun earlier, if any, is checked
				// here; what follows it is the reader's.
				ok := 0
				if c.v.state != gsFrame {
					var bad guardErr
					c.v.oneFrame = true
					ok, bad = c.v.feed(p[:n])
					c.v.oneFrame = false
					if bad != guardOK {
						c.bad = bad
						if ok == 0 {
							return 0, c.fail()
						}
						return ok, nil
					}
				}
				if ok < n {
					c.raw, c.rawFrom = true, ok
				}
				return n, err
			}
			ok, bad := c.v.feed(p[:n])
			if bad == guardOK {
				if ok < n { // before AUTH: keep the rest for the next Read
					rest := make([]byte, 0, n-ok+len(c.pending))
					c.pending = append(append(rest, p[ok:n]...), c.pending...)
					if err != nil {
						c.pendErr, err = err, nil
					}
				}
				return ok, err
			}
			// The real error, if any, no longer matters: the connection
			// ends with the protocol error.
			c.bad = bad
			if ok == 0 {
				return 0, c.fail()
			}
			return ok, nil
		}
		if err != nil {
			return 0, err
		}
	}
}

// followLimits applies the live limits if they changed.
func (c *GuardConn) followLimits() {
	if c.live != nil {
		if l := c.live.Load(); l != c.cur {
			c.cur = l
			c.v.setLimits(*l)
		}
	}
}

// limits are the limits in force (lazy mode reads them for every frame
// it checks itself).
func (c *GuardConn) limits() *guardValidator {
	c.followLimits()
	return &c.v
}

// check validates the frame at the start of b, the bytes of the stream
// that follow what the guard and the reader have checked, when the reader
// cannot vouch for it. It returns the frame's length, or len(b) when the
// frame is not complete yet (the next Read checks the rest), or 0 when
// the frame is bad: the next Read then writes the error line and reports
// io.EOF.
func (c *GuardConn) check(b []byte) int {
	if c.bad != guardOK {
		return 0
	}
	c.followLimits()
	c.v.oneFrame = true
	ok, bad := c.v.feed(b)
	c.v.oneFrame = false
	if bad != guardOK {
		c.bad = bad
	}
	return ok
}

// Restrict applies lim (normalized) from the next byte on: tighter limits
// before authentication, the configured ones after. It must be called by
// the goroutine that reads.
func (c *GuardConn) Restrict(lim GuardLimits) {
	c.live, c.cur = nil, nil
	c.v.setLimits(lim)
	c.v.preAuth = true
}

// Follow makes the limits in live apply from the next Read on, and every
// later change to them (CONFIG SET proto-max-bulk-len, for example). It
// must be called by the goroutine that reads.
func (c *GuardConn) Follow(live *atomic.Pointer[GuardLimits]) {
	c.live, c.cur = live, nil
	c.v.preAuth = false
}

// setLimits applies lim (normalized) to the frames whose headers come
// next; a frame under way keeps the length it announced.
func (v *guardValidator) setLimits(lim GuardLimits) {
	lim = lim.Normalized()
	v.maxArgs = uint64(lim.MaxArgs)
	v.maxBulk = uint64(lim.MaxBulkLen)
	v.maxInline = lim.MaxInlineLen
}

// fail writes the error line once and reports the end of the stream. A write
// error is ignored: the connection is being closed either way.
func (c *GuardConn) fail() error {
	if !c.reported {
		c.reported = true
		_, _ = c.Conn.Write(guardErrLine(c.bad, c.v.got))
	}
	return io.EOF
}

// guardErr is a framing violation; guardOK is none.
type guardErr uint8

const (
	guardOK guardErr = iota
	guardMultibulkLen
	guardBulkLen
	guardInline
	guardDollar // a bulk header was expected; guardValidator.got holds the byte
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

// guardState is where the validator is within the stream.
type guardState uint8

const (
	gsFrame  guardState = iota // the next byte starts a frame
	gsCount                    // inside a *N header line
	gsDollar                   // the next byte must be the '$' of a bulk header
	gsLen                      // inside a $L header line
	gsBody                     // skipping body bytes; body counts those left
	gsCR                       // the next byte must be the '\r' ending a body
	gsLF                       // the next byte must be the '\n' ending a body
	gsInline                   // inside an inline line; inline counts its bytes
)

// guardValidator checks RESP framing incrementally: feed may be given the
// stream in chunks split anywhere and reaches the same verdict. It holds no
// buffer, so it never allocates.
//
// A frame starting with '*' is a multibulk: a header line `*N\r\n`, then, if
// N > 0, N bulks `$L\r\n`, L bytes, `\r\n`. Any other frame is an inline line
// ending at '\n'. Header numbers follow Redis's string2ll: "0" or an optional
// '-' then a digit 1-9 then digits, within int64. So no valid header line is
// longer than 20 bytes before its "\r\n", and "+1", "01" and "-0" are invalid.
// N <= 0 is a frame with no elements; it passes and the reader skips it.
// A bulk whose L bytes are not followed by "\r\n" is an invalid bulk length,
// as Redis refuses it.
//
// A violation is reported at the first byte that makes the frame invalid:
// a header digit that takes N above maxArgs or L above maxBulk, for example,
// without waiting for the line's end.
type guardValidator struct {
	maxArgs   uint64
	maxBulk   uint64
	maxInline int

	state  guardState
	neg    bool   // header: a '-' followed the sigil
	cr     bool   // header: '\r' seen, only '\n' may follow
	digits bool   // header: at least one digit seen
	val    uint64 // header: magnitude of the digits so far
	args   int64  // bulks left in the current multibulk
	body   int64  // body bytes left to skip
	inline int    // bytes of the current inline line so far, at most maxInline
	got    byte   // the byte found instead of '$', for guardDollar

	// oneFrame: feed stops at the end of the first frame it completes
	// (lazy mode, GuardConn.check and Read).
	oneFrame bool

	// preAuth: the limits are those before AUTH. feed then stops at the
	// end of the first frame it completes, and a count or length over
	// the limit gets Redis's "unauthenticated" error text.
	preAuth bool
}

func newGuardValidator(lim GuardLimits) guardValidator {
	lim = lim.Normalized()
	return guardValidator{
		maxArgs:   uint64(lim.MaxArgs),
		maxBulk:   uint64(lim.MaxBulkLen),
		maxInline: lim.MaxInlineLen,
	}
}

// feed validates the next chunk b of the stream. With no violation it returns
// len(b), guardOK. Otherwise it returns the violation and how many leading
// bytes of b precede the frame it is in: 0 when that frame began in an
// earlier chunk. After a violation the validator must not be fed again.
func (v *guardValidator) feed(b []byte) (int, guardErr) {
	start := 0 // where the frame under way began within b
	i := 0
	for i < len(b) {
		switch v.state {
		case gsFrame:
			if (v.preAuth || v.oneFrame) && i > 0 {
				return i, guardOK // a frame ended: pass it on alone
			}
			start = i
			if b[i] != '*' {
				v.state, v.inline = gsInline, 0
				continue
			}
			if n, j, ok := guardLine(b, i+1, v.maxArgs); ok {
				i = j
				if n > 0 {
					v.state, v.args = gsDollar, int64(n)
				}
				continue
			}
			i++
			v.state, v.neg, v.cr, v.digits, v.val = gsCount, false, false, false, 0

		case gsCount, gsLen:
			lim := v.maxBulk
			if v.state == gsCount {
				lim = v.maxArgs
			}
			for {
				if i == len(b) {
					return len(b), guardOK
				}
				c := b[i]
				i++
				if d := c - '0'; d <= 9 && !v.cr {
					// Digits after a leading "0", and "-0", are invalid.
					if (v.digits && v.val == 0) || (d == 0 && v.neg && !v.digits) {
						return start, v.headerErr()
					}
					if v.neg {
						// Only a count can be negative; it must fit int64.
						if v.val > (1<<63)/10 {
							return start, guardMultibulkLen
						}
						v.val = v.val*10 + uint64(d)
						if v.val > 1<<63 {
							return start, guardMultibulkLen
						}
					} else {
						// val <= lim <= 2^40 before this digit: no overflow.
						v.val = v.val*10 + uint64(d)
						if v.val > lim {
							return start, v.limitErr()
						}
					}
					v.digits = true
					continue
				}
				switch {
				case c == '\r' && v.digits && !v.cr:
					v.cr = true
					continue
				case c == '-' && !v.digits && !v.neg && v.state == gsCount:
					v.neg = true
					continue
				case c != '\n' || !v.cr:
					return start, v.headerErr()
				}
				break // the line is complete
			}
			switch {
			case v.state == gsLen:
				v.state, v.body = gsBody, int64(v.val)
			case v.neg || v.val == 0:
				v.state = gsFrame
			default:
				v.state, v.args = gsDollar, int64(v.val)
			}

		case gsDollar:
			// Fast path: whole bulks inside b, the usual case.
			args, lim := v.args, v.maxBulk
			for i < len(b) && b[i] == '$' {
				// guardLine, inlined by hand: lengths are short.
				j, n := i+1, uint64(0)
				for ; j < len(b); j++ {
					d := b[j] - '0'
					if d > 9 {
						break
					}
					if n = n*10 + uint64(d); n > lim {
						break
					}
				}
				if n > lim || j == i+1 || j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' || (b[i+1] == '0' && j > i+2) {
					break
				}
				end := j + 2 + int(n) // n <= 2^40: no overflow
				if end+1 >= len(b) || b[end] != '\r' || b[end+1] != '\n' {
					break
				}
				i = end + 2
				if args--; args == 0 {
					break
				}
			}
			v.args = args
			if args == 0 {
				v.state = gsFrame
				continue
			}
			if i == len(b) {
				continue
			}
			if b[i] != '$' {
				v.got = b[i]
				return start, guardDollar
			}
			if n, j, ok := guardLine(b, i+1, v.maxBulk); ok {
				i = j
				v.state, v.body = gsBody, int64(n)
				continue
			}
			i++
			v.state, v.neg, v.cr, v.digits, v.val = gsLen, false, false, false, 0

		case gsBody:
			if rest := int64(len(b) - i); v.body >= rest {
				v.body -= rest
				return len(b), guardOK
			}
			i += int(v.body)
			v.body = 0
			// Fast path: the "\r\n" ending the body is in b.
			if i+1 < len(b) && b[i] == '\r' && b[i+1] == '\n' {
				i += 2
				v.args--
				v.state = gsDollar
				if v.args == 0 {
					v.state = gsFrame
				}
				continue
			}
			v.state = gsCR

		case gsCR:
			if b[i] != '\r' {
				return start, guardBulkLen
			}
			i++
			v.state = gsLF

		case gsLF:
			if b[i] != '\n' {
				return start, guardBulkLen
			}
			i++
			v.args--
			v.state = gsDollar
			if v.args == 0 {
				v.state = gsFrame
			}

		case gsInline:
			j := bytes.IndexByte(b[i:], '\n')
			if j < 0 {
				j = len(b) - i
			}
			if j > v.maxInline-v.inline {
				return start, guardInline
			}
			v.inline += j
			i += j
			if i < len(b) {
				i++ // the '\n'
				v.state = gsFrame
			}
		}
	}
	return len(b), guardOK
}

// guardLine is the fast path for a header line wholly inside b: the common
// case of a number in canonical form, at most lim, followed by "\r\n" at
// b[i:]. It returns the number and the index after the line. Anything else,
// valid or not, is left to the byte-at-a-time path (ok false), so both paths
// always agree. The Reader's parseChecked vouches for frames with it too,
// so a header it accepts is one the guard accepts.
func guardLine(b []byte, i int, lim uint64) (n uint64, next int, ok bool) {
	j := i
	for ; j < len(b); j++ {
		d := b[j] - '0'
		if d > 9 {
			break
		}
		n = n*10 + uint64(d) // n <= lim <= 2^40 before: no overflow
		if n > lim {
			return 0, 0, false
		}
	}
	if j == i || j+1 >= len(b) || b[j] != '\r' || b[j+1] != '\n' || (b[i] == '0' && j > i+1) {
		return 0, 0, false
	}
	return n, j + 2, true
}

// headerErr is the violation for a bad header line in the current state.
// limitErr is the violation of a count or length over the limit.
func (v *guardValidator) limitErr() guardErr {
	if v.preAuth {
		if v.state == gsCount {
			return guardUnauthMultibulkLen
		}
		return guardUnauthBulkLen
	}
	return v.headerErr()
}

func (v *guardValidator) headerErr() guardErr {
	if v.state == gsCount {
		return guardMultibulkLen
	}
	return guardBulkLen
}
