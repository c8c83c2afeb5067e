package script

import (
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// Lua 5.1's string patterns (string.find, match, gmatch and gsub), as
// lstrlib.c defines them, with two bounds that Lua 5.1 lacks: a match
// checks the script's context every few thousand steps, so SCRIPT KILL and
// shutdown stop a pattern that backtracks exponentially, and recursion is
// limited to maxMatchDepth levels ("pattern too complex", Lua 5.2's text),
// so a long pattern cannot exhaust the goroutine's stack (Lua 5.1 would
// overflow the C stack somewhat deeper). gopher-lua's own
// matcher has neither.

const (
	maxCaptures   = 32 // LUA_MAXCAPTURES
	maxMatchDepth = 10000
	capUnfinished = -1
	capPosition   = -2
	patSpecials   = "^$*+?.([%-"
)

type capture struct {
	init, len int
}

// matcher is lstrlib.c's MatchState over one subject and one pattern.
type matcher struct {
	L     *lua.LState
	src   string
	pat   string // cut at its first NUL, as Lua 5.1's C string is
	level int
	depth int
	steps int
	caps  [maxCaptures]capture
}

func newMatcher(L *lua.LState, src, pat string) *matcher {
	if i := strings.IndexByte(pat, 0); i >= 0 {
		pat = pat[:i]
	}
	return &matcher{L: L, src: src, pat: pat}
}

// p returns the pattern byte at i, 0 past its end (C's terminator).
func (m *matcher) p(i int) byte {
	if i < len(m.pat) {
		return m.pat[i]
	}
	return 0
}

// s returns the subject byte at i, 0 at its end (C's terminator).
func (m *matcher) s(i int) byte {
	if i < len(m.src) {
		return m.src[i]
	}
	return 0
}

// step counts work and checks the script's context every 4096 steps.
func (m *matcher) step() {
	m.steps++
	if m.steps&4095 == 0 {
		checkContext(m.L)
	}
}

func (m *matcher) fail(msg string) { m.L.RaiseError("%s", msg) }

func (m *matcher) classEnd(p int) int {
	c := m.p(p)
	p++
	switch c {
	case '%':
		if p >= len(m.pat) {
			m.fail("malformed pattern (ends with '%')")
		}
		return p + 1
	case '[':
		if m.p(p) == '^' {
			p++
		}
		for {
			if p >= len(m.pat) {
				m.fail("malformed pattern (missing ']')")
			}
			c := m.pat[p]
			p++
			if c == '%' && p < len(m.pat) {
				p++
			}
			if m.p(p) == ']' {
				return p + 1
			}
		}
	}
	return p
}

func isLower(c byte) bool { return 'a' <= c && c <= 'z' }
func isUpper(c byte) bool { return 'A' <= c && c <= 'Z' }
func isDigit(c byte) bool { return '0' <= c && c <= '9' }
func isAlpha(c byte) bool { return isLower(c) || isUpper(c) }
func isSpace(c byte) bool { return c == ' ' || ('\t' <= c && c <= '\r') }
func isCntrl(c byte) bool { return c < 32 || c == 127 }
func isPunct(c byte) bool { return c > 32 && c < 127 && !isAlpha(c) && !isDigit(c) }
func isXDigit(c byte) bool {
	return isDigit(c) || ('a' <= c && c <= 'f') || ('A' <= c && c <= 'F')
}
func toLower(c byte) byte {
	if isUpper(c) {
		return c + 'a' - 'A'
	}
	return c
}

// matchClass is match_class in the C locale.
func matchClass(c, cl byte) bool {
	var res bool
	switch toLower(cl) {
	case 'a':
		res = isAlpha(c)
	case 'c':
		res = isCntrl(c)
	case 'd':
		res = isDigit(c)
	case 'l':
		res = isLower(c)
	case 'p':
		res = isPunct(c)
	case 's':
		res = isSpace(c)
	case 'u':
		res = isUpper(c)
	case 'w':
		res = isAlpha(c) || isDigit(c)
	case 'x':
		res = isXDigit(c)
	case 'z':
		res = c == 0
	default:
		return cl == c
	}
	if isLower(cl) {
		return res
	}
	return !res
}

// matchBracket is matchbracketclass: p at '[', ec at its ']'.
func (m *matcher) matchBracket(c byte, p, ec int) bool {
	sig := true
	if m.p(p+1) == '^' {
		sig = false
		p++
	}
	for p++; p < ec; p++ {
		switch {
		case m.pat[p] == '%':
			p++
			if matchClass(c, m.p(p)) {
				return sig
			}
		case m.p(p+1) == '-' && p+2 < ec:
			p += 2
			if m.pat[p-2] <= c && c <= m.pat[p] {
				return sig
			}
		case m.pat[p] == c:
			return sig
		}
	}
	return !sig
}

func (m *matcher) single(s, p, ep int) bool {
	if s >= len(m.src) {
		return false
	}
	c := m.src[s]
	switch m.pat[p] {
	case '.':
		return true
	case '%':
		return matchClass(c, m.p(p+1))
	case '[':
		return m.matchBracket(c, p, ep-1)
	}
	return m.pat[p] == c
}

// match is lstrlib.c's match: the end of the match of pattern p at
// subject position s, or -1.
func (m *matcher) match(s, p int) int {
	m.depth++
	if m.depth > maxMatchDepth {
		m.fail("pattern too complex")
	}
	defer func() { m.depth-- }()
	for {
		m.step()
		switch m.p(p) {
		case '(':
			if m.p(p+1) == ')' {
				return m.startCapture(s, p+2, capPosition)
			}
			return m.startCapture(s, p+1, capUnfinished)
		case ')':
			return m.endCapture(s, p+1)
		case 0:
			return s
		case '$':
			if p+1 == len(m.pat) {
				if s == len(m.src) {
					return s
				}
				return -1
			}
		case '%':
			switch c := m.p(p + 1); {
			case c == 'b':
				s = m.matchBalance(s, p+2)
				if s < 0 {
					return -1
				}
				p += 4
				continue
			case c == 'f':
				p += 2
				if m.p(p) != '[' {
					m.fail("missing '[' after '%f' in pattern")
				}
				ep := m.classEnd(p)
				var prev byte
				if s > 0 {
					prev = m.src[s-1]
				}
				if m.matchBracket(prev, p, ep-1) || !m.matchBracket(m.s(s), p, ep-1) {
					return -1
				}
				p = ep
				continue
			case isDigit(c):
				s = m.matchCapture(s, c)
				if s < 0 {
					return -1
				}
				p += 2
				continue
			}
		}
		// A single-character class, maybe with a repetition.
		ep := m.classEnd(p)
		ok := m.single(s, p, ep)
		switch m.p(ep) {
		case '?':
			if ok {
				if r := m.match(s+1, ep+1); r >= 0 {
					return r
				}
			}
			p = ep + 1
			continue
		case '*':
			return m.maxExpand(s, p, ep)
		case '+':
			if !ok {
				return -1
			}
			return m.maxExpand(s+1, p, ep)
		case '-':
			return m.minExpand(s, p, ep)
		}
		if !ok {
			return -1
		}
		s++
		p = ep
	}
}

func (m *matcher) matchBalance(s, p int) int {
	if p+1 >= len(m.pat) {
		m.fail("unbalanced pattern")
	}
	if s >= len(m.src) || m.src[s] != m.pat[p] {
		return -1
	}
	b, e := m.pat[p], m.pat[p+1]
	cont := 1
	for s++; s < len(m.src); s++ {
		m.step()
		switch m.src[s] {
		case e:
			cont--
			if cont == 0 {
				return s + 1
			}
		case b:
			cont++
		}
	}
	return -1
}

func (m *matcher) maxExpand(s, p, ep int) int {
	i := 0
	for m.single(s+i, p, ep) {
		i++
		m.step()
	}
	for ; i >= 0; i-- {
		if r := m.match(s+i, ep+1); r >= 0 {
			return r
		}
	}
	return -1
}

func (m *matcher) minExpand(s, p, ep int) int {
	for {
		if r := m.match(s, ep+1); r >= 0 {
			return r
		}
		if !m.single(s, p, ep) {
			return -1
		}
		s++
	}
}

func (m *matcher) startCapture(s, p, what int) int {
	if m.level >= maxCaptures {
		m.fail("too many captures")
	}
	m.caps[m.level] = capture{init: s, len: what}
	m.level++
	r := m.match(s, p)
	if r < 0 {
		m.level--
	}
	return r
}

func (m *matcher) endCapture(s, p int) int {
	l := -1
	for i := m.level - 1; i >= 0; i-- {
		if m.caps[i].len == capUnfinished {
			l = i
			break
		}
	}
	if l < 0 {
		m.fail("invalid pattern capture")
	}
	m.caps[l].len = s - m.caps[l].init
	r := m.match(s, p)
	if r < 0 {
		m.caps[l].len = capUnfinished
	}
	return r
}

func (m *matcher) matchCapture(s int, c byte) int {
	l := int(c) - '1'
	if l < 0 || l >= m.level || m.caps[l].len == capUnfinished {
		m.fail("invalid capture index")
	}
	cp := m.caps[l]
	if len(m.src)-s >= cp.len && m.src[cp.init:cp.init+cp.len] == m.src[s:s+cp.len] {
		return s + cp.len
	}
	return -1
}

// capture returns capture i of the match [s, e) (the whole match when
// the pattern has none).
func (m *matcher) capture(i, s, e int) lua.LValue {
	if i >= m.level {
		if i == 0 {
			return lua.LString(m.src[s:e])
		}
		m.fail("invalid capture index")
	}
	c := m.caps[i]
	switch c.len {
	case capUnfinished:
		m.fail("unfinished capture")
	case capPosition:
		return lua.LNumber(c.init + 1)
	}
	return lua.LString(m.src[c.init : c.init+c.len])
}

// pushCaptures pushes the captures of the match [s, e), or the whole
// match when there are none and s >= 0; it returns their count.
func (m *matcher) pushCaptures(s, e int) int {
	n := m.level
	if n == 0 && s >= 0 {
		n = 1
	}
	for i := range n {
		m.L.Push(m.capture(i, s, e))
	}
	return n
}

// posRelat is posrelat: a negative position counts from the end.
func posRelat(pos int64, n int) int64 {
	if pos < 0 {
		pos += int64(n) + 1
	}
	if pos < 0 {
		return 0
	}
	return pos
}

func strFind(L *lua.LState) int  { return strFindAux(L, true) }
func strMatch(L *lua.LState) int { return strFindAux(L, false) }

func strFindAux(L *lua.LState, find bool) int {
	name := "match"
	if find {
		name = "find"
	}
	s := checkString(L, 1, name)
	pat := checkString(L, 2, name)
	init := posRelat(optInteger(L, 3, name, 1), len(s)) - 1
	if init < 0 {
		init = 0
	} else if init > int64(len(s)) {
		init = int64(len(s))
	}
	plainPat := pat
	if i := strings.IndexByte(plainPat, 0); i >= 0 {
		plainPat = plainPat[:i]
	}
	if find && (lua.LVAsBool(L.Get(4)) || !strings.ContainsAny(plainPat, patSpecials)) {
		if i := strings.Index(s[init:], pat); i >= 0 {
			L.Push(lua.LNumber(int(init) + i + 1))
			L.Push(lua.LNumber(int(init) + i + len(pat)))
			return 2
		}
		L.Push(lua.LNil)
		return 1
	}
	m := newMatcher(L, s, pat)
	p := 0
	anchor := m.p(0) == '^'
	if anchor {
		p = 1
	}
	for s1 := int(init); ; s1++ {
		m.level = 0
		if e := m.match(s1, p); e >= 0 {
			if find {
				L.Push(lua.LNumber(s1 + 1))
				L.Push(lua.LNumber(e))
				return m.pushCaptures(-1, 0) + 2
			}
			return m.pushCaptures(s1, e)
		}
		if s1 >= len(s) || anchor {
			break
		}
	}
	L.Push(lua.LNil)
	return 1
}

func strGmatch(L *lua.LState) int {
	s := checkString(L, 1, "gmatch")
	pat := checkString(L, 2, "gmatch")
	pos := 0
	L.Push(L.NewFunction(func(L *lua.LState) int {
		m := newMatcher(L, s, pat)
		for src := pos; src <= len(s); src++ {
			m.level = 0
			if e := m.match(src, 0); e >= 0 {
				pos = e
				if e == src {
					pos++
				}
				return m.pushCaptures(src, e)
			}
		}
		pos = len(s) + 1
		return 0
	}))
	return 1
}

func (g *limits) strGsub(L *lua.LState) int {
	src := checkString(L, 1, "gsub")
	pat := checkString(L, 2, "gsub")
	repl := L.Get(3)
	switch repl.Type() {
	case lua.LTNumber, lua.LTString, lua.LTFunction, lua.LTTable:
	default:
		argError(L, 3, "gsub", "string/function/table expected")
	}
	maxN := optInteger(L, 4, "gsub", int64(len(src))+1)
	m := newMatcher(L, src, pat)
	p := 0
	anchor := m.p(0) == '^'
	if anchor {
		p = 1
	}
	var b []byte
	n := int64(0)
	s := 0
	add := func(v string) {
		if int64(len(b))+int64(len(v)) > g.maxBytes() {
			outOfMemory(L)
		}
		b = append(b, v...)
	}
	for n < maxN {
		m.level = 0
		e := m.match(s, p)
		if e >= 0 {
			n++
			add(g.replacement(L, m, repl, s, e))
		}
		switch {
		case e >= 0 && e > s:
			s = e
		case s < len(src):
			add(src[s : s+1])
			s++
		default:
			goto done
		}
		if anchor {
			break
		}
	}
done:
	add(src[s:])
	L.Push(lua.LString(b))
	L.Push(lua.LNumber(n))
	return 2
}

// replacement is add_value: the text that replaces the match [s, e).
func (g *limits) replacement(L *lua.LState, m *matcher, repl lua.LValue, s, e int) string {
	var v lua.LValue
	switch r := repl.(type) {
	case lua.LString, lua.LNumber:
		news := luaString(r)
		var b []byte
		for i := 0; i < len(news); i++ {
			c := news[i]
			if c != '%' {
				b = append(b, c)
				continue
			}
			i++
			c = 0
			if i < len(news) {
				c = news[i]
			}
			switch {
			case !isDigit(c):
				if i < len(news) {
					b = append(b, c)
				}
			case c == '0':
				b = append(b, m.src[s:e]...)
			default:
				b = append(b, luaString(m.capture(int(c-'1'), s, e))...)
			}
			if int64(len(b)) > g.maxBytes() {
				outOfMemory(L)
			}
		}
		return string(b)
	case *lua.LFunction:
		top := L.GetTop()
		L.Push(r)
		n := m.pushCaptures(s, e)
		L.Call(n, 1)
		v = L.Get(-1)
		L.SetTop(top)
	case *lua.LTable:
		v = L.GetTable(r, m.capture(0, s, e))
	}
	switch v := v.(type) {
	case *lua.LNilType:
		return m.src[s:e]
	case lua.LBool:
		if !v {
			return m.src[s:e]
		}
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatNumber(v)
	}
	L.RaiseError("invalid replacement value (a %s)", v.Type().String())
	return ""
}

// checkString is luaL_checklstring: a string, or a number as a string.
func checkString(L *lua.LState, i int, fn string) string {
	switch v := L.Get(i).(type) {
	case lua.LString:
		return string(v)
	case lua.LNumber:
		return formatNumber(v)
	}
	typeError(L, i, fn, "string")
	return ""
}

// checkNumber is luaL_checknumber: a number, or a string that converts.
func checkNumber(L *lua.LState, i int, fn string) float64 {
	switch v := L.Get(i).(type) {
	case lua.LNumber:
		return float64(v)
	case lua.LString:
		if f, ok := str2number(string(v)); ok {
			return f
		}
	}
	typeError(L, i, fn, "number")
	return 0
}

// checkInteger is luaL_checkinteger: the number truncated toward zero.
func checkInteger(L *lua.LState, i int, fn string) int64 {
	return truncInt(checkNumber(L, i, fn))
}

func optInteger(L *lua.LState, i int, fn string, def int64) int64 {
	if L.Get(i) == lua.LNil {
		return def
	}
	return checkInteger(L, i, fn)
}

// truncInt converts as C's cast of a double to a 64-bit integer does on
// x86: out of range (and NaN) is the smallest integer.
func truncInt(f float64) int64 {
	if f != f || f >= 9.223372036854775807e18 || f < -9.223372036854775808e18 {
		return -1 << 63
	}
	return int64(f)
}

func typeError(L *lua.LState, i int, fn, want string) {
	got := "no value"
	if i <= L.GetTop() {
		got = L.Get(i).Type().String()
	}
	argError(L, i, fn, want+" expected, got "+got)
}

// argError is luaL_argerror's text.
func argError(L *lua.LState, i int, fn, msg string) {
	L.RaiseError("bad argument #%s to '%s' (%s)", strconv.Itoa(i), fn, msg)
}
