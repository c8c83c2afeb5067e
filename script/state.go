package script

import (
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// state is one interpreter with Redis's sandbox: it runs one script at a
// time and goes back to the engine's pool after.
type state struct {
	L       *lua.LState
	globals *lua.LTable // the real global table, behind a read-only proxy
	handler *lua.LFunction
	run     *run
	cjson   *cjsonLib
	// nesting counts the calls in progress that nest one run of the
	// interpreter in another (pcall, xpcall, coroutine.resume and a
	// coroutine.wrap function), across coroutines.
	nesting int
	// globalsProxy is what scripts see as _G; globalsMeta and stringMeta
	// are the read-only views getmetatable gives of the globals' and the
	// strings' metatables.
	globalsProxy, globalsMeta, stringMeta *lua.LTable
	// protected maps every read-only proxy to the table it shows, and
	// each such table to itself.
	protected map[*lua.LTable]*lua.LTable
}

// The globals Redis 7.0.15 leaves a script (script_lua.c's allow lists,
// less getfenv, setfenv and newproxy, which 7.0.15 removed), besides the
// libraries this package builds itself.
var baseAllowed = []string{
	"xpcall", "tostring", "setmetatable", "next", "assert",
	"tonumber", "rawequal", "collectgarbage", "getmetatable", "rawset",
	"pcall", "coroutine", "type", "select", "unpack", "gcinfo", "pairs",
	"rawget", "loadstring", "ipairs", "_VERSION", "load", "error",
	"math",
}

func (e *Engine) newState() *state {
	L := lua.NewState(lua.Options{
		SkipOpenLibs:        true,
		CallStackSize:       2000,
		MinimizeStackMemory: true,
		RegistrySize:        1024,
		RegistryMaxSize:     1024 * 1024,
	})
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{"", lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
		{lua.StringLibName, lua.OpenString},
		{lua.MathLibName, lua.OpenMath},
		{lua.CoroutineLibName, lua.OpenCoroutine},
	} {
		L.Push(L.NewFunction(lib.open))
		L.Push(lua.LString(lib.name))
		L.Call(1, 0)
	}
	st := &state{L: L, protected: map[*lua.LTable]*lua.LTable{}}
	g := L.NewTable()
	for _, name := range baseAllowed {
		g.RawSetString(name, L.GetGlobal(name))
	}
	g.RawSetString("string", openString(L, &e.lim, L.GetGlobal("string").(*lua.LTable)))
	g.RawSetString("table", openTable(L, &e.lim, L.GetGlobal("table").(*lua.LTable), func(t *lua.LTable) bool { return st.protected[t] != nil }))
	coroutine := L.NewTable()
	L.GetGlobal("coroutine").(*lua.LTable).ForEach(func(k, v lua.LValue) { coroutine.RawSet(k, v) })
	resume := coroutine.RawGetString("resume").(*lua.LFunction)
	coroutine.RawSetString("resume", L.NewFunction(st.nested(func(L *lua.LState) int { return callThrough(L, resume) })))
	wrap := coroutine.RawGetString("wrap").(*lua.LFunction)
	coroutine.RawSetString("wrap", L.NewFunction(func(L *lua.LState) int {
		callThrough(L, wrap)
		inner := L.Get(-1).(*lua.LFunction)
		L.Push(L.NewFunction(st.nested(func(L *lua.LState) int { return callThrough(L, inner) })))
		return 1
	}))
	g.RawSetString("coroutine", coroutine)
	g.RawSetString("tostring", L.NewFunction(luaToString))
	g.RawSetString("tonumber", L.NewFunction(luaToNumber))
	g.RawSetString("error", L.NewFunction(luaErrorFn))
	g.RawSetString("pcall", L.NewFunction(st.nested(luaPcall)))
	g.RawSetString("xpcall", L.NewFunction(st.nested(luaXpcall)))
	g.RawSetString("unpack", L.NewFunction(luaUnpack))
	g.RawSetString("loadstring", L.NewFunction(luaLoadString))
	g.RawSetString("load", L.NewFunction(luaLoad))
	g.RawSetString("collectgarbage", L.NewFunction(luaCollectGarbage))
	g.RawSetString("gcinfo", L.NewFunction(func(L *lua.LState) int { L.Push(lua.LNumber(0)); return 1 }))
	g.RawSetString("pairs", L.NewFunction(st.luaPairs))
	g.RawSetString("next", L.NewFunction(st.luaNext))
	g.RawSetString("rawget", L.NewFunction(st.luaRawGet))
	g.RawSetString("rawset", L.NewFunction(st.luaRawSet))
	g.RawSetString("setmetatable", L.NewFunction(st.luaSetMetatable))
	g.RawSetString("getmetatable", L.NewFunction(st.luaGetMetatable))

	math := L.NewTable()
	g.RawGetString("math").(*lua.LTable).ForEach(func(k, v lua.LValue) { math.RawSet(k, v) })
	math.RawSetString("random", L.NewFunction(e.luaRandom))
	math.RawSetString("randomseed", L.NewFunction(e.luaRandomSeed))
	g.RawSetString("math", math)

	g.RawSetString("redis", st.redisLib())
	st.cjson = newCjson(L, &e.lim)
	g.RawSetString("cjson", st.cjson.table(L))
	g.RawSetString("bit", openBit(L))
	g.RawSetString("struct", openStruct(L))
	g.RawSetString("cmsgpack", openCmsgpack(L, &e.lim))

	// Every library table is read-only: scripts see a proxy that reads
	// through to it and refuses writes.
	for _, name := range []string{"string", "math", "table", "coroutine", "redis", "cjson", "bit", "struct", "cmsgpack"} {
		g.RawSetString(name, st.protect(g.RawGetString(name).(*lua.LTable)))
	}
	// Strings index the string library through a metatable of their own,
	// read-only like the library (gopher-lua makes the library itself
	// the metatable, so a script could change every string's methods).
	smt := L.NewTable()
	smt.RawSetString("__index", g.RawGetString("string"))
	L.SetMetatable(lua.LString(""), smt)
	st.stringMeta = st.protect(smt)

	g.RawSetString("__redis__err__handler", L.NewFunction(func(L *lua.LState) int { L.SetTop(1); return 1 }))
	proxy := st.protect(g)
	st.globalsProxy = proxy
	g.RawSetString("_G", proxy)
	// Reading a global that does not exist is an error.
	gmt := L.NewTable()
	gmt.RawSetString("__index", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Script attempted to access nonexistent global variable '%s'", luaString(L.Get(2)))
		return 0
	}))
	L.SetMetatable(g, gmt)
	st.globalsMeta = st.protect(gmt)

	// Nothing else of the interpreter's own globals stays reachable: the
	// functions made above keep them as their environment (getfenv is
	// gone, and so is every other way to read a function's environment).
	L.Env = proxy
	L.G.Global = proxy
	st.globals = g
	st.handler = L.NewFunction(st.errHandler)
	return st
}

