package script

import (
	"math"
	"sort"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The built-ins that replace gopher-lua's where its version is unbounded
// (string.rep, table.concat, unpack, string.byte, the pattern functions,
// loadstring), differs from Lua 5.1 (string.format, which is Go's
// fmt.Sprintf there; string.lower and upper, which are Unicode's there),
// or exposes shared state (the string library is also the strings'
// metatable there).

// openString returns a string library of its own: gopher-lua's functions
// that are Lua 5.1's (char, len, sub, reverse, dump) and this package's.
func openString(L *lua.LState, g *limits, base *lua.LTable) *lua.LTable {
	t := L.NewTable()
	for _, name := range []string{"char", "len", "sub", "reverse", "dump"} {
		t.RawSetString(name, base.RawGetString(name))
	}
	for name, fn := range map[string]lua.LGFunction{
		"byte":   strByte,
		"find":   strFind,
		"match":  strMatch,
		"gmatch": strGmatch,
		"gsub":   g.strGsub,
		"format": g.strFormat,
		"rep":    g.strRep,
		"lower":  strLower,
		"upper":  strUpper,
	} {
		t.RawSetString(name, L.NewFunction(fn))
	}
	t.RawSetString("gfind", t.RawGetString("gmatch")) // LUA_COMPAT_GFIND, as Redis builds Lua
	return t
}

// openTable returns a table library with a bounded concat, a sort that
// can be stopped, and an insert that refuses the tables readOnly names
// (gopher-lua's writes its argument raw, past a proxy's __newindex).
func openTable(L *lua.LState, g *limits, base *lua.LTable, readOnly func(*lua.LTable) bool) *lua.LTable {
	t := L.NewTable()
	for _, name := range []string{"getn", "maxn", "remove"} {
		if v := base.RawGetString(name); v != lua.LNil {
			t.RawSetString(name, v)
		}
	}
	insert := base.RawGetString("insert").(*lua.LFunction)
	t.RawSetString("insert", L.NewFunction(func(L *lua.LState) int {
		if readOnly(L.CheckTable(1)) {
			L.Error(lua.LString("Attempt to modify a readonly table"), 0)
		}
		if L.GetTop() > 3 {
			L.RaiseError("wrong number of arguments to 'insert'")
		}
		return insert.GFunction(L)
	}))
	t.RawSetString("setn", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("'setn' is obsolete")
		return 0
	}))
	t.RawSetString("concat", L.NewFunction(g.tableConcat))
	t.RawSetString("sort", L.NewFunction(tableSort))
	return t
}

func (g *limits) strRep(L *lua.LState) int {
	s := checkString(L, 1, "rep")
	n := checkInteger(L, 2, "rep")
	if n <= 0 || len(s) == 0 {
		L.Push(lua.LString(""))
		return 1
	}
	if n > g.maxBytes()/int64(len(s)) {
		outOfMemory(L)
	}
	L.Push(lua.LString(strings.Repeat(s, int(n))))
	return 1
}

func strByte(L *lua.LState) int {
	s := checkString(L, 1, "byte")
	posi := posRelat(optInteger(L, 2, "byte", 1), len(s))
	pose := posRelat(optInteger(L, 3, "byte", posi), len(s))
	if posi <= 0 {
		posi = 1
	}
	if pose > int64(len(s)) {
		pose = int64(len(s))
	}
	if posi > pose {
		return 0
	}
	n := pose - posi + 1
	if int64(L.GetTop())+n > MaxResults {
		L.RaiseError("stack overflow (string slice too long)")
	}
	for i := posi - 1; i < pose; i++ {
		L.Push(lua.LNumber(s[i]))
	}
	return int(n)
}

func strLower(L *lua.LState) int {
	s := checkString(L, 1, "lower")
	b := []byte(s)
	for i, c := range b {
		if isUpper(c) {
			b[i] = c + 'a' - 'A'
		}
	}
	L.Push(lua.LString(b))
	return 1
}

func strUpper(L *lua.LState) int {
	s := checkString(L, 1, "upper")
	b := []byte(s)
	for i, c := range b {
		if isLower(c) {
			b[i] = c - 'a' + 'A'
		}
	}
	L.Push(lua.LString(b))
	return 1
}

// luaUnpack is Lua 5.1's unpack: at most MaxResults values, counting
// the arguments, or "too many results to unpack".
func luaUnpack(L *lua.LState) int {
	t := L.CheckTable(1)
	i := optInteger(L, 2, "unpack", 1)
	var e int64
	if L.Get(3) == lua.LNil {
		e = int64(t.Len())
	} else {
		e = checkInteger(L, 3, "unpack")
	}
	if i > e {
		return 0
	}
	n := e - i + 1
	if n <= 0 || n+int64(L.GetTop()) > MaxResults {
		L.RaiseError("too many results to unpack")
	}
	for k := i; k <= e; k++ {
		L.Push(t.RawGetInt(int(k)))
	}
	return int(n)
}

