package clienttest

import (
	"strings"
	"syscall"
	"testing"
	"time"
)

// A script can never reach past its own run (issue 30): a table of hostile
// scripts, each followed by a canary script on another connection that
// must find the world intact; built-ins that could run without end stop
// at SCRIPT KILL and at SIGTERM; a script past --script-memory-limit ends
// with "not enough memory" and the server keeps serving.

// luaCanary checks, from a fresh run, everything the hostile scripts try
// to break; it answers "intact".
const luaCanary = `
redis.call('set', KEYS[1], 'v')
assert(redis.call('get', KEYS[1]) == 'v', 'redis.call')
assert(string.upper('abc') == 'ABC' and ('abc'):upper() == 'ABC', 'string methods')
assert(getmetatable('').__index == string, 'string metatable')
assert(string.find('a.b', '.', 1, true) == 2 and string.format('%d', 3) == '3', 'string library')
assert(type(cjson.encode) == 'function' and cjson.encode({{1}}) == '[[1]]', 'cjson')
assert(type(cmsgpack.pack) == 'function' and type(bit.band) == 'function' and type(struct.pack) == 'function', 'libraries')
assert(type(math.random) == 'function' and type(table.concat) == 'function' and type(unpack) == 'function', 'base')
assert(_G.redis == redis and rawget(_G, 'x') == nil and rawget(_G, 'hijack') == nil, 'globals')
assert(not pcall(function() return _G[1] end) and redis[1] == nil and getmetatable('')[1] == nil, 'nothing inserted')
assert(not pcall(function() return _G.source end) and redis.source == nil and redis.line == nil, 'nothing written by an error')
assert(KEYS[1] ~= nil and #ARGV == 0, 'KEYS and ARGV')
local ok, err = pcall(function() return undefined_global end)
assert(not ok and string.find(err, 'nonexistent global variable', 1, true), 'undefined globals are errors')
ok, err = pcall(function() newglobal = 1 end)
assert(not ok and string.find(err, 'readonly table', 1, true), 'globals are read-only')
assert(type(getmetatable(_G).__index) == 'function', 'the globals metatable')
assert(getmetatable(redis) == nil and getmetatable(cjson) == nil, 'library metatables')
return 'intact'
`

type luaProbe struct {
	name string
	src  string
	// want, when set, is a text rlserver's reply must contain; when empty
	// the reply is compared with redis-server's (a Lua VM error's message,
	// gopher-lua's own, left out).
	want string
}

var luaProbes = []luaProbe{
	{name: "redis metatable", src: "getmetatable(redis).__index.call = function() return 'hijacked' end"},
	{name: "globals __index", src: "getmetatable(_G).__index = {}"},
	{name: "globals __index rawset", src: "rawset(getmetatable(_G), '__index', {})"},
	{name: "globals __newindex", src: "getmetatable(_G).__newindex = function() end"},
	{name: "globals setmetatable", src: "setmetatable(_G, nil)"},
	{name: "string metatable", src: "getmetatable('').__index = {}"},
	{name: "string metatable rawset", src: "rawset(getmetatable(''), '__index', {})"},
	{name: "string method", src: "getmetatable('').__index.upper = nil"},
	{name: "string library", src: "string.upper = function() return 'hijacked' end"},
	{name: "string library rawset", src: "rawset(string, 'upper', nil)"},
	{name: "redis rawset", src: "rawset(redis, 'call', function() return 'hijacked' end)"},
	{name: "redis setmetatable", src: "setmetatable(redis, {__index = function() return 'hijacked' end})"},
	{name: "cjson", src: "cjson.encode = nil"},
	{name: "math", src: "math.random = function() return 4 end"},
	{name: "table", src: "table.concat = nil"},
	{name: "global", src: "hijack = 1"},
	{name: "global rawset", src: "rawset(_G, 'hijack', 1)"},
	{name: "_G", src: "_G.redis = nil"},
	{name: "_G replaced", src: "_G = {}"},
	{name: "KEYS", src: "KEYS = nil"},
	{name: "getfenv", src: "return getfenv(0)"},
	{name: "setfenv", src: "setfenv(1, {})"},
	{name: "newproxy", src: "return newproxy(true)"},
	{name: "debug", src: "return debug.getregistry()"},
	{name: "loadstring global", src: "loadstring('hijack = 1')()"},
	{name: "loadstring globals", src: "local f = loadstring('return _G') return f() == _G"},
	{name: "load reader", src: "local done = false local f = load(function() if done then return nil end done = true return 'string.upper = nil' end) return f()"},
	{name: "coroutine", src: "local co = coroutine.create(function() string.upper = nil end) local ok, err = coroutine.resume(co) return {tostring(ok), tostring(string.find(err, 'readonly', 1, true) ~= nil)}"},
	{name: "pcall", src: "local ok = pcall(function() getmetatable('').__index = {} end) return tostring(ok)"},
	{name: "table.insert globals", src: "table.insert(_G, 'planted')"},
	{name: "table.insert globals at", src: "table.insert(_G, 1, 'planted')"},
	{name: "table.insert redis", src: "table.insert(redis, function() return 'hijacked' end)"},
	{name: "table.insert string metatable", src: "table.insert(getmetatable(''), 1)"},
	{name: "table.remove globals", src: "return table.remove(_G)"},
	{name: "table.sort globals", src: "table.sort(_G) return 1"},
	{name: "table.setn", src: "table.setn(_G, 3)"},
	{name: "table.insert arguments", src: "table.insert({}, 1, 2, 3)"},
	{name: "error globals", src: "error(_G)"},
	{name: "error redis", src: "error(redis)"},
	{name: "error redis from a named chunk", src: "loadstring('error(redis)', '=hijacked')()"},
	{name: "pcall error redis", src: "local ok, e = pcall(error, redis) return {tostring(ok), type(e), tostring(rawget(redis, 'source'))}"},
	{name: "rawget hidden", src: "return {tostring(rawget(redis, 'call') ~= nil), tostring(rawget(_G, 'redis') ~= nil), tostring(rawget(string, 'upper') ~= nil)}"},
	{name: "string.dump", src: "return type(string.dump)"},
	{name: "cjson settings", src: "cjson.encode_max_depth(1) return 1", want: ":1"},
	{name: "unpack range", src: "return {unpack({1, 2, 3}, -2, 2147483647)}"},
	{name: "unpack at the bound", src: "local t = {} for i = 1, 7999 do t[i] = i end return select('#', unpack(t))"},
	{name: "unpack past the bound", src: "local t = {} for i = 1, 8000 do t[i] = i end return select('#', unpack(t))"},
	{name: "string.byte past the bound", src: "return select('#', string.byte(string.rep('x', 10000), 1, -1))"},
	{name: "format width", src: "return string.format('%100d', 1)"},
	{name: "bit.tohex", src: "return bit.tohex(65535, -2147483648)"},
	{name: "randomseed string", src: "math.randomseed('10') return math.random(100)"},
	{name: "encode_keep_buffer", src: "return cjson.encode_keep_buffer(1)"},
	{name: "error table", src: "error({})", want: "ERR unknown error script: "},
	{name: "string.rep huge", src: "return #string.rep('x', 2^40)", want: "not enough memory"},
	{name: "recursion", src: "local function f() return 1 + f() end return f()", want: "stack overflow"},
}

