package script

import (
	"strconv"
	"strings"
	"unsafe"

	lua "github.com/yuin/gopher-lua"
)

// redisLib builds the redis table: Redis 7.0's Lua API.
func (st *state) redisLib() *lua.LTable {
	L := st.L
	t := L.NewTable()
	fns := map[string]lua.LGFunction{
		"call":               func(L *lua.LState) int { return st.command(L, true) },
		"pcall":              func(L *lua.LState) int { return st.command(L, false) },
		"log":                st.log,
		"setresp":            st.setResp,
		"sha1hex":            sha1hex,
		"error_reply":        errorReply,
		"status_reply":       statusReply,
		"set_repl":           setRepl,
		"replicate_commands": func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"breakpoint":         func(L *lua.LState) int { L.Push(lua.LFalse); return 1 },
		"debug":              func(L *lua.LState) int { return 0 },
	}
	for name, fn := range fns {
		t.RawSetString(name, L.NewFunction(fn))
	}
	for name, v := range map[string]int{
		"LOG_DEBUG": LogDebug, "LOG_VERBOSE": LogVerbose, "LOG_NOTICE": LogNotice, "LOG_WARNING": LogWarning,
		"REPL_NONE": 0, "REPL_AOF": 1, "REPL_SLAVE": 2, "REPL_REPLICA": 2, "REPL_ALL": 3,
		"REDIS_VERSION_NUM": RedisVersionNum,
	} {
		t.RawSetString(name, lua.LNumber(v))
	}
	t.RawSetString("REDIS_VERSION", lua.LString(RedisVersion))
	return t
}

// raise raises Redis's error table {err=msg} for msg ("-CODE text" or
// plain text, which gets ERR).
func raise(L *lua.LState, msg string) {
	L.Error(errorTable(L, msg), 1)
}

// errorTable is luaPushErrorBuff: "-CODE msg" keeps its code, anything
// else gets ERR; the message loses its surrounding CR and LF.
func errorTable(L *lua.LState, s string) *lua.LTable {
	code, msg := "ERR", s
	if strings.HasPrefix(s, "-") {
		if i := strings.IndexByte(s, ' '); i < 0 {
			msg = s[1:]
		} else {
			code, msg = s[1:i], s[i+1:]
		}
	}
	msg = strings.Trim(msg, "\r\n")
	t := L.NewTable()
	t.RawSetString("err", lua.LString(code+" "+msg))
	return t
}

// command is redis.call (raise) and redis.pcall.
func (st *state) command(L *lua.LState, raiseErr bool) int {
	r := st.run
	if r == nil {
		raise(L, "redis.call/pcall can only be called inside a script invocation")
	}
	n := L.GetTop()
	if n == 0 {
		return st.fail(L, raiseErr, "Please specify at least one argument for this redis lib call")
	}
	// The arguments point into the Lua strings (a Caller copies what it
	// keeps, as a command does its connection's buffer) and numbers are
	// formatted into one scratch buffer: no copy per argument.
	args, num := r.argbuf[:0], r.numbuf[:0]
	for i := 1; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString:
			args = append(args, unsafe.Slice(unsafe.StringData(string(v)), len(v)))
		case lua.LNumber:
			// If num moves as it grows, the earlier numbers' slices keep
			// the old array alive: still valid.
			start := len(num)
			num = appendG(num, float64(v), 17)
			args = append(args, num[start:len(num):len(num)])
		default:
			return st.fail(L, raiseErr, "Lua redis lib command arguments must be strings or integers")
		}
	}
	r.numbuf = num[:0]
	r.argbuf = args
	L.SetTop(0)
	out := r.caller.Call(args, r.resp3)
	clear(args) // drop the references to the strings
	if v, ok := fastToLua(L, out); ok {
		L.Push(v)
		return 1
	}
	reply, _, err := ParseReply(out)
	if err != nil {
		return st.fail(L, raiseErr, "-ERR the command's reply is not RESP")
	}
	if reply.Kind == Error {
		t := errorTable(L, "-"+reply.Str)
		if raiseErr {
			L.Error(t, 1)
		}
		L.Push(t)
		return 1
	}
	L.Push(toLua(L, reply))
	return 1
}