// protect returns a read-only proxy of t.
func (st *state) protect(t *lua.LTable) *lua.LTable {
	L := st.L
	p := L.NewTable()
	mt := L.NewTable()
	mt.RawSetString("__index", t)
	mt.RawSetString("__newindex", L.NewFunction(func(L *lua.LState) int {
		L.RaiseError("Attempt to modify a readonly table")
		return 0
	}))
	L.SetMetatable(p, mt)
	st.protected[p] = t
	st.protected[t] = t
	return p
}

// through is the table a proxy shows, or t itself.
func (st *state) through(t *lua.LTable) *lua.LTable {
	if r := st.protected[t]; r != nil {
		return r
	}
	return t
}

func (st *state) luaPairs(L *lua.LState) int {
	t := L.CheckTable(1)
	if mt, ok := L.GetMetaField(t, "__pairs").(*lua.LFunction); ok && st.protected[t] == nil {
		L.Push(mt)
		L.Push(t)
		L.Call(1, 3)
		return 3
	}
	L.Push(L.NewFunction(st.luaNext))
	L.Push(st.through(t))
	L.Push(lua.LNil)
	return 3
}

func (st *state) luaNext(L *lua.LState) int {
	t := st.through(L.CheckTable(1))
	k, v := t.Next(L.Get(2))
	if k == lua.LNil {
		L.Push(lua.LNil)
		return 1
	}
	L.Push(k)
	L.Push(v)
	return 2
}