func TestLuaSandboxHostile(t *testing.T) {
	redisAddr := realRedis(t)
	s := start(t, opts{args: []string{"--script-memory-limit", "64mb"}})
	both := openBoth(t, 2, 1, redisAddr, s.addr)
	canary := s.raw(t)
	checkCanary := func(after string) {
		t.Helper()
		for range 2 {
			canary.send(respCommand("EVAL", luaCanary, "1", "canary"))
			if v := canary.read(); v.kind != '$' || v.str != "intact" {
				t.Fatalf("after %s, a script on another connection finds: %v", after, v)
			}
		}
	}
	checkCanary("nothing")
	for _, p := range luaProbes {
		if p.want != "" {
			rl := both.rl[0]
			rl.send(respCommand("EVAL", p.src, "0"))
			if v := rl.read(); !strings.Contains(v.String(), p.want) {
				t.Errorf("%s: %s\n\trlserver: %v\n\twant a reply with %q", p.name, p.src, v, p.want)
			}
		} else {
			want, got := both.run(0, []string{"EVAL", p.src, "0"})
			if !sameLuaReply(want[0], got[0]) {
				t.Errorf("%s: %s\n\tredis-server: %v\n\trlserver:     %v", p.name, p.src, want[0], got[0])
			}
		}
		checkCanary(p.name)
	}
}

// sameLuaReply compares two replies, leaving out the message of an error
// raised by the Lua VM itself (gopher-lua words its own): the code, the
// position and the script's location must match.
func sameLuaReply(want, got value) bool {
	if want.String() == got.String() {
		return true
	}
	shape := func(v value) string {
		s := v.String()
		i := strings.Index(s, "user_script:1: ")
		j := strings.LastIndex(s, " script: ")
		if v.kind != '-' || i < 0 || j < i {
			return s
		}
		return s[:i] + "..." + s[j:]
	}
	return shape(want) == shape(got)
}

// luaLongRunners are built-ins (and Lua around them) that run for seconds
// or more; each must stop at SCRIPT KILL.
var luaLongRunners = []struct{ name, src string }{
	{"exponential pattern", "return string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')"},
	{"gsub pattern", "return string.gsub(string.rep('a', 40), string.rep('a*', 40) .. 'b', 'x')"},
	{"sort", "local t = {} for i = 1, 3000000 do t[i] = (i * 7919) % 1000003 end table.sort(t, function(a, b) return a < b end) return 1"},
	{"cjson of a shared table", "local a = {} for i = 1, 40 do a = {a, a} end return #cjson.encode(a)"},
	{"cmsgpack of a shared table", "local a = {} for i = 1, 15 do a = {a, a, a, a} end return #cmsgpack.pack(a)"},
	{"pcall around a loop", "while true do pcall(function() while true do end end) end"},
	{"xpcall around a loop", "while true do xpcall(function() while true do end end, function(e) return e end) end"},
	{"coroutine", "local f = coroutine.wrap(function() while true do end end) f()"},
}

