package script

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// cjson is Redis's lua-cjson 2.1 with its default settings: numbers with
// 14 significant digits, '/' escaped, excessively sparse arrays refused.

type cjsonLib struct{ null *lua.LUserData }

func openCjson(L *lua.LState) *lua.LTable {
	c := &cjsonLib{null: L.NewUserData()}
	t := L.NewTable()
	t.RawSetString("encode", L.NewFunction(c.encode))
	t.RawSetString("decode", L.NewFunction(c.decode))
	t.RawSetString("null", c.null)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	// The settings are accepted and ignored: the defaults stay.
	for _, name := range []string{"encode_sparse_array", "encode_max_depth", "decode_max_depth",
		"encode_number_precision", "encode_keep_buffer", "encode_invalid_numbers", "decode_invalid_numbers"} {
		t.RawSetString(name, L.NewFunction(func(L *lua.LState) int { return L.GetTop() }))
	}
	return t
}

func (c *cjsonLib) encode(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.ArgError(1, "expected 1 argument")
	}
	b := c.append(L, nil, L.Get(1), 0)
	L.Push(lua.LString(b))
	return 1
}

func cjsonFail(L *lua.LState, v lua.LValue, reason string) {
	L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (c *cjsonLib) append(L *lua.LState, b []byte, v lua.LValue, depth int) []byte {
	switch v := v.(type) {
	case lua.LString:
		return jsonString(b, string(v))
	case lua.LNumber:
		return c.number(L, b, v)
	case lua.LBool:
		if v {
			return append(b, "true"...)
		}
		return append(b, "false"...)
	case *lua.LNilType:
		return append(b, "null"...)
	case *lua.LUserData:
		if v == c.null {
			return append(b, "null"...)
		}
	case *lua.LTable:
		depth++
		if depth > 1000 {
			L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := arrayLength(L, v); n > 0 {
			b = append(b, '[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b = append(b, ',')
				}
				b = c.append(L, b, v.RawGetInt(i), depth)
			}
			return append(b, ']')
		}
		b = append(b, '{')
		first := true
		forEach(v, func(k, val lua.LValue) {
			if !first {
				b = append(b, ',')
			}
			first = false
			switch k := k.(type) {
			case lua.LNumber:
				b = append(b, '"')
				b = c.number(L, b, k)
				b = append(b, '"', ':')
			case lua.LString:
				b = jsonString(b, string(k))
				b = append(b, ':')
			default:
				cjsonFail(L, k, "table key must be a number or string")
			}
			b = c.append(L, b, val, depth)
		})
		return append(b, '}')
	}
	cjsonFail(L, v, "type not supported")
	return b
}

// arrayLength is lua_array_length: the largest key when every key is a
// positive integer, -1 otherwise (or when the array is too sparse to be
// one, which is an error by default).
func arrayLength(L *lua.LState, t *lua.LTable) int {
	max, items := 0, 0
	array := true
	forEach(t, func(k, _ lua.LValue) {
		n, ok := k.(lua.LNumber)
		if !array || !ok || float64(n) != math.Floor(float64(n)) || n < 1 {
			array = false
			return
		}
		if int(n) > max {
			max = int(n)
		}
		items++
	})
	if !array {
		return -1
	}
	if max > items*2 && max > 10 {
		cjsonFail(L, t, "excessively sparse array")
	}
	return max
}

func (c *cjsonLib) number(L *lua.LState, b []byte, n lua.LNumber) []byte {
	f := float64(n)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		cjsonFail(L, n, "must not be NaN or Inf")
	}
	return append(b, formatG(f, 14)...)
}

// jsonEscapes is the letter of each byte's short escape (\n for a
// newline), 0 for a byte without one; jsonUnescapes is the byte each
// letter stands for.
var jsonEscapes = [256]byte{'"': '"', '\\': '\\', '/': '/', '\b': 'b', '\t': 't', '\n': 'n', '\f': 'f', '\r': 'r'}