func (st *state) luaRawGet(L *lua.LState) int {
	t := st.through(L.CheckTable(1))
	L.Push(t.RawGet(L.CheckAny(2)))
	return 1
}

func (st *state) luaRawSet(L *lua.LState) int {
	t := L.CheckTable(1)
	if st.protected[t] != nil {
		L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
	t.RawSet(L.CheckAny(2), L.CheckAny(3))
	L.Push(t)
	return 1
}

// luaGetMetatable is getmetatable that never hands out a metatable the
// sandbox depends on: the globals' and the strings' come as read-only
// views, a library table has none (as in Redis, where they are plain
// read-only tables), and a script's own tables answer as in Lua 5.1
// (__metatable first).
func (st *state) luaGetMetatable(L *lua.LState) int {
	v := L.CheckAny(1)
	switch v := v.(type) {
	case lua.LString:
		L.Push(st.stringMeta)
		return 1
	case *lua.LTable:
		if v == st.globalsProxy || v == st.globals {
			L.Push(st.globalsMeta)
			return 1
		}
		if st.protected[v] != nil {
			L.Push(lua.LNil)
			return 1
		}
	}
	L.Push(L.GetMetatable(v))
	return 1
}

func (st *state) luaSetMetatable(L *lua.LState) int {
	t := L.CheckTable(1)
	if st.protected[t] != nil {
		L.Error(lua.LString("Attempt to modify a readonly table"), 0)
	}
	mt := L.Get(2)
	if _, ok := mt.(*lua.LTable); !ok && mt != lua.LNil {
		L.ArgError(2, "nil or table expected")
	}
	if L.GetMetaField(t, "__metatable") != lua.LNil {
		L.RaiseError("cannot change a protected metatable")
	}
	L.SetMetatable(t, mt)
	L.SetTop(1)
	return 1
}

// errHandler is Redis's __redis__err__handler: it turns the error into a
// table {err=, source=, line=} naming the script line that raised it (the
// caller's line when a Go function raised it).
func (st *state) errHandler(L *lua.LState) int {
	obj := L.Get(1)
	if obj == lua.LString(errMemory.Error()) {
		// Lua 5.1 calls no handler for a memory error: the script's
		// error is the bare text.
		L.Push(obj)
		return 1
	}
	dbg, ok := L.GetStack(1)
	if ok {
		if _, err := L.GetInfo("S", dbg, lua.LNil); err != nil || dbg.What == "G" {
			dbg, ok = L.GetStack(2)
		}
	}
	t, isTable := obj.(*lua.LTable)
	if isTable && st.protected[t] != nil {
		// Redis's handler writes source and line into the thrown table;
		// into a read-only one that raises, and Lua hands that error to
		// the handler again, which names its own line. Nothing is
		// written into the table.
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR err_handler_def:10: Attempt to modify a readonly table"))
		t.RawSetString("source", lua.LString("@err_handler_def"))
		t.RawSetString("line", lua.LNumber(10))
		L.Push(t)
		return 1
	}
	if !isTable {
		t = L.NewTable()
		t.RawSetString("err", lua.LString("ERR "+luaToStringValue(L, obj)))
	}
	if ok {
		if _, err := L.GetInfo("Sl", dbg, lua.LNil); err == nil && dbg.What != "G" {
			src := dbg.Source
			if src == "user_script" {
				src = "@user_script"
			} else if e, ok := t.RawGetString("err").(lua.LString); ok && !isTable {
				// gopher-lua prefixes a position with the chunk's raw name;
				// Lua 5.1 shows it as luaO_chunkid does.
				if rest, ok := strings.CutPrefix(string(e), "ERR "+src+":"); ok {
					t.RawSetString("err", lua.LString("ERR "+chunkID(src)+":"+rest))
				}
			}
			t.RawSetString("source", lua.LString(src))
			t.RawSetString("line", lua.LNumber(dbg.CurrentLine))
		}
	}
	L.Push(t)
	return 1
}

// chunkID is luaO_chunkid: how Lua 5.1 names a chunk in a runtime
// error: "=name" and "@file" as name and file, a source string as
// [string "its first line"], cut to fit LUA_IDSIZE (60).
func chunkID(source string) string { return chunkIDSize(source, 60) }

// compileChunkID is how the compiler names a chunk (MAXSRC, 80).
func compileChunkID(source string) string { return chunkIDSize(source, 80) }

func chunkIDSize(source string, size int) string {
	if rest, ok := strings.CutPrefix(source, "="); ok {
		return rest
	}
	if rest, ok := strings.CutPrefix(source, "@"); ok {
		return rest
	}
	max := size - len(" [string \"...\"] ") - 1
	n := strings.IndexAny(source, "\n\r")
	if n < 0 {
		n = len(source)
	}
	if n > max {
		n = max
	}
	if n < len(source) {
		return "[string \"" + source[:n] + "...\"]"
	}
	return "[string \"" + source + "\"]"
}

// luaToString is Lua 5.1's tostring: numbers as "%.14g".
func luaToString(L *lua.LState) int {
	L.Push(lua.LString(luaToStringValue(L, L.CheckAny(1))))
	return 1
}

func luaToStringValue(L *lua.LState, v lua.LValue) string {
	if n, ok := v.(lua.LNumber); ok {
		return formatNumber(n)
	}
	return L.ToStringMeta(v).String()
}

// formatNumber is Lua 5.1's number format, "%.14g".
func formatNumber(n lua.LNumber) string { return formatG(float64(n), 14) }

// luaString is a string or number argument as Lua's tostring shows it.
func luaString(v lua.LValue) string {
	switch v := v.(type) {
	case lua.LNumber:
		return formatNumber(v)
	case lua.LString:
		return string(v)
	}
	return v.String()
}

// luaErrorFn is Lua 5.1's error: a string or number message gets the
// position of the level's function.
func luaErrorFn(L *lua.LState) int {
	obj := L.Get(1)
	level := L.OptInt(2, 1)
	if n, ok := obj.(lua.LNumber); ok {
		obj = lua.LString(formatNumber(n))
	}
	L.Error(obj, level)
	return 0
}

// luaPcall is Redis 7's pcall: an error that is a table with an err field
// (what redis.call raises) is returned as its err string.
func luaPcall(L *lua.LState) int {
	n := L.GetTop()
	if n == 0 {
		L.ArgError(1, "value expected")
	}
	err := L.PCall(n-1, lua.MultRet, nil)
	if err != nil {
		checkContext(L) // a killed script's error is not for pcall to catch
		var obj lua.LValue = lua.LString(err.Error())
		if ae, ok := err.(*lua.ApiError); ok {
			obj = ae.Object
		}
		if t, ok := obj.(*lua.LTable); ok {
			switch e := t.RawGetString("err").(type) {
			case lua.LString:
				obj = e
			case lua.LNumber:
				obj = lua.LString(formatNumber(e))
			}
		}
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// maxNesting is LUAI_MAXCCALLS: how deep pcall, xpcall and coroutines
// may nest. Each level is a Go call, a new coroutine a new interpreter
// stack, and an error in a deep chain walks every level: unbounded, a
// script recursing through them ran for minutes after SCRIPT KILL.
const maxNesting = 200

// nested counts fn's calls in st.nesting and refuses one past
// maxNesting with Lua 5.1's "C stack overflow".
func (st *state) nested(fn lua.LGFunction) lua.LGFunction {
	return func(L *lua.LState) int {
		if st.nesting >= maxNesting {
			L.RaiseError("C stack overflow")
		}
		st.nesting++
		defer func() { st.nesting-- }()
		return fn(L)
	}
}

// callThrough calls fn with this call's arguments and returns all its
// results.
func callThrough(L *lua.LState, fn *lua.LFunction) int {
	top := L.GetTop()
	L.Push(fn)
	for i := 1; i <= top; i++ {
		L.Push(L.Get(i))
	}
	L.Call(top, lua.MultRet)
	return L.GetTop() - top
}

// luaXpcall is xpcall that lets a killed script's error through.
func luaXpcall(L *lua.LState) int {
	fn := L.CheckFunction(1)
	handler := L.CheckFunction(2)
	L.SetTop(0)
	L.Push(fn)
	if err := L.PCall(0, lua.MultRet, handler); err != nil {
		checkContext(L)
		var obj lua.LValue = lua.LString(err.Error())
		if ae, ok := err.(*lua.ApiError); ok {
			obj = ae.Object
		}
		L.SetTop(0)
		L.Push(lua.LFalse)
		L.Push(obj)
		return 2
	}
	L.Insert(lua.LTrue, 1)
	return L.GetTop()
}

// luaCollectGarbage answers without collecting: a script must not stop
// the whole process for a GC.
func luaCollectGarbage(L *lua.LState) int {
	switch L.OptString(1, "collect") {
	case "count", "step":
		L.Push(lua.LNumber(0))
	default:
		L.Push(lua.LNumber(0))
	}
	return 1
}

func stringArray(L *lua.LState, items [][]byte) *lua.LTable {
	t := L.CreateTable(len(items), 0)
	for _, b := range items {
		t.Append(lua.LString(b))
	}
	return t
}

func itoa(n int) string { return strconv.Itoa(n) }

// lrand48 is Redis's rand.c: the generator behind math.random, the same
// sequence on every platform.
type lrand48 struct{ x [3]uint32 }

func (r *lrand48) seed(v int32) {
	r.x = [3]uint32{0x330E, uint32(v) & 0xffff, (uint32(v) >> 16) & 0xffff}
}

func (r *lrand48) next() int32 {
	const a0, a1, a2, c = 0xE66D, 0xDEEC, 0x5, 0xB
	// The 48-bit x = a*x + c (mod 2^48), as rand.c computes it in 16-bit
	// pieces.
	x := uint64(r.x[0]) | uint64(r.x[1])<<16 | uint64(r.x[2])<<32
	a := uint64(a0) | uint64(a1)<<16 | uint64(a2)<<32
	x = (a*x + c) & (1<<48 - 1)
	r.x = [3]uint32{uint32(x & 0xffff), uint32(x>>16) & 0xffff, uint32(x>>32) & 0xffff}
	return int32(r.x[2])<<15 + int32(r.x[1]>>1)
}

const lrand48Max = 1<<31 - 1 // REDIS_LRAND48_MAX, INT32_MAX

func (e *Engine) luaRandom(L *lua.LState) int {
	e.randMu.Lock()
	v := e.rand.next()
	e.randMu.Unlock()
	r := float64(int64(v)%lrand48Max) / float64(lrand48Max)
	switch L.GetTop() {
	case 0:
		L.Push(lua.LNumber(r))
	case 1:
		u := L.CheckInt(1)
		if u < 1 {
			L.ArgError(1, "interval is empty")
		}
		L.Push(lua.LNumber(floor(r*float64(u)) + 1))
	case 2:
		l, u := L.CheckInt(1), L.CheckInt(2)
		if l > u {
			L.ArgError(2, "interval is empty")
		}
		L.Push(lua.LNumber(floor(r*float64(u-l+1)) + float64(l)))
	default:
		L.RaiseError("wrong number of arguments")
	}
	return 1
}

func (e *Engine) luaRandomSeed(L *lua.LState) int {
	v := int32(checkInteger(L, 1, "randomseed")) // luaL_checkint: a numeric string converts
	e.randMu.Lock()
	e.rand.seed(v)
	e.randMu.Unlock()
	return 0
}

func floor(f float64) float64 {
	i := float64(int64(f))
	if i > f {
		i--
	}
	return i
}