// tableConcat is Lua 5.1's table.concat, refusing a result past the
// memory limit before it is built.
func (g *limits) tableConcat(L *lua.LState) int {
	t := L.CheckTable(1)
	sep := ""
	if L.Get(2) != lua.LNil {
		sep = checkString(L, 2, "concat")
	}
	i := optInteger(L, 3, "concat", 1)
	var j int64
	if L.Get(4) == lua.LNil {
		j = int64(t.Len())
	} else {
		j = checkInteger(L, 4, "concat")
	}
	if i > j {
		L.Push(lua.LString(""))
		return 1
	}
	var tk ticker
	size := int64(0)
	for k := i; k <= j; k++ {
		tk.tick(L)
		switch v := t.RawGetInt(int(k)).(type) {
		case lua.LString:
			size += int64(len(v))
		case lua.LNumber:
			size += int64(len(formatNumber(v)))
		default:
			L.RaiseError("invalid value (%s) at index %d in table for 'concat'", v.Type().String(), k)
		}
		if k < j {
			size += int64(len(sep))
		}
		if size > g.maxBytes() {
			outOfMemory(L)
		}
	}
	var b strings.Builder
	b.Grow(int(size))
	for k := i; k <= j; k++ {
		tk.tick(L)
		b.WriteString(luaString(t.RawGetInt(int(k))))
		if k < j {
			b.WriteString(sep)
		}
	}
	L.Push(lua.LString(b.String()))
	return 1
}

// tableSort is table.sort over t[1..#t], stopping when the run ends.
func tableSort(L *lua.LState) int {
	t := L.CheckTable(1)
	var cmp *lua.LFunction
	if L.GetTop() >= 2 && L.Get(2) != lua.LNil {
		cmp = L.CheckFunction(2)
	}
	n := t.Len()
	vals := make([]lua.LValue, n)
	for i := range vals {
		vals[i] = t.RawGetInt(i + 1)
	}
	var tk ticker
	sort.Sort(luaSorter{L: L, cmp: cmp, v: vals, tk: &tk})
	for i, v := range vals {
		t.RawSetInt(i+1, v)
	}
	return 0
}

type luaSorter struct {
	L   *lua.LState
	cmp *lua.LFunction
	v   []lua.LValue
	tk  *ticker
}

func (s luaSorter) Len() int      { return len(s.v) }
func (s luaSorter) Swap(i, j int) { s.v[i], s.v[j] = s.v[j], s.v[i] }
func (s luaSorter) Less(i, j int) bool {
	s.tk.tick(s.L)
	if s.cmp == nil {
		return s.L.LessThan(s.v[i], s.v[j])
	}
	s.L.Push(s.cmp)
	s.L.Push(s.v[i])
	s.L.Push(s.v[j])
	s.L.Call(2, 1)
	r := s.L.Get(-1)
	s.L.Pop(1)
	return lua.LVAsBool(r)
}

// luaLoadString is loadstring, for sources up to maxChunk bytes.
func luaLoadString(L *lua.LState) int {
	src := checkString(L, 1, "loadstring")
	name := src
	if L.Get(2) != lua.LNil {
		name = checkString(L, 2, "loadstring")
	}
	return loadChunk(L, src, name)
}

// luaLoad is load: the reader's pieces, up to maxChunk bytes in all.
func luaLoad(L *lua.LState) int {
	fn := L.CheckFunction(1)
	name := "=(load)"
	if L.Get(2) != lua.LNil {
		name = checkString(L, 2, "load")
	}
	var b strings.Builder
	for {
		L.Push(fn)
		L.Call(0, 1)
		v := L.Get(-1)
		L.Pop(1)
		var piece string
		switch v := v.(type) {
		case *lua.LNilType:
		case lua.LString:
			piece = string(v)
		case lua.LNumber:
			piece = formatNumber(v)
		default:
			L.Push(lua.LNil)
			L.Push(lua.LString("reader function must return a string"))
			return 2
		}
		if piece == "" {
			break
		}
		if b.Len()+len(piece) > maxChunk {
			L.Push(lua.LNil)
			L.Push(lua.LString("chunk too large (the most is " + strconv.Itoa(maxChunk) + " bytes)"))
			return 2
		}
		b.WriteString(piece)
	}
	return loadChunk(L, b.String(), name)
}