var jsonUnescapes = func() (u [256]byte) {
	for ch, e := range jsonEscapes {
		if e != 0 {
			u[e] = byte(ch)
		}
	}
	return u
}()

func jsonString(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case jsonEscapes[ch] != 0:
			b = append(b, '\\', jsonEscapes[ch])
		case ch < 0x20 || ch == 0x7f:
			b = fmt.Appendf(b, "\\u%04x", ch)
		default:
			b = append(b, ch)
		}
	}
	return append(b, '"')
}

// decoding

type jsonParser struct {
	L     *lua.LState
	c     *cjsonLib
	s     string
	p     int
	depth int
}

type jsonTok struct {
	kind  string // T_OBJ_BEGIN... or "" with err set
	err   string
	index int
	v     lua.LValue
}

func (c *cjsonLib) decode(L *lua.LState) int {
	s := L.CheckString(1)
	if len(s) >= 2 && (s[0] == 0 || s[1] == 0) {
		L.RaiseError("JSON parser does not support UTF-16 or UTF-32")
	}
	p := &jsonParser{L: L, c: c, s: s}
	tok := p.next()
	v := p.value(tok)
	tok = p.next()
	if tok.kind != "T_END" {
		p.fail("the end", tok)
	}
	L.Push(v)
	return 1
}

func (p *jsonParser) fail(exp string, t jsonTok) {
	found := t.kind
	if t.err != "" {
		found = t.err
	}
	p.L.RaiseError("Expected %s but found %s at character %d", exp, found, t.index+1)
}

func (p *jsonParser) next() jsonTok {
	for p.p < len(p.s) && (p.s[p.p] == ' ' || p.s[p.p] == '\t' || p.s[p.p] == '\r' || p.s[p.p] == '\n') {
		p.p++
	}
	t := jsonTok{index: p.p}
	if p.p >= len(p.s) || p.s[p.p] == 0 {
		t.kind = "T_END"
		return t
	}
	ch := p.s[p.p]
	single := map[byte]string{'{': "T_OBJ_BEGIN", '}': "T_OBJ_END", '[': "T_ARR_BEGIN", ']': "T_ARR_END", ':': "T_COLON", ',': "T_COMMA"}
	if k, ok := single[ch]; ok {
		p.p++
		t.kind = k
		return t
	}
	rest := p.s[p.p:]
	switch {
	case ch == '"':
		return p.str(t)
	case ch == '-' || ('0' <= ch && ch <= '9'):
		return p.num(t)
	case len(rest) >= 4 && rest[:4] == "true":
		p.p += 4
		t.kind, t.v = "T_BOOLEAN", lua.LTrue
	case len(rest) >= 5 && rest[:5] == "false":
		p.p += 5
		t.kind, t.v = "T_BOOLEAN", lua.LFalse
	case len(rest) >= 4 && rest[:4] == "null":
		p.p += 4
		t.kind, t.v = "T_NULL", p.c.null
	default:
		t.err = "invalid token"
	}
	return t
}

