package resp

import "bytes"

// guardValidator is the tests' reference model of RESP framing: an
// incremental validator, written independently of the Reader's parser
// (reader.go), that may be fed the stream in chunks split anywhere and
// reaches the same verdict. The tests and fuzzers check that the Reader
// accepts exactly the frames the model accepts and writes the same error
// line.

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
			if v.preAuth && i > 0 {
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
// always agree.
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