func loadChunk(L *lua.LState, src, name string) int {
	if len(src) > maxChunk {
		L.Push(lua.LNil)
		L.Push(lua.LString("chunk too large (the most is " + strconv.Itoa(maxChunk) + " bytes)"))
		return 2
	}
	if len(src) > 0 && src[0] == 0x1b {
		// Lua 5.1 loads precompiled chunks; Redis's sandbox refuses them.
		L.Push(lua.LNil)
		L.Push(lua.LString("binary code not loaded"))
		return 2
	}
	if msg := checkLevels(src, compileChunkID(name)); msg != "" {
		L.Push(lua.LNil)
		L.Push(lua.LString(msg))
		return 2
	}
	fn, err := L.Load(strings.NewReader(src), name)
	if err != nil {
		L.Push(lua.LNil)
		L.Push(lua.LString(compileError(err, compileChunkID(name))))
		return 2
	}
	L.Push(fn)
	return 1
}

// strFormat is Lua 5.1's string.format: flags "-+ #0", a width and a
// precision of at most two digits each, and C's conversions.
func (g *limits) strFormat(L *lua.LState) int {
	f := checkString(L, 1, "format")
	top := L.GetTop()
	arg := 1
	var b []byte
	for i := 0; i < len(f); {
		c := f[i]
		if c != '%' {
			b = append(b, c)
			i++
			continue
		}
		i++
		if i < len(f) && f[i] == '%' {
			b = append(b, '%')
			i++
			continue
		}
		arg++
		if arg > top {
			argError(L, arg, "format", "no value")
		}
		spec, next := scanFormat(L, f, i)
		i = next
		var conv byte
		if i < len(f) {
			conv = f[i]
		}
		i++
		switch conv {
		case 'c':
			b = spec.pad(b, string([]byte{byte(truncInt(checkNumber(L, arg, "format")))}))
		case 'd', 'i':
			b = spec.appendInt(b, truncInt(checkNumber(L, arg, "format")))
		case 'o', 'u', 'x', 'X':
			n := checkNumber(L, arg, "format")
			var u uint64
			if n < 0 {
				u = uint64(truncInt(n))
			} else if n >= 1.8446744073709552e19 {
				u = 1 << 63
			} else {
				u = uint64(n)
			}
			b = spec.appendUint(b, u, conv)
		case 'e', 'E', 'f', 'g', 'G':
			b = spec.appendFloat(b, checkNumber(L, arg, "format"), conv)
		case 'q':
			b = appendQuoted(b, checkString(L, arg, "format"))
		case 's':
			s := checkString(L, arg, "format")
			if !spec.hasPrec && len(s) >= 100 {
				b = append(b, s...)
			} else {
				if spec.hasPrec && len(s) > spec.prec {
					s = s[:spec.prec]
				}
				b = spec.pad(b, s)
			}
		default:
			L.RaiseError("invalid option '%%%c' to 'format'", conv)
		}
		if int64(len(b)) > g.maxBytes() {
			outOfMemory(L)
		}
	}
	L.Push(lua.LString(b))
	return 1
}

type formatSpec struct {
	width, prec int
	hasPrec     bool
	left, zero  bool
	plus, space bool
	alt         bool
}

// scanFormat is scanformat: the flags, width and precision at f[i:].
func scanFormat(L *lua.LState, f string, i int) (formatSpec, int) {
	var s formatSpec
	start := i
	for i < len(f) && strings.IndexByte("-+ #0", f[i]) >= 0 {
		i++
	}
	if i-start >= 6 {
		L.RaiseError("invalid format (repeated flags)")
	}
	flags := f[start:i]
	s.left = strings.Contains(flags, "-")
	s.zero = strings.Contains(flags, "0")
	s.plus = strings.Contains(flags, "+")
	s.space = strings.Contains(flags, " ")
	s.alt = strings.Contains(flags, "#")
	w := i
	for k := 0; k < 2 && i < len(f) && isDigit(f[i]); k++ {
		i++
	}
	s.width, _ = strconv.Atoi(f[w:i])
	if i < len(f) && f[i] == '.' {
		i++
		s.hasPrec = true
		p := i
		for k := 0; k < 2 && i < len(f) && isDigit(f[i]); k++ {
			i++
		}
		s.prec, _ = strconv.Atoi(f[p:i])
	}
	if i < len(f) && isDigit(f[i]) {
		L.RaiseError("invalid format (width or precision too long)")
	}
	return s, i
}

// pad pads s to the width with spaces, as %s and %c do.
func (s formatSpec) pad(b []byte, v string) []byte {
	n := s.width - len(v)
	if !s.left {
		for ; n > 0; n-- {
			b = append(b, ' ')
		}
	}
	b = append(b, v...)
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return b
}

