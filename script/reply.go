package script

import (
	"errors"
	"math"
	"strconv"
)

// Kind is the type of a Reply.
type Kind uint8

// The kinds of reply. Null is RESP3's null, which a RESP2 client reads as
// a nil bulk string; Bulk and Array carry their own nil (Reply.Nil) so
// that a RESP2 reply parses back to what it was.
const (
	Null Kind = iota
	Int
	Bulk
	Status
	Error
	Array
	Double
	Map
	Set
	Bool
	BigNumber
	Verbatim
)

// Reply is a RESP value tree: the reply of a command (ParseReply) or the
// reply of a script (what Engine.Eval returns).
type Reply struct {
	Kind   Kind
	Nil    bool    // Bulk, Array: the nil bulk string or array
	Int    int64   // Int
	Str    string  // Bulk, Status, Error (without '-'), BigNumber, Verbatim
	Format string  // Verbatim: the three-letter format ("txt")
	Double float64 // Double
	Bool   bool    // Bool
	Elems  []Reply // Array, Set; Map: key, value, key, value...
}

// Append writes r as Redis would send it to a client of that protocol:
// RESP3 (resp3) or RESP2, where maps and sets are arrays, doubles and big
// numbers bulk strings, booleans the integers 1 and 0, and null a nil
// bulk string.
func (r Reply) Append(dst []byte, resp3 bool) []byte {
	switch r.Kind {
	case Null:
		return appendNull(dst, resp3, '$')
	case Int:
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, r.Int, 10)
		return append(dst, '\r', '\n')
	case Bulk:
		if r.Nil {
			return appendNull(dst, resp3, '$')
		}
		return appendBulk(dst, r.Str)
	case Status:
		dst = append(dst, '+')
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	case Error:
		dst = append(dst, '-')
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	case Array:
		if r.Nil {
			return appendNull(dst, resp3, '*')
		}
		dst = appendLen(dst, '*', len(r.Elems))
		for _, e := range r.Elems {
			dst = e.Append(dst, resp3)
		}
		return dst
	case Map, Set:
		switch {
		case !resp3:
			dst = appendLen(dst, '*', len(r.Elems))
		case r.Kind == Map:
			dst = appendLen(dst, '%', len(r.Elems)/2)
		default:
			dst = appendLen(dst, '~', len(r.Elems))
		}
		for _, e := range r.Elems {
			dst = e.Append(dst, resp3)
		}
		return dst
	case Double:
		s := formatDouble(r.Double)
		if !resp3 {
			return appendBulk(dst, s)
		}
		dst = append(dst, ',')
		dst = append(dst, s...)
		return append(dst, '\r', '\n')
	case Bool:
		switch {
		case !resp3 && r.Bool:
			return append(dst, ":1\r\n"...)
		case !resp3:
			return append(dst, ":0\r\n"...)
		case r.Bool:
			return append(dst, "#t\r\n"...)
		default:
			return append(dst, "#f\r\n"...)
		}
	case BigNumber:
		if !resp3 {
			return appendBulk(dst, r.Str)
		}
		dst = append(dst, '(')
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	case Verbatim:
		if !resp3 {
			return appendBulk(dst, r.Str)
		}
		dst = appendLen(dst, '=', len(r.Str)+4)
		for i := range 3 {
			c := byte(' ')
			if i < len(r.Format) {
				c = r.Format[i]
			}
			dst = append(dst, c)
		}
		dst = append(dst, ':')
		dst = append(dst, r.Str...)
		return append(dst, '\r', '\n')
	}
	return appendNull(dst, resp3, '$')
}

func appendNull(dst []byte, resp3 bool, prefix byte) []byte {
	if resp3 {
		return append(dst, "_\r\n"...)
	}
	return append(dst, prefix, '-', '1', '\r', '\n')
}

func appendLen(dst []byte, prefix byte, n int) []byte {
	dst = append(dst, prefix)
	dst = strconv.AppendInt(dst, int64(n), 10)
	return append(dst, '\r', '\n')
}

