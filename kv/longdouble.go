package kv

import (
	"bytes"
	"math/big"
)

// INCRBYFLOAT and HINCRBYFLOAT compute in C's long double, as Redis does:
// on x86-64, the x87 80-bit format with a 64-bit significand and a 15-bit
// exponent. It is emulated with big.Float at precision 64, rounding to
// nearest even: parsing rounds the exact value once (as strtold does),
// the sum rounds once (as the FPU does), and the reply is the exact value
// printed "%.17Lf" with its trailing zeros cut, so replies are Redis's to
// the last digit: 10.5 + 0.1 is "10.6", where float64 would give
// 10.59999999999999964. Subnormal long doubles keep 64 bits here (they
// never arise from values a limiter stores).

// longDoublePrec is the significand bits of an x87 long double.
const longDoublePrec = 64

// The range of a finite, nonzero long double x, as the exponent e of
// x = m × 2^e with 0.5 <= |m| < 1 (big.Float's MantExp): |x| < 2^16384,
// and the smallest subnormal is 2^-16445.
const (
	longDoubleMaxExp = 16384
	longDoubleMinExp = -16444
)

// maxLongDoubleChars is Redis's MAX_LONG_DOUBLE_CHARS: a longer text is
// not a float.
const maxLongDoubleChars = 5 * 1024

// newLongDouble is a zero long double.
func newLongDouble() *big.Float {
	return new(big.Float).SetPrec(longDoublePrec).SetMode(big.ToNearestEven)
}

// parseLongDouble parses b as Redis's string2ld: the whole text as strtold
// reads it (decimal or hexadecimal, inf or infinity in any case, an
// optional sign), no leading space, neither NaN nor overflowing nor
// underflowing to zero. An infinity written as such is accepted and
// returned as one.
func parseLongDouble(b []byte) (*big.Float, bool) {
	if len(b) == 0 || len(b) >= maxLongDoubleChars {
		return nil, false
	}
	neg := false
	s := b
	if s[0] == '+' || s[0] == '-' {
		neg = s[0] == '-'
		s = s[1:]
	}
	if is(s, "inf") || is(s, "infinity") {
		return newLongDouble().SetInf(neg), true
	}
	hex := len(s) > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X') && (ldHexDigit(s[2]) >= 0 || s[2] == '.' && len(s) > 3 && ldHexDigit(s[3]) >= 0)
	base, digitOf, expChar := 10, ldDecDigit, byte('e')
	if hex {
		s = s[2:]
		base, digitOf, expChar = 16, ldHexDigit, 'p'
	}
	mant := new(big.Int)
	var digit big.Int
	nd, frac, i := 0, 0, 0
	sawPoint := false
	for ; i < len(s); i++ {
		if s[i] == '.' && !sawPoint {
			sawPoint = true
			continue
		}
		d := digitOf(s[i])
		if d < 0 {
			break
		}
		nd++
		if sawPoint {
			frac++
		}
		mant.Mul(mant, big.NewInt(int64(base)))
		mant.Add(mant, digit.SetInt64(int64(d)))
	}
	if nd == 0 {
		return nil, false
	}
	exp := int64(0)
	if i < len(s) && (s[i]|0x20) == expChar {
		j := i + 1
		eneg := false
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			eneg = s[j] == '-'
			j++
		}
		if j == len(s) {
			return nil, false
		}
		for ; j < len(s); j++ {
			d := ldDecDigit(s[j])
			if d < 0 {
				return nil, false
			}
			if exp < 1<<40 {
				exp = exp*10 + int64(d)
			}
		}
		if eneg {
			exp = -exp
		}
		i = len(s)
	}
	if i != len(s) {
		return nil, false
	}
	f := newLongDouble()
	if mant.Sign() == 0 {
		if neg {
			f.Neg(f)
		}
		return f, true
	}
	if hex {
		exp -= 4 * int64(frac)
		if bits := int64(mant.BitLen()) + exp; bits > 16400 || bits < -16500 {
			return nil, false
		}
		f.SetInt(mant)
		f.SetMantExp(f, int(exp))
	} else {
		exp -= int64(frac)
		// The value is below 10^(len+exp): far outside the long
		// double's range, it is an overflow or an underflow to zero.
		if mag := int64(len(mant.String())) + exp; mag > 4940 || mag < -4960 {
			return nil, false
		}
		r := new(big.Rat).SetInt(mant)
		p := new(big.Int).Exp(big.NewInt(10), big.NewInt(ldAbs(exp)), nil)
		if exp >= 0 {
			r.Mul(r, new(big.Rat).SetInt(p))
		} else {
			r.Quo(r, new(big.Rat).SetInt(p))
		}
		f.SetRat(r)
	}
	if neg {
		f.Neg(f)
	}
	if e := f.MantExp(nil); e > longDoubleMaxExp || e < longDoubleMinExp {
		return nil, false // ERANGE: overflow or underflow
	}
	return f, true
}

func ldAbs(n int64) int64 {
	if n < 0 {
		return -n
	}
	return n
}

func ldDecDigit(c byte) int {
	if '0' <= c && c <= '9' {
		return int(c - '0')
	}
	return -1
}

func ldHexDigit(c byte) int {
	switch {
	case '0' <= c && c <= '9':
		return int(c - '0')
	case 'a' <= c && c <= 'f':
		return int(c-'a') + 10
	case 'A' <= c && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

// addLongDouble is the text of cur + incr as the (H)INCRBYFLOAT reply, or
// false when either is an infinity or the sum overflows ("increment would
// produce NaN or Infinity").
func addLongDouble(cur, incr *big.Float) ([]byte, bool) {
	if cur.IsInf() || incr.IsInf() {
		return nil, false
	}
	sum := newLongDouble().Add(cur, incr)
	if sum.Sign() != 0 && sum.MantExp(nil) > longDoubleMaxExp {
		return nil, false
	}
	return formatLongDouble(sum), true
}

// formatLongDouble writes x as Redis's ld2string(LD_STR_HUMAN): "%.17Lf"
// without trailing zeros (nor a trailing point), and "0" for "-0".
func formatLongDouble(x *big.Float) []byte {
	b := x.Append(nil, 'f', 17)
	if bytes.IndexByte(b, '.') >= 0 {
		b = bytes.TrimRight(b, "0")
		b = bytes.TrimSuffix(b, []byte("."))
	}
	if string(b) == "-0" {
		b = []byte("0")
	}
	return b
}
