package script

import (
	"fmt"
	"math"
	"strconv"
	"unicode/utf8"

	lua "github.com/yuin/gopher-lua"
)

// cjson is Redis's lua-cjson 2.1: numbers with 14 significant digits
// (encode_number_precision), '/' escaped, excessively sparse arrays
// refused (encode_sparse_array), 1000 levels of nesting either way
// (encode_max_depth, decode_max_depth). Redis keeps a setting until the
// next script changes it; here every run starts from the defaults, so
// one script's settings never change what another sees.

type cjsonLib struct {
	null *lua.LUserData
	lim  *limits
	cfg  cjsonConfig
}

type cjsonConfig struct {
	sparseConvert  bool
	sparseRatio    int64
	sparseSafe     int64
	encodeMaxDepth int64
	decodeMaxDepth int64
	precision      int64
	keepBuffer     bool
	encodeInvalid  int // 0 off, 1 on, 2 null
	decodeInvalid  bool
}

var cjsonDefaults = cjsonConfig{sparseRatio: 2, sparseSafe: 10, encodeMaxDepth: 1000, decodeMaxDepth: 1000, precision: 14, keepBuffer: true}

func newCjson(L *lua.LState, lim *limits) *cjsonLib {
	return &cjsonLib{null: L.NewUserData(), lim: lim, cfg: cjsonDefaults}
}

// reset restores the defaults after a run.
func (c *cjsonLib) reset() { c.cfg = cjsonDefaults }

func (c *cjsonLib) table(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	t.RawSetString("encode", L.NewFunction(c.encode))
	t.RawSetString("decode", L.NewFunction(c.decode))
	t.RawSetString("null", c.null)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	t.RawSetString("encode_sparse_array", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 3)
		c.boolOption(L, 1, "encode_sparse_array", &c.cfg.sparseConvert)
		intOption(L, 2, "encode_sparse_array", &c.cfg.sparseRatio, 0, math.MaxInt32)
		intOption(L, 3, "encode_sparse_array", &c.cfg.sparseSafe, 0, math.MaxInt32)
		return 3
	}))
	t.RawSetString("encode_max_depth", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return intOption(L, 1, "encode_max_depth", &c.cfg.encodeMaxDepth, 1, math.MaxInt32)
	}))
	t.RawSetString("decode_max_depth", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return intOption(L, 1, "decode_max_depth", &c.cfg.decodeMaxDepth, 1, math.MaxInt32)
	}))
	t.RawSetString("encode_number_precision", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return intOption(L, 1, "encode_number_precision", &c.cfg.precision, 1, 14)
	}))
	t.RawSetString("encode_keep_buffer", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return c.boolOption(L, 1, "encode_keep_buffer", &c.cfg.keepBuffer)
	}))
	t.RawSetString("encode_invalid_numbers", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return enumOption(L, 1, "encode_invalid_numbers", &c.cfg.encodeInvalid, []string{"off", "on", "null"})
	}))
	t.RawSetString("decode_invalid_numbers", L.NewFunction(func(L *lua.LState) int {
		c.argsAtMost(L, 1)
		return c.boolOption(L, 1, "decode_invalid_numbers", &c.cfg.decodeInvalid)
	}))
	return t
}

// argsAtMost is json_arg_init's check.
func (c *cjsonLib) argsAtMost(L *lua.LState, n int) {
	if L.GetTop() > n {
		L.ArgError(n+1, "found too many arguments")
	}
}

// intOption is json_integer_option: set the setting when the argument is
// given, and return it.
func intOption(L *lua.LState, i int, fn string, v *int64, lo, hi int64) int {
	if L.Get(i) != lua.LNil {
		n := checkInteger(L, i, fn)
		if n < lo || n > hi {
			argError(L, 1, fn, "expected integer between "+strconv.FormatInt(lo, 10)+" and "+strconv.FormatInt(hi, 10))
		}
		*v = n
	}
	L.Push(lua.LNumber(*v))
	return 1
}

// enumOption is json_enum_option: a boolean (false is the first option,
// true the second) or one of options.
func enumOption(L *lua.LState, i int, fn string, v *int, options []string) int {
	switch a := L.Get(i).(type) {
	case *lua.LNilType:
	case lua.LBool:
		*v = 0
		if a {
			*v = 1
		}
	default:
		s := checkString(L, i, fn)
		found := false
		for k, o := range options {
			if o == s {
				*v, found = k, true
			}
		}
		if !found {
			argError(L, i, fn, "invalid option '"+s+"'")
		}
	}
	if *v <= 1 {
		L.Push(lua.LBool(*v == 1))
	} else {
		L.Push(lua.LString(options[*v]))
	}
	return 1
}

func (c *cjsonLib) boolOption(L *lua.LState, i int, fn string, v *bool) int {
	n := 0
	if *v {
		n = 1
	}
	enumOption(L, i, fn, &n, []string{"off", "on"})
	*v = n == 1
	return 1
}

// cjsonEncoder is one cjson.encode call.
type cjsonEncoder struct {
	c  *cjsonLib
	tk ticker
}

func (c *cjsonLib) encode(L *lua.LState) int {
	if L.GetTop() != 1 {
		L.ArgError(1, "expected 1 argument")
	}
	enc := &cjsonEncoder{c: c}
	b := enc.append(L, nil, L.Get(1), 0)
	L.Push(lua.LString(b))
	return 1
}

func cjsonFail(L *lua.LState, v lua.LValue, reason string) {
	L.RaiseError("Cannot serialise %s: %s", v.Type().String(), reason)
}

func (enc *cjsonEncoder) append(L *lua.LState, b []byte, v lua.LValue, depth int) []byte {
	c := enc.c
	enc.tk.tick(L)
	if int64(len(b)) > c.lim.maxBytes() {
		outOfMemory(L)
	}
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
		if int64(depth) > c.cfg.encodeMaxDepth {
			L.RaiseError("Cannot serialise, excessive nesting (%d)", depth)
		}
		if n := c.arrayLength(L, v); n > 0 {
			b = append(b, '[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b = append(b, ',')
				}
				b = enc.append(L, b, v.RawGetInt(i), depth)
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
			b = enc.append(L, b, val, depth)
		})
		return append(b, '}')
	}
	cjsonFail(L, v, "type not supported")
	return b
}

// arrayLength is lua_array_length: the largest key when every key is a
// positive integer, -1 otherwise (or when the array is too sparse to be
// one, which is an error by default).
func (c *cjsonLib) arrayLength(L *lua.LState, t *lua.LTable) int {
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
	if c.cfg.sparseRatio > 0 && int64(max) > int64(items)*c.cfg.sparseRatio && int64(max) > c.cfg.sparseSafe {
		if !c.cfg.sparseConvert {
			cjsonFail(L, t, "excessively sparse array")
		}
		return -1
	}
	return max
}

func (c *cjsonLib) number(L *lua.LState, b []byte, n lua.LNumber) []byte {
	f := float64(n)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		switch c.cfg.encodeInvalid {
		case 0:
			cjsonFail(L, n, "must not be NaN or Inf")
		case 2:
			return append(b, "null"...)
		}
		if math.IsNaN(f) {
			return append(b, "nan"...)
		}
		if f < 0 {
			return append(b, "-inf"...)
		}
		return append(b, "inf"...)
	}
	return append(b, formatG(f, int(c.cfg.precision))...)
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
	tk    ticker
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
	p.tk.tick(p.L)
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
	checkContext(p.L)
	if int64(p.depth) > p.c.cfg.decodeMaxDepth {
		p.L.RaiseError("Found too many nested data structures (%d) at character %d", p.depth, t.index+1)
	}
}