// number lays out a formatted number: sign, prefix and digits, padded
// as C's printf does (zeros after the sign and prefix with '0' and no
// '-').
func (s formatSpec) number(b []byte, sign, prefix, digits string, zeroOK bool) []byte {
	n := s.width - len(sign) - len(prefix) - len(digits)
	if s.left {
		b = append(append(append(b, sign...), prefix...), digits...)
		for ; n > 0; n-- {
			b = append(b, ' ')
		}
		return b
	}
	if s.zero && zeroOK {
		b = append(append(b, sign...), prefix...)
		for ; n > 0; n-- {
			b = append(b, '0')
		}
		return append(b, digits...)
	}
	for ; n > 0; n-- {
		b = append(b, ' ')
	}
	return append(append(append(b, sign...), prefix...), digits...)
}

func (s formatSpec) sign(neg bool) string {
	switch {
	case neg:
		return "-"
	case s.plus:
		return "+"
	case s.space:
		return " "
	}
	return ""
}

// intDigits applies an integer precision (the least number of digits).
func (s formatSpec) intDigits(d string) string {
	if s.hasPrec {
		if s.prec == 0 && d == "0" {
			return ""
		}
		for len(d) < s.prec {
			d = "0" + d
		}
	}
	return d
}

func (s formatSpec) appendInt(b []byte, n int64) []byte {
	var d string
	if n < 0 {
		d = strconv.FormatUint(uint64(-(n+1))+1, 10)
	} else {
		d = strconv.FormatInt(n, 10)
	}
	return s.number(b, s.sign(n < 0), "", s.intDigits(d), !s.hasPrec)
}

func (s formatSpec) appendUint(b []byte, u uint64, conv byte) []byte {
	var d, prefix string
	switch conv {
	case 'o':
		d = s.intDigits(strconv.FormatUint(u, 8))
		if s.alt && (d == "" || d[0] != '0') {
			d = "0" + d
		}
	case 'u':
		d = s.intDigits(strconv.FormatUint(u, 10))
	case 'x', 'X':
		d = s.intDigits(strconv.FormatUint(u, 16))
		if s.alt && u != 0 {
			prefix = "0x"
		}
		if conv == 'X' {
			d, prefix = strings.ToUpper(d), strings.ToUpper(prefix)
		}
	}
	return s.number(b, "", prefix, d, !s.hasPrec)
}

func (s formatSpec) appendFloat(b []byte, f float64, conv byte) []byte {
	neg := math.Signbit(f)
	if math.IsInf(f, 0) || math.IsNaN(f) {
		d := "inf"
		if math.IsNaN(f) {
			d = "nan"
		}
		if conv == 'E' || conv == 'G' {
			d = strings.ToUpper(d)
		}
		return s.number(b, s.sign(neg), "", d, false)
	}
	prec := 6
	if s.hasPrec {
		prec = s.prec
	}
	a := math.Abs(f)
	var d string
	switch conv {
	case 'f':
		d = strconv.FormatFloat(a, 'f', prec, 64)
		if s.alt && prec == 0 {
			d += "."
		}
	case 'e', 'E':
		d = strconv.FormatFloat(a, 'e', prec, 64)
		if s.alt && prec == 0 {
			i := strings.IndexByte(d, 'e')
			d = d[:i] + "." + d[i:]
		}
	case 'g', 'G':
		if prec == 0 {
			prec = 1
		}
		d = cG(a, prec, s.alt)
	}
	if conv == 'E' || conv == 'G' {
		d = strings.ToUpper(d)
	}
	return s.number(b, s.sign(neg), "", d, true)
}

// cG is C's %.<prec>g of a non-negative finite number (formatG), or
// %#.<prec>g when alt: the same layout with its trailing zeros kept.
func cG(a float64, prec int, alt bool) string {
	if !alt {
		return formatG(a, prec)
	}
	e := strconv.FormatFloat(a, 'e', prec-1, 64)
	i := strings.IndexByte(e, 'e')
	exp, _ := strconv.Atoi(e[i+1:])
	if exp < -4 || exp >= prec {
		return e
	}
	return strconv.FormatFloat(a, 'f', prec-1-exp, 64)
}

// appendQuoted is %q: the string between double quotes, with '"', '\\'
// and newline escaped by a backslash, '\r' as \r and NUL as \000.
func appendQuoted(b []byte, s string) []byte {
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"', '\\', '\n':
			b = append(b, '\\', c)
		case '\r':
			b = append(b, '\\', 'r')
		case 0:
			b = append(b, '\\', '0', '0', '0')
		default:
			b = append(b, c)
		}
	}
	return append(b, '"')
}