func (p *jsonParser) num(t jsonTok) jsonTok {
	s := p.s[p.p:]
	i := 0
	if i < len(s) && s[i] == '-' {
		i++
	}
	// Infinity, NaN and hexadecimal are refused, as Redis builds cjson.
	if len(s) > i+1 && s[i] == '0' && (s[i+1] == 'x' || s[i+1] == 'X') {
		t.err = "invalid number"
		return t
	}
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	if i < len(s) && s[i] == '.' {
		i++
		for i < len(s) && '0' <= s[i] && s[i] <= '9' {
			i++
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		j := i + 1
		if j < len(s) && (s[j] == '+' || s[j] == '-') {
			j++
		}
		if j < len(s) && '0' <= s[j] && s[j] <= '9' {
			for j < len(s) && '0' <= s[j] && s[j] <= '9' {
				j++
			}
			i = j
		}
	}
	f, err := strconv.ParseFloat(s[:i], 64)
	if err != nil && !isRangeErr(err) {
		t.err = "invalid number"
		return t
	}
	p.p += i
	t.kind, t.v = "T_NUMBER", lua.LNumber(f)
	return t
}

func isRangeErr(err error) bool {
	ne, ok := err.(*strconv.NumError)
	return ok && ne.Err == strconv.ErrRange
}

func (p *jsonParser) str(t jsonTok) jsonTok {
	var b []byte
	i := p.p + 1
	for {
		if i >= len(p.s) {
			t.err = "unexpected end of string"
			return t
		}
		ch := p.s[i]
		if ch == '"' {
			break
		}
		if ch != '\\' {
			b = append(b, ch)
			i++
			continue
		}
		if i+1 >= len(p.s) {
			t.err = "unexpected end of string"
			return t
		}
		switch e := p.s[i+1]; {
		case jsonUnescapes[e] != 0:
			b = append(b, jsonUnescapes[e])
		case e == 'u':
			r, n := p.unicode(i)
			if n == 0 {
				t.err = "invalid unicode escape code"
				return t
			}
			b = utf8.AppendRune(b, r)
			i += n
			continue
		default:
			t.err = "invalid escape code"
			return t
		}
		i += 2
	}
	p.p = i + 1
	t.kind, t.v = "T_STRING", lua.LString(b)
	return t
}

// unicode reads \uXXXX (and a low surrogate after a high one) at i; it
// returns the rune and the bytes read, 0 when invalid.
func (p *jsonParser) unicode(i int) (rune, int) {
	hex4 := func(at int) (rune, bool) {
		if at+6 > len(p.s) || p.s[at] != '\\' || p.s[at+1] != 'u' {
			return 0, false
		}
		n, err := strconv.ParseUint(p.s[at+2:at+6], 16, 16)
		return rune(n), err == nil
	}
	r, ok := hex4(i)
	if !ok {
		return 0, 0
	}
	if r >= 0xD800 && r <= 0xDBFF {
		lo, ok := hex4(i + 6)
		if !ok || lo < 0xDC00 || lo > 0xDFFF {
			return 0, 0
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), 12
	}
	if r >= 0xDC00 && r <= 0xDFFF {
		return 0, 0
	}
	return r, 6
}

func (p *jsonParser) value(t jsonTok) lua.LValue {
	switch t.kind {
	case "T_STRING", "T_NUMBER", "T_BOOLEAN", "T_NULL":
		return t.v
	case "T_OBJ_BEGIN":
		p.descend(t)
		obj := p.L.NewTable()
		tok := p.next()
		if tok.kind == "T_OBJ_END" {
			p.depth--
			return obj
		}
		for {
			if tok.kind != "T_STRING" {
				p.fail("object key string", tok)
			}
			key := tok.v
			tok = p.next()
			if tok.kind != "T_COLON" {
				p.fail("colon", tok)
			}
			obj.RawSet(key, p.value(p.next()))
			tok = p.next()
			if tok.kind == "T_OBJ_END" {
				p.depth--
				return obj
			}
			if tok.kind != "T_COMMA" {
				p.fail("comma or object end", tok)
			}
			tok = p.next()
		}
	case "T_ARR_BEGIN":
		p.descend(t)
		arr := p.L.NewTable()
		tok := p.next()
		if tok.kind == "T_ARR_END" {
			p.depth--
			return arr
		}
		for i := 1; ; i++ {
			arr.RawSetInt(i, p.value(tok))
			tok = p.next()
			if tok.kind == "T_ARR_END" {
				p.depth--
				return arr
			}
			if tok.kind != "T_COMMA" {
				p.fail("comma or array end", tok)
			}
			tok = p.next()
		}
	}
	p.fail("value", t)
	return lua.LNil
}

func (p *jsonParser) descend(t jsonTok) {
	p.depth++
	if p.depth > 1000 {
		p.L.RaiseError("Found too many nested data structures (%d) at character %d", p.depth, t.index+1)
	}
}