func TestLuaKillStopsBuiltins(t *testing.T) {
	s := start(t, opts{args: []string{"--script-memory-limit", "1gb"}})
	ctl := s.raw(t)
	for _, r := range luaLongRunners {
		t.Run(r.name, func(t *testing.T) {
			a := s.raw(t)
			a.send(respCommand("EVAL", r.src, "0"))
			time.Sleep(300 * time.Millisecond) // into the long part
			if v := killWhenRunning(t, ctl); v.kind != '+' || v.str != "OK" {
				t.Fatalf("SCRIPT KILL: %v", v)
			}
			began := time.Now()
			if v := a.read(); v.kind != '-' || !strings.HasPrefix(v.str, luaKilledText) {
				t.Fatalf("the killed EVAL answers %v", v)
			}
			t.Logf("stopped %v after SCRIPT KILL", time.Since(began).Round(time.Millisecond))
			a.do(respCommand("PING"), "+PONG\r\n")
		})
	}
}

// TestLuaSIGTERMStopsBuiltins sends SIGTERM while a script is inside each
// long built-in: the server must end the script and exit 0.
func TestLuaSIGTERMStopsBuiltins(t *testing.T) {
	for _, r := range luaLongRunners {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			s := start(t, opts{args: []string{"--script-memory-limit", "1gb"}})
			a := s.raw(t)
			a.send(respCommand("EVAL", r.src, "0"))
			ctl := s.raw(t)
			// The script is running once SCRIPT KILL stops answering
			// NOTBUSY; the answer is left to the signal below (a second
			// script).
			for {
				ctl.send(respCommand("SCRIPT", "KILL"))
				if v := ctl.read(); v.kind == '+' {
					break
				}
				time.Sleep(5 * time.Millisecond)
			}
			b := s.raw(t)
			b.send(respCommand("EVAL", r.src, "0"))
			time.Sleep(300 * time.Millisecond) // into the long part
			began := time.Now()
			s.signal(syscall.SIGTERM)
			code, err := s.wait(20 * time.Second)
			if err != nil {
				t.Fatalf("SIGTERM with a script in a long built-in: %v", err)
			}
			if code != 0 {
				t.Fatalf("exit status %d after SIGTERM\n%s", code, s.stderr)
			}
			t.Logf("exited %v after SIGTERM", time.Since(began).Round(time.Millisecond))
		})
	}
}

func TestLuaMemoryLimit(t *testing.T) {
	s := start(t, opts{args: []string{"--script-memory-limit", "64mb"}})
	c := s.raw(t)
	c.do(respCommand("CONFIG", "GET", "script-memory-limit"), "*2\r\n$19\r\nscript-memory-limit\r\n$8\r\n67108864\r\n")
	for _, src := range []string{
		"local s = 'x' for i = 1, 40 do s = s .. s end return #s",                                          // the interpreter's own concatenation
		"local t = {} local s = string.rep('x', 1048576) for i = 1, 100000 do t[i] = s .. i end return #t", // a table that grows
		"return #string.rep('x', 65 * 1048576)",                                                            // one built-in's value
		"local t = {} for i = 1, 70 do t[i] = string.rep('y', 1048576) end return #table.concat(t)",        // table.concat
		"local a = {} for i = 1, 30 do a = {a, a} end return a",                                            // the reply
	} {
		began := time.Now()
		c.send(respCommand("EVAL", src, "0"))
		// Filling 64 MB takes 1-3 s on a loaded machine, five to ten
		// times that under the race detector.
		v := c.readWithin(90 * time.Second)
		t.Logf("%.40s...: %v", src, time.Since(began).Round(time.Millisecond))
		if v.kind != '-' || !strings.HasPrefix(v.str, "ERR Error running script ") || !strings.HasSuffix(v.str, ", not enough memory") {
			t.Errorf("%s\n\tanswers %v, want ERR Error running script <sha>, not enough memory", src, v)
		}
		c.do(respCommand("PING"), "+PONG\r\n")
	}
	// A value of a quarter of the limit is the largest a built-in makes.
	c.do(respCommand("EVAL", "return #string.rep('x', 16 * 1048576)", "0"), ":16777216\r\n")
	c.send(respCommand("EVAL", "return #string.rep('x', 16 * 1048576 + 1)", "0"))
	if v := c.read(); v.kind != '-' || !strings.HasSuffix(v.str, ", not enough memory") {
		t.Errorf("one byte past a quarter of the limit: %v", v)
	}
	c.do(respCommand("CONFIG", "SET", "script-memory-limit", "0"), "+OK\r\n")
	c.do(respCommand("EVAL", "return #string.rep('x', 65 * 1048576)", "0"), ":68157440\r\n")
}