func appendBulk(dst []byte, s string) []byte {
	dst = appendLen(dst, '$', len(s))
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// formatDouble is C's "%.17g", as Redis formats a double reply (with
// "inf" and "-inf" spelled as Redis spells them).
func formatDouble(d float64) string {
	switch {
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	case math.IsNaN(d):
		return "nan"
	}
	return formatG(d, 17)
}

// appendG appends C's "%.<prec>g" of d: an integer of up to 15 digits
// (what a count or a clock in ms is) without allocating.
func appendG(b []byte, d float64, prec int) []byte {
	if d == math.Trunc(d) && math.Abs(d) < 1e15 && prec >= 15 && !(d == 0 && math.Signbit(d)) {
		return strconv.AppendInt(b, int64(d), 10)
	}
	return append(b, formatG(d, prec)...)
}

// formatG is C's "%.<prec>g".
func formatG(d float64, prec int) string {
	switch {
	case math.IsInf(d, 1):
		return "inf"
	case math.IsInf(d, -1):
		return "-inf"
	case math.IsNaN(d):
		if math.Signbit(d) {
			return "-nan"
		}
		return "nan"
	}
	if d == 0 {
		if math.Signbit(d) {
			return "-0"
		}
		return "0"
	}
	// C picks %e when the exponent (after rounding to prec digits) is
	// below -4 or at least prec, then strips trailing zeros.
	e := strconv.FormatFloat(d, 'e', prec-1, 64)
	i := len(e) - 1
	for e[i] != 'e' {
		i--
	}
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= prec {
		mant := trimZeros(e[:i])
		sign := e[i+1]
		digits := e[i+2:]
		if len(digits) < 2 {
			digits = "0" + digits
		}
		return mant + "e" + string(sign) + digits
	}
	return trimZeros(strconv.FormatFloat(d, 'f', prec-1-exp, 64))
}

func trimZeros(s string) string {
	dot := false
	for i := 0; i < len(s); i++ {
		dot = dot || s[i] == '.'
	}
	if !dot {
		return s
	}
	i := len(s)
	for s[i-1] == '0' {
		i--
	}
	if s[i-1] == '.' {
		i--
	}
	return s[:i]
}

// ErrProtocol is ParseReply's error for bytes that are not one whole
// RESP reply.
var ErrProtocol = errors.New("script: malformed or incomplete RESP reply")

// ParseReply reads one RESP2 or RESP3 reply from the start of b (the bytes
// a command wrote) and returns it with the number of bytes it took.
// Attributes are skipped; a push is read as an array.
func ParseReply(b []byte) (Reply, int, error) {
	p := parser{b: b}
	r, ok := p.reply(0)
	if !ok {
		return Reply{}, 0, ErrProtocol
	}
	return r, p.off, nil
}

type parser struct {
	b   []byte
	off int
}

// line returns the text up to the next CRLF and steps past it.
func (p *parser) line() ([]byte, bool) {
	for i := p.off; i+1 < len(p.b); i++ {
		if p.b[i] == '\r' && p.b[i+1] == '\n' {
			l := p.b[p.off:i]
			p.off = i + 2
			return l, true
		}
	}
	return nil, false
}

func (p *parser) blob(n int64) ([]byte, bool) {
	if n < 0 || int64(len(p.b)-p.off) < n+2 {
		return nil, false
	}
	s := p.b[p.off : p.off+int(n)]
	if p.b[p.off+int(n)] != '\r' || p.b[p.off+int(n)+1] != '\n' {
		return nil, false
	}
	p.off += int(n) + 2
	return s, true
}

func (p *parser) reply(depth int) (Reply, bool) {
	if p.off >= len(p.b) || depth > 1000 {
		return Reply{}, false
	}
	t := p.b[p.off]
	p.off++
	l, ok := p.line()
	if !ok {
		return Reply{}, false
	}
	switch t {
	case '+':
		return Reply{Kind: Status, Str: string(l)}, true
	case '-':
		return Reply{Kind: Error, Str: string(l)}, true
	case ':':
		n, err := strconv.ParseInt(string(l), 10, 64)
		return Reply{Kind: Int, Int: n}, err == nil
	case '_':
		return Reply{Kind: Null}, true
	case '#':
		return Reply{Kind: Bool, Bool: len(l) == 1 && l[0] == 't'}, len(l) == 1
	case ',':
		d, ok := parseDouble(string(l))
		return Reply{Kind: Double, Double: d}, ok
	case '(':
		return Reply{Kind: BigNumber, Str: string(l)}, true
	case '$', '!', '=':
		n, err := strconv.ParseInt(string(l), 10, 64)
		if err != nil {
			return Reply{}, false
		}
		if n == -1 && t == '$' {
			return Reply{Kind: Bulk, Nil: true}, true
		}
		s, ok := p.blob(n)
		if !ok {
			return Reply{}, false
		}
		switch t {
		case '!':
			return Reply{Kind: Error, Str: string(s)}, true
		case '=':
			if len(s) < 4 {
				return Reply{}, false
			}
			return Reply{Kind: Verbatim, Format: string(s[:3]), Str: string(s[4:])}, true
		}
		return Reply{Kind: Bulk, Str: string(s)}, true
	case '*', '~', '%', '>', '|':
		n, err := strconv.ParseInt(string(l), 10, 64)
		if err != nil {
			return Reply{}, false
		}
		if n == -1 && t == '*' {
			return Reply{Kind: Array, Nil: true}, true
		}
		if n < 0 || n > int64(len(p.b)) {
			return Reply{}, false
		}
		count := n
		if t == '%' || t == '|' {
			count = 2 * n
		}
		elems := make([]Reply, 0, count)
		for range count {
			e, ok := p.reply(depth + 1)
			if !ok {
				return Reply{}, false
			}
			elems = append(elems, e)
		}
		switch t {
		case '~':
			return Reply{Kind: Set, Elems: elems}, true
		case '%':
			return Reply{Kind: Map, Elems: elems}, true
		case '|':
			return p.reply(depth) // an attribute precedes the reply it describes
		}
		return Reply{Kind: Array, Elems: elems}, true
	}
	return Reply{}, false
}

func parseDouble(s string) (float64, bool) {
	switch s {
	case "inf", "+inf":
		return math.Inf(1), true
	case "-inf":
		return math.Inf(-1), true
	case "nan", "-nan":
		return math.NaN(), true
	}
	d, err := strconv.ParseFloat(s, 64)
	return d, err == nil
}