func (st *state) fail(L *lua.LState, raiseErr bool, msg string) int {
	t := errorTable(L, msg)
	if raiseErr {
		L.Error(t, 1)
	}
	L.Push(t)
	return 1
}

// toLua converts a command's reply by Redis's rules.
func toLua(L *lua.LState, r Reply) lua.LValue {
	switch r.Kind {
	case Int:
		return lua.LNumber(r.Int)
	case Bulk:
		if r.Nil {
			return lua.LFalse
		}
		return lua.LString(r.Str)
	case Status:
		t := L.CreateTable(0, 1)
		t.RawSetString("ok", lua.LString(r.Str))
		return t
	case Error:
		return errorTable(L, "-"+r.Str)
	case Array:
		if r.Nil {
			return lua.LFalse
		}
		t := L.CreateTable(len(r.Elems), 0)
		for i, e := range r.Elems {
			t.RawSetInt(i+1, toLua(L, e))
		}
		return t
	case Map:
		m := L.CreateTable(0, len(r.Elems)/2)
		for i := 0; i+1 < len(r.Elems); i += 2 {
			k := toLua(L, r.Elems[i])
			if k != lua.LNil {
				m.RawSet(k, toLua(L, r.Elems[i+1]))
			}
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("map", m)
		return t
	case Set:
		m := L.CreateTable(0, len(r.Elems))
		for _, e := range r.Elems {
			if k := toLua(L, e); k != lua.LNil {
				m.RawSet(k, lua.LTrue)
			}
		}
		t := L.CreateTable(0, 1)
		t.RawSetString("set", m)
		return t
	case Double:
		t := L.CreateTable(0, 1)
		t.RawSetString("double", lua.LNumber(r.Double))
		return t
	case Bool:
		return lua.LBool(r.Bool)
	case BigNumber:
		t := L.CreateTable(0, 1)
		t.RawSetString("big_number", lua.LString(r.Str))
		return t
	case Verbatim:
		v := L.CreateTable(0, 2)
		v.RawSetString("string", lua.LString(r.Str))
		v.RawSetString("format", lua.LString(r.Format))
		t := L.CreateTable(0, 1)
		t.RawSetString("verbatim_string", v)
		return t
	}
	return lua.LNil
}

// maxDepth bounds the nesting of a script's reply (a table that holds
// itself); Redis stops at its Lua stack limit the same way.
const maxDepth = 1000

// toReplyBounded converts a script's return value by Redis's rules; resp3
// is the script's protocol (redis.setresp). ok is false when the reply
// would take more than maxBytes (a table that holds the same table many
// times expands each time).
func toReplyBounded(L *lua.LState, v lua.LValue, resp3 bool, maxBytes int64) (r Reply, ok bool) {
	c := &replyConv{budget: maxBytes}
	r = c.toReply(L, v, resp3, 0)
	return r, c.budget >= 0
}

type replyConv struct{ budget int64 }

// charge takes n bytes from the budget and reports whether any is left.
func (c *replyConv) charge(n int) bool {
	c.budget -= int64(n)
	return c.budget >= 0
}

func (c *replyConv) toReply(L *lua.LState, v lua.LValue, resp3 bool, depth int) Reply {
	if !c.charge(int(unsafe.Sizeof(Reply{}))) {
		return Reply{Kind: Null}
	}
	if depth > maxDepth {
		return Reply{Kind: Error, Str: "ERR reached lua stack limit"}
	}
	switch v := v.(type) {
	case lua.LString:
		c.charge(len(v))
		return Reply{Kind: Bulk, Str: string(v)}
	case lua.LBool:
		switch {
		case resp3:
			return Reply{Kind: Bool, Bool: bool(v)}
		case bool(v):
			return Reply{Kind: Int, Int: 1}
		}
		return Reply{Kind: Null}
	case lua.LNumber:
		return Reply{Kind: Int, Int: int64(float64(v))}
	case *lua.LTable:
		if s, ok := v.RawGetString("err").(lua.LString); ok {
			return Reply{Kind: Error, Str: sanitize("-" + string(s))[1:]}
		}
		if s, ok := v.RawGetString("ok").(lua.LString); ok {
			return Reply{Kind: Status, Str: mapCRLF(string(s))}
		}
		if d, ok := v.RawGetString("double").(lua.LNumber); ok {
			return Reply{Kind: Double, Double: float64(d)}
		}
		if s, ok := v.RawGetString("big_number").(lua.LString); ok {
			return Reply{Kind: BigNumber, Str: mapCRLF(string(s))}
		}
		if vt, ok := v.RawGetString("verbatim_string").(*lua.LTable); ok {
			f, okf := vt.RawGetString("format").(lua.LString)
			s, oks := vt.RawGetString("string").(lua.LString)
			if okf && oks {
				return Reply{Kind: Verbatim, Format: string(f), Str: string(s)}
			}
		}
		if m, ok := v.RawGetString("map").(*lua.LTable); ok {
			r := Reply{Kind: Map}
			forEach(m, func(k, val lua.LValue) {
				r.Elems = append(r.Elems, c.toReply(L, k, resp3, depth+1), c.toReply(L, val, resp3, depth+1))
			})
			return r
		}
		if s, ok := v.RawGetString("set").(*lua.LTable); ok {
			r := Reply{Kind: Set}
			forEach(s, func(k, _ lua.LValue) {
				r.Elems = append(r.Elems, c.toReply(L, k, resp3, depth+1))
			})
			return r
		}
		r := Reply{Kind: Array, Elems: make([]Reply, 0, min(v.Len(), 64))}
		for i := 1; c.budget >= 0; i++ {
			e := v.RawGetInt(i)
			if e == lua.LNil {
				break
			}
			r.Elems = append(r.Elems, c.toReply(L, e, resp3, depth+1))
		}
		return r
	}
	return Reply{Kind: Null}
}

func mapCRLF(s string) string {
	if !strings.ContainsAny(s, "\r\n") {
		return s
	}
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}

func (st *state) log(L *lua.LState) int {
	n := L.GetTop()
	if n < 2 {
		raise(L, "redis.log() requires two arguments or more.")
	}
	lv, ok := L.Get(1).(lua.LNumber)
	if !ok {
		if s, isStr := L.Get(1).(lua.LString); isStr {
			if f, err := parseLuaNumber(string(s)); err == nil {
				lv, ok = lua.LNumber(f), true
			}
		}
	}
	if !ok {
		raise(L, "First argument must be a number (log level).")
	}
	level := int(lv)
	if level < LogDebug || level > LogWarning {
		raise(L, "Invalid debug level.")
	}
	var b strings.Builder
	for i := 2; i <= n; i++ {
		switch v := L.Get(i).(type) {
		case lua.LString, lua.LNumber:
			if i != 2 {
				b.WriteByte(' ')
			}
			b.WriteString(luaString(v))
		}
	}
	if st.run != nil && st.run.log != nil {
		st.run.log(level, b.String())
	}
	return 0
}

func (st *state) setResp(L *lua.LState) int {
	if st.run == nil {
		raise(L, "redis.setresp can only be called inside a script invocation")
	}
	if L.GetTop() != 1 {
		raise(L, "redis.setresp() requires one argument.")
	}
	n, _ := toNumber(L.Get(1))
	switch int(n) {
	case 2:
		st.run.resp3 = false
	case 3:
		st.run.resp3 = true
	default:
		raise(L, "RESP version must be 2 or 3.")
	}
	return 0
}

func sha1hex(L *lua.LState) int {
	if L.GetTop() != 1 {
		raise(L, "wrong number of arguments")
	}
	var s string
	switch v := L.Get(1).(type) {
	case lua.LString:
		s = string(v)
	case lua.LNumber:
		s = formatNumber(v)
	}
	L.Push(lua.LString(SHA1([]byte(s))))
	return 1
}

func errorReply(L *lua.LState) int {
	s, ok := L.Get(-1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	msg := string(s)
	if !strings.HasPrefix(msg, "-") {
		msg = "-" + msg
	}
	L.Push(errorTable(L, msg))
	return 1
}

func statusReply(L *lua.LState) int {
	s, ok := L.Get(-1).(lua.LString)
	if L.GetTop() != 1 || !ok {
		L.Push(errorTable(L, "wrong number or type of arguments"))
		return 1
	}
	t := L.NewTable()
	t.RawSetString("ok", s)
	L.Push(t)
	return 1
}

func setRepl(L *lua.LState) int {
	if L.GetTop() != 1 {
		raise(L, "redis.set_repl() requires two arguments.")
	}
	n, _ := toNumber(L.Get(1))
	if int(n)&^3 != 0 {
		raise(L, "Invalid replication flags. Use REPL_AOF, REPL_REPLICA, REPL_ALL or REPL_NONE.")
	}
	return 0
}

// toNumber is lua_tonumber: numbers and numeric strings, else 0.
func toNumber(v lua.LValue) (float64, bool) {
	switch v := v.(type) {
	case lua.LNumber:
		return float64(v), true
	case lua.LString:
		f, err := parseLuaNumber(string(v))
		return f, err == nil
	}
	return 0, false
}

func parseLuaNumber(s string) (float64, error) {
	s = strings.TrimSpace(s)
	if h, ok := strings.CutPrefix(strings.ToLower(s), "0x"); ok {
		n, err := strconv.ParseUint(h, 16, 64)
		return float64(n), err
	}
	return strconv.ParseFloat(s, 64)
}

// forEach visits t's pairs in next's order (ForEach ranges over Go maps,
// whose order changes from run to run).
func forEach(t *lua.LTable, fn func(k, v lua.LValue)) {
	k, v := t.Next(lua.LNil)
	for k != lua.LNil {
		fn(k, v)
		k, v = t.Next(k)
	}
}

// fastToLua converts the replies scripts mostly get (an integer, a bulk
// string or nil, a flat array of those) straight from the RESP bytes,
// without the Reply tree toLua walks; ok is false for any other reply,
// which takes that path. Its values are toLua's.
func fastToLua(L *lua.LState, b []byte) (v lua.LValue, ok bool) {
	p := parser{b: b}
	if len(b) == 0 {
		return nil, false
	}
	if b[0] != '*' {
		v, ok = p.fastScalar()
		return v, ok && p.off == len(b)
	}
	p.off++
	l, ok := p.line()
	if !ok {
		return nil, false
	}
	n, ok := smallInt(l)
	if !ok || n < 0 || n > len(b) {
		return nil, false // a nil array, or malformed: the full path
	}
	t := L.CreateTable(n, 0)
	for i := 1; i <= n; i++ {
		e, ok := p.fastScalar()
		if !ok {
			return nil, false
		}
		t.RawSetInt(i, e)
	}
	return t, p.off == len(b)
}

// fastScalar reads an integer or a bulk string as toLua converts them.
func (p *parser) fastScalar() (lua.LValue, bool) {
	if p.off >= len(p.b) {
		return nil, false
	}
	t := p.b[p.off]
	if t != ':' && t != '$' {
		return nil, false
	}
	p.off++
	l, ok := p.line()
	if !ok {
		return nil, false
	}
	if t == ':' {
		n, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(l), len(l)), 10, 64)
		return lua.LNumber(n), err == nil
	}
	if len(l) == 2 && l[0] == '-' && l[1] == '1' {
		return lua.LFalse, true
	}
	n, ok := smallInt(l)
	if !ok {
		return nil, false
	}
	s, ok := p.blob(int64(n))
	if !ok {
		return nil, false
	}
	return lua.LString(s), true
}

// smallInt reads a non-negative length of at most 9 digits.
func smallInt(l []byte) (int, bool) {
	if len(l) == 0 || len(l) > 9 {
		return 0, false
	}
	n := 0
	for _, c := range l {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int(c-'0')
	}
	return n, true
}
