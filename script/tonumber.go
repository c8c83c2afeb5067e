package script

import (
	"errors"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// luaToNumber is Lua 5.1's tonumber, which reads a string as C's strtod
// does (luaO_str2d): exponents ("1e3"), "inf" and "nan", hexadecimal
// ("0x10", "-0x10", "0x1p4"), surrounding spaces. gopher-lua's reads a
// string without a '.' as an integer only, so "1e+20", which a counter
// stored with redis.call('set', k, 1e20) reads back as, would be nil.
func luaToNumber(L *lua.LState) int {
	v := L.CheckAny(1)
	base := L.OptInt(2, 10)
	if base != 10 {
		if base < 2 || base > 36 {
			L.ArgError(2, "base out of range")
		}
		s := strings.TrimSpace(lua.LVAsString(v))
		n, err := strconv.ParseUint(s, base, 64)
		if err != nil || s == "" {
			L.Push(lua.LNil)
			return 1
		}
		L.Push(lua.LNumber(n))
		return 1
	}
	switch x := v.(type) {
	case lua.LNumber:
		L.Push(x)
	case lua.LString:
		if f, ok := str2number(string(x)); ok {
			L.Push(lua.LNumber(f))
		} else {
			L.Push(lua.LNil)
		}
	default:
		L.Push(lua.LNil)
	}
	return 1
}

// str2number reads s as strtod would, the whole of it but for spaces
// around it.
func str2number(s string) (float64, bool) {
	t := strings.Trim(s, " \t\n\v\f\r")
	if t == "" || strings.ContainsAny(t, "_") {
		return 0, false
	}
	body := strings.TrimLeft(t, "+-")
	if len(t)-len(body) > 1 {
		return 0, false
	}
	if len(body) > 1 && body[0] == '0' && (body[1] == 'x' || body[1] == 'X') {
		if !strings.ContainsAny(body, "pP") {
			t += "p0" // C's hex needs no exponent, Go's does
		}
	} else if strings.ContainsAny(body, "pP") {
		return 0, false
	}
	f, err := strconv.ParseFloat(t, 64)
	if err != nil {
		var ne *strconv.NumError
		if errors.As(err, &ne) && ne.Err == strconv.ErrRange {
			return f, true // strtod: HUGE_VAL or 0, as C gives it
		}
		return 0, false
	}
	return f, true
}
