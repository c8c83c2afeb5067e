package script_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/testport"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/script"
)

// redisConn is a raw RESP connection to a real redis-server.
type redisConn struct {
	t  testing.TB
	c  net.Conn
	rd *bufio.Reader
}

// startRedis starts redis-server on a free port in a temp dir; it skips
// the test when there is none and CI is unset.
func startRedis(t testing.TB) string {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("redis-server not found and CI is set: %v", err)
		}
		t.Skip("redis-server not installed")
	}
	dir := t.TempDir()
	port := testport.Free(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	for i := 0; ; i++ {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			c.Close()
			return addr
		}
		if i > 200 {
			t.Fatalf("redis-server did not start: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func dialRedis(t testing.TB, addr string) *redisConn {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &redisConn{t: t, c: c, rd: bufio.NewReader(c)}
}

// do sends one command and returns its raw reply bytes.
func (r *redisConn) do(args ...string) []byte {
	r.t.Helper()
	var b []byte
	b = fmt.Appendf(b, "*%d\r\n", len(args))
	for _, a := range args {
		b = fmt.Appendf(b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := r.c.Write(b); err != nil {
		r.t.Fatal(err)
	}
	r.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var out []byte
	for {
		line, err := r.rd.ReadBytes('\n')
		if err != nil {
			r.t.Fatalf("read: %v (so far %q)", err, out)
		}
		out = append(out, line...)
		if _, n, err := script.ParseReply(out); err == nil && n == len(out) {
			return out
		}
	}
}

// kvCaller runs a script's commands on a real engine through package kv.
type kvCaller struct {
	t   testing.TB
	e   *engine.Engine
	now int64
	run *script.Running
}

func (k *kvCaller) Call(args [][]byte, resp3 bool) []byte {
	spec, ok := kv.Lookup(args[0])
	if !ok {
		return []byte("-" + script.ErrUnknownCommand + "\r\n")
	}
	if !spec.ArityOK(len(args)) {
		return []byte("-" + script.ErrWrongArgs + "\r\n")
	}
	if spec.Write() && k.run != nil {
		k.run.MarkWritten()
	}
	own := make([][]byte, len(args))
	for i, a := range args {
		own[i] = append([]byte(nil), a...)
	}
	c := kv.New(spec, own, resp3)
	res := make([]engine.Result, 1)
	if err := k.e.Do(context.Background(), k.now, []engine.Request{c.Request()}, res); err != nil {
		k.t.Fatalf("%q: %v", args, err)
	}
	if res[0].Err != nil {
		k.t.Fatalf("%q: %v", args, res[0].Err)
	}
	return []byte(res[0].Reply)
}

// evalBoth runs src with keys/args by EVAL on Redis and by the package on
// the engine; it returns both replies in the client protocol.
type side struct {
	t      *testing.T
	redis  *redisConn
	eng    *script.Engine
	caller *kvCaller
	resp3  bool
}

func newSide(t *testing.T, addr string) *side {
	return &side{
		t:      t,
		redis:  dialRedis(t, addr),
		eng:    script.New(),
		caller: &kvCaller{t: t, e: engine.New(2), now: time.Now().UnixNano()},
	}
}

func (s *side) ours(src string, keys, args []string) []byte {
	r, err := s.eng.Eval(context.Background(), []byte(src), bs(keys), bs(args), s.caller, nil)
	if err != nil {
		return []byte("-" + err.Error() + "\r\n")
	}
	return r.Append(nil, s.resp3)
}

func (s *side) theirs(src string, keys, args []string) []byte {
	cmd := append([]string{"EVAL", src, strconv.Itoa(len(keys))}, keys...)
	return s.redis.do(append(cmd, args...)...)
}

func bs(ss []string) [][]byte {
	out := make([][]byte, len(ss))
	for i, s := range ss {
		out[i] = []byte(s)
	}
	return out
}

type evalCase struct {
	name string
	src  string
	keys []string
	args []string
	// vmText marks an error raised by the Lua VM itself, whose text is
	// gopher-lua's: only the error's code and location must match.
	vmText bool
}

var evalCases = []evalCase{
	// Return values and conversions.
	{"integer", "return 42", nil, nil, false},
	{"negative", "return -7", nil, nil, false},
	{"float truncates", "return 3.99", nil, nil, false},
	{"negative float truncates", "return -3.99", nil, nil, false},
	{"string", "return 'hello'", nil, nil, false},
	{"empty string", "return ''", nil, nil, false},
	{"true", "return true", nil, nil, false},
	{"false", "return false", nil, nil, false},
	{"nil", "return nil", nil, nil, false},
	{"no return", "local x = 1", nil, nil, false},
	{"array", "return {1, 'two', 3.5, true, false}", nil, nil, false},
	{"nil hole", "return {1, 2, nil, 4}", nil, nil, false},
	{"nested", "return {1, {2, {3, 'x'}}, {}}", nil, nil, false},
	{"hash part ignored", "return {1, 2, foo='bar'}", nil, nil, false},
	{"status", "return {ok='FINE'}", nil, nil, false},
	{"error table", "return {err='MYERR something'}", nil, nil, false},
	{"error table no code", "return {err='plain'}", nil, nil, false},
	{"status_reply", "return redis.status_reply('PONG')", nil, nil, false},
	{"error_reply", "return redis.error_reply('MY code here')", nil, nil, false},
	{"error_reply no space", "return redis.error_reply('foo')", nil, nil, false},
	{"error_reply dash", "return redis.error_reply('-X y')", nil, nil, false},
	{"error_reply bad args", "return redis.error_reply(1)", nil, nil, false},
	{"status crlf", "return {ok='a\\r\\nb'}", nil, nil, false},
	{"big number", "return 2^53", nil, nil, false},
	{"huge number", "return 1e30", nil, nil, false},
	{"keys and argv", "return {KEYS[1], KEYS[2], ARGV[1], #KEYS, #ARGV}", []string{"k1", "k2"}, []string{"a1"}, false},
	{"keys writable", "KEYS[1] = 'x' return KEYS[1]", []string{"k"}, nil, false},
	{"tostring float", "return tostring(1/3)", nil, nil, false},
	{"tostring int", "return tostring(10)", nil, nil, false},
	{"tostring big", "return tostring(2^63)", nil, nil, false},
	{"tonumber", "return tonumber('0x10') + tonumber(' 5 ')", nil, nil, false},
	{"string.format", "return string.format('%d %s %.3f %5.1f', 3, 'x', 1/3, 2.25)", nil, nil, false},
	{"string.rep", "return string.rep('ab', 3)", nil, nil, false},
	{"table.concat", "return table.concat({1, 2, 3}, ',')", nil, nil, false},
	{"unpack select", "return select('#', unpack({1, 2, 3}))", nil, nil, false},
	{"_VERSION", "return _VERSION", nil, nil, false},
	{"version", "return {redis.REDIS_VERSION, redis.REDIS_VERSION_NUM}", nil, nil, false},
	{"sha1hex", "return redis.sha1hex('hello')", nil, nil, false},
	{"sha1hex empty", "return redis.sha1hex('')", nil, nil, false},
	{"replicate_commands", "return redis.replicate_commands()", nil, nil, false},
	{"set_repl", "redis.set_repl(redis.REPL_ALL) return redis.REPL_NONE + redis.REPL_AOF + redis.REPL_REPLICA + redis.REPL_SLAVE", nil, nil, false},
	{"set_repl bad", "redis.set_repl(16)", nil, nil, false},
	{"log", "redis.log(redis.LOG_WARNING, 'hello', 1) return redis.LOG_DEBUG + redis.LOG_VERBOSE + redis.LOG_NOTICE + redis.LOG_WARNING", nil, nil, false},
	{"log bad", "redis.log(redis.LOG_WARNING)", nil, nil, false},
	{"math.random first", "return {math.random(100), math.random(5, 10)}", nil, nil, false},
	{"math.randomseed", "math.randomseed(7) return {math.random(1000), math.random(1000)}", nil, nil, false},
	{"math", "return {math.floor(2.5), math.ceil(2.5), math.max(1, 9, 3), math.abs(-4), math.fmod(7, 3)}", nil, nil, false},

	// Sandbox.
	{"read undefined global", "return y", nil, nil, false},
	{"write global", "x = 1", nil, nil, false},
	{"write global function", "function f() end", nil, nil, false},
	{"write _G", "_G.x = 1", nil, nil, false},
	{"modify library", "string.x = 1", nil, nil, false},
	{"modify redis", "redis.call = nil", nil, nil, false},
	{"print absent", "print(1)", nil, nil, false},
	{"loadfile absent", "return loadfile", nil, nil, false},
	{"dofile absent", "return dofile", nil, nil, false},
	{"os absent", "return os", nil, nil, false},
	{"io absent", "return io", nil, nil, false},
	{"require absent", "return require", nil, nil, false},
	{"debug absent", "return debug", nil, nil, false},
	{"package absent", "return package", nil, nil, false},
	{"rawget _G", "return rawget(_G, 'nope') == nil", nil, nil, false},
	{"type of globals", "return {type(pcall), type(xpcall), type(loadstring), type(setfenv), type(coroutine), type(gcinfo), type(newproxy), type(_G)}", nil, nil, false},
	{"loadstring", "local f = loadstring('return 1 + 1') return f()", nil, nil, false},
	{"local ok", "local x = 5 local function g(a) return a * 2 end return g(x)", nil, nil, false},

	// Errors.
	{"compile error", "return 1 +", nil, nil, false},
	{"runtime error", "local t = nil\nreturn t.x", nil, nil, true},
	{"error string", "error('boom')", nil, nil, false},
	{"error line 3", "local a = 1\nlocal b = 2\nerror('third')", nil, nil, false},
	{"error level 0", "error('nopos', 0)", nil, nil, false},
	{"error number", "error(5)", nil, nil, false},
	{"error table", "error({err='MY foo'})", nil, nil, false},
	{"error nil", "error()", nil, nil, false},
	{"arith on nil", "return 1 + nil", nil, nil, true},
	{"pcall error", "return {pcall(function() error('inner') end)}", nil, nil, false},
	{"pcall error string", "local ok, e = pcall(function() error('inner') end) return e", nil, nil, false},
	{"pcall ok", "return {pcall(function() return 1, 2 end)}", nil, nil, false},
	{"pcall redis.call", "local ok, e = pcall(redis.call, 'nosuch') return {tostring(ok), e}", nil, nil, false},
	{"pcall error table", "local ok, e = pcall(error, {err='X y'}) return e", nil, nil, false},
	{"nested function error", "local function f()\n error('deep')\nend\nf()", nil, nil, false},

	// redis.call and redis.pcall.
	{"call unknown", "return redis.call('nosuch')", nil, nil, false},
	{"pcall unknown", "return redis.pcall('nosuch')", nil, nil, false},
	{"pcall unknown field", "return redis.pcall('nosuch')['err']", nil, nil, false},
	{"call arity", "return redis.call('get')", nil, nil, false},
	{"call no args", "return redis.call()", nil, nil, false},
	{"pcall no args", "return redis.pcall()", nil, nil, false},
	{"call bad arg", "return redis.call('get', {})", nil, nil, false},
	{"pcall bad arg", "return redis.pcall('get', {})", nil, nil, false},
	{"set get", "redis.call('set', KEYS[1], ARGV[1]) return redis.call('get', KEYS[1])", []string{"sg"}, []string{"v1"}, false},
	{"set status", "return redis.call('set', KEYS[1], 'x')", []string{"st"}, nil, false},
	{"set status field", "return redis.call('set', KEYS[1], 'x').ok", []string{"st2"}, nil, false},
	{"get missing", "return redis.call('get', KEYS[1])", []string{"missing"}, nil, false},
	{"get missing is false", "return tostring(redis.call('get', KEYS[1]))", []string{"missing"}, nil, false},
	{"incr", "return redis.call('incr', KEYS[1])", []string{"ctr"}, nil, false},
	{"incrby float arg", "return redis.call('incrby', KEYS[1], 2.0)", []string{"ctr2"}, nil, false},
	{"number arg %.17g", "redis.call('set', KEYS[1], 0.1) return redis.call('get', KEYS[1])", []string{"f"}, nil, false},
	{"number arg int", "redis.call('set', KEYS[1], 100) return redis.call('get', KEYS[1])", []string{"f2"}, nil, false},
	{"wrongtype", "redis.call('set', KEYS[1], 'x') return redis.call('hget', KEYS[1], 'f')", []string{"wt"}, nil, false},
	{"wrongtype pcall", "redis.call('set', KEYS[1], 'x') return redis.pcall('hget', KEYS[1], 'f')", []string{"wt2"}, nil, false},
	{"incr not int", "redis.call('set', KEYS[1], 'abc') return redis.call('incr', KEYS[1])", []string{"ni"}, nil, false},
	{"hash", "redis.call('hset', KEYS[1], 'a', 1, 'b', 2) return redis.call('hmget', KEYS[1], 'a', 'b', 'c')", []string{"h"}, nil, false},
	{"hgetall resp2", "redis.call('hset', KEYS[1], 'a', 1) return redis.call('hgetall', KEYS[1])", []string{"h2"}, nil, false},
	{"mget", "redis.call('set', KEYS[1], 'x') return redis.call('mget', KEYS[1], KEYS[2])", []string{"m1", "m2"}, nil, false},
	{"pexpire pttl", "redis.call('set', KEYS[1], 'x') redis.call('pexpire', KEYS[1], 100000) local t = redis.call('pttl', KEYS[1]) return t > 99000 and t <= 100000", []string{"px"}, nil, false},
	{"zadd zrange", "redis.call('zadd', KEYS[1], 1, 'a', 2, 'b') return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", []string{"z"}, nil, false},
	{"zscore", "redis.call('zadd', KEYS[1], 1.5, 'a') return redis.call('zscore', KEYS[1], 'a')", []string{"z2"}, nil, false},
	{"write then error", "redis.call('set', KEYS[1], 'w') error('after')", []string{"we"}, nil, false},
	{"write stays after error", "return redis.call('get', KEYS[1])", []string{"we"}, nil, false},

	// RESP3 from a script under a RESP2 client.
	{"setresp3 bool", "redis.setresp(3) return true", nil, nil, false},
	{"setresp3 false", "redis.setresp(3) return false", nil, nil, false},
	{"setresp3 null from get", "redis.setresp(3) return redis.call('get', KEYS[1]) == nil", []string{"nokey"}, nil, false},
	{"setresp3 double", "return {double=3.5}", nil, nil, false},
	{"setresp3 hgetall", "redis.setresp(3) redis.call('hset', KEYS[1], 'a', '1') return redis.call('hgetall', KEYS[1])", []string{"h3"}, nil, false},
	{"setresp3 hgetall map field", "redis.setresp(3) redis.call('hset', KEYS[1], 'a', '1') return redis.call('hgetall', KEYS[1]).map.a", []string{"h4"}, nil, false},
	{"setresp3 zscore double", "redis.setresp(3) redis.call('zadd', KEYS[1], 2.5, 'a') return redis.call('zscore', KEYS[1], 'a').double * 2", []string{"z3"}, nil, false},
	{"setresp bad", "redis.setresp(4)", nil, nil, false},
	{"map reply", "return {map={a=1}}", nil, nil, false},
	{"set reply", "return {set={a=true}}", nil, nil, false},
	{"big_number reply", "return {big_number='123456789012345678901234567890'}", nil, nil, false},
	{"verbatim reply", "return {verbatim_string={format='txt', string='hi'}}", nil, nil, false},
	{"double inf", "return {double=1/0}", nil, nil, false},
	{"double tiny", "return {double=1e-20}", nil, nil, false},
	{"double third", "return {double=1/3}", nil, nil, false},

	// Libraries.
	{"cjson.encode array", "return cjson.encode({1, 2, 'x', true, false})", nil, nil, false},
	{"cjson.encode object", "return cjson.encode({a=1})", nil, nil, false},
	{"cjson.encode nested", "return cjson.encode({a={1, 2, {b='c/d'}}})", nil, nil, false},
	{"cjson.encode float", "return cjson.encode({1/3, 1e20, 0.5, -0})", nil, nil, false},
	{"cjson.encode empty", "return cjson.encode({})", nil, nil, false},
	{"cjson.encode escape", "return cjson.encode('a\"b\\\\c\\n\\t\\1/')", nil, nil, false},
	{"cjson.encode null", "return cjson.encode({cjson.null})", nil, nil, false},
	{"cjson.decode", "local t = cjson.decode('{\"a\":[1,2,{\"b\":\"x\"}],\"n\":null,\"f\":1.5,\"t\":true}') return {t.a[1], t.a[2], t.a[3].b, tostring(t.n == cjson.null), tostring(t.f), tostring(t.t)}", nil, nil, false},
	{"cjson.decode escapes", "return cjson.decode('\"a\\\\u00e9\\\\n\\\\/\"')", nil, nil, false},
	{"cjson.decode number", "return cjson.decode('[1e3, -2.5, 0]')[1]", nil, nil, false},
	{"cjson.decode bad", "return cjson.decode('{bad')", nil, nil, false},
	{"cjson roundtrip", "return cjson.encode(cjson.decode('[1,\"a\",[true,false],{}]'))", nil, nil, false},
	{"bit", "return {bit.band(0xff, 0x0f), bit.bor(1, 2), bit.bxor(3, 1), bit.lshift(1, 4), bit.rshift(256, 4), bit.arshift(-256, 4), bit.bnot(0), bit.tobit(2^32 + 5)}", nil, nil, false},
	{"bit.tohex", "return {bit.tohex(255), bit.tohex(-1), bit.tohex(255, 2), bit.tohex(255, -4)}", nil, nil, false},
	{"bit rol ror bswap", "return {bit.rol(1, 33), bit.ror(1, 1), bit.bswap(0x12345678)}", nil, nil, false},
	{"struct pack unpack", "local s = struct.pack('>I2i4', 258, -3) local a, b, n = struct.unpack('>I2i4', s) return {#s, a, b, n}", nil, nil, false},
	{"struct pack le", "return struct.pack('<hHbB', -2, 65535, -1, 255)", nil, nil, false},
	{"struct string", "local s = struct.pack('s', 'hi') return {s, struct.unpack('s', s)}", nil, nil, false},
	{"struct size", "return struct.size('>iIhd')", nil, nil, false},
	{"struct double", "local s = struct.pack('d', 1.5) return tostring(struct.unpack('d', s))", nil, nil, false},
	{"struct c", "return {struct.unpack('c2c1', 'abc')}", nil, nil, false},
	{"cmsgpack.pack", "return cmsgpack.pack({1, 2, 3}, 'abc', 1.5, -1, 200, 70000, true, nil)", nil, nil, false},
	{"cmsgpack.pack map", "return cmsgpack.pack({a=1})", nil, nil, false},
	{"cmsgpack.unpack", "local a, b, c = cmsgpack.unpack(cmsgpack.pack({1, {x='y'}}, 'z', 2.25)) return {a[1], a[2].x, b, tostring(c)}", nil, nil, false},
	// Lua 5.1's string patterns, format and the bounded built-ins
	// (this package's own, not gopher-lua's).
	{"find plain", "return {string.find('hello world', 'o w')}", nil, nil, false},
	{"find init", "return {string.find('hello', 'l', -2)}", nil, nil, false},
	{"find plain flag", "return {string.find('a.b', '.', 1, true)}", nil, nil, false},
	{"find captures", "return {string.find('key=val', '(%w+)=(%w+)')}", nil, nil, false},
	{"match trim", "return string.match('  trim  ', '^%s*(.-)%s*$')", nil, nil, false},
	{"match positions", "return {string.match('hello', '()ll()')}", nil, nil, false},
	{"match date", "return {string.match('2024-01-02', '(%d+)-(%d+)-(%d+)')}", nil, nil, false},
	{"match anchor", "return tostring(string.match('x^y', '^y'))", nil, nil, false},
	{"match balance", "return {string.find('f(a(b)c)d', '%b()')}", nil, nil, false},
	{"match frontier", "return {string.find('THE (quick) fox', '%f[%a]%a+', 5)}", nil, nil, false},
	{"match classes", "return {string.match('aB3 _.\t', '(%l)(%u)(%d)(%s)(%p)(%p)(%c)')}", nil, nil, false},
	{"match set", "return {string.match('x-y]z', '[%]x-]+')}", nil, nil, false},
	{"match back reference", `return {string.match('say "hi" ok', '(["\'])(.-)%1')}`, nil, nil, false},
	{"gmatch", "local t = {} for k, v in string.gmatch('a=1, b=2', '(%w+)=(%w+)') do t[#t+1] = k .. v end return t", nil, nil, false},
	{"gmatch caret", "local t = {} for w in string.gmatch('^a^b', '^%a') do t[#t+1] = w end return t", nil, nil, false},
	{"gsub", "return {string.gsub('hello world', '(%w+)', '<%1>')}", nil, nil, false},
	{"gsub whole", "return {string.gsub('abc', '%w', '%0%0')}", nil, nil, false},
	{"gsub empty", "return {string.gsub('abc', '', '-')}", nil, nil, false},
	{"gsub table", "return {string.gsub('hello', 'l', {l='L'})}", nil, nil, false},
	{"gsub function", "return {string.gsub('hello', '.', function(c) if c == 'e' then return 'E' end end)}", nil, nil, false},
	{"gsub limit", "return {string.gsub('hello world', 'o', 'X', 1)}", nil, nil, false},
	{"gsub anchor", "return {string.gsub('aaa', '^a', 'X')}", nil, nil, false},
	{"gsub bad capture", "return string.gsub('abc', 'b', '%2')", nil, nil, false},
	{"gsub bad value", "return string.gsub('abc', '.', {a=true})", nil, nil, false},
	{"pattern missing ]", "return string.find('abc', '[a-')", nil, nil, false},
	{"pattern ends with %", "return string.find('abc', '%')", nil, nil, false},
	{"pattern unfinished capture", "return string.find('abc', '(()')", nil, nil, false},
	{"pattern invalid capture", "return string.match('abc', ')')", nil, nil, false},
	{"format flags", "return string.format('%5.1s|%-5d|%+.3e|%#x|%05.1f|%g|%g|%g', 'abc', 42, 12345.678, 255, 3.14159, 0.1, 1e20, 1/3)", nil, nil, false},
	{"format ints", "return string.format('%.0f %#.0f %#o %#X %.3d %.0d| %+d % d %05d %-05d|', 2.5, 3, 8, 255, 7, 0, 5, 5, -5, -5)", nil, nil, false},
	{"format g", "return string.format('%.14g %.20f %10.4G %-#08x|%08.3f|%+08d', 2^63, 0.1, 1e-10, 255, -3.14159, 42)", nil, nil, false},
	{"format q", "return string.format('%q', 'a\\0b\\r\\n\"')", nil, nil, false},
	{"format special", "return string.format('%f %e %5.1f|%X|%u', 0/0, 1/0, -1/0, -1, 8)", nil, nil, false},
	{"format width", "return string.format('%100d', 1)", nil, nil, false},
	{"format no value", "return string.format('%d')", nil, nil, false},
	{"format bad option", "return string.format('%z', 1)", nil, nil, false},
	{"format string expected", "return string.format('%s', {})", nil, nil, false},
	{"format long string", "return #string.format('%s', string.rep('x', 120))", nil, nil, false},
	{"rep", "return {string.rep('ab', 3), string.rep('x', 0), string.rep('x', -1)}", nil, nil, false},
	{"upper lower bytes", "return {string.upper('aBc\\200'), string.lower('ABC')}", nil, nil, false},
	{"concat", "return {table.concat({1, 'a', 2.5}, '-'), table.concat({1, 2, 3}, ',', 2, 3)}", nil, nil, false},
	{"concat bad value", "return table.concat({1, {}, 3})", nil, nil, false},
	{"sort", "local t = {3, 1, 2} table.sort(t) local u = {3, 1, 2} table.sort(u, function(a, b) return a > b end) return {t, u}", nil, nil, false},
	{"unpack bound", "return {unpack({1, 2, 3}, -2, 2147483647)}", nil, nil, false},
	{"byte bound", "return select('#', string.byte(string.rep('x', 10000), 1, -1))", nil, nil, false},
	{"tohex min", "return bit.tohex(65535, -2147483648)", nil, nil, false},
	{"randomseed string", "math.randomseed('10') return math.random(100)", nil, nil, false},
	{"cjson option", "return cjson.encode_keep_buffer(1)", nil, nil, false},
	{"cjson depth default", "return cjson.encode({{1}})", nil, nil, false},
	{"loadstring chunk name", "loadstring('local x = 1\\nhijack = 1')()", nil, nil, false},
	{"loadstring compile error", "return select(2, loadstring('x = = 2'))", nil, nil, false},
	{"gfind", "return {type(string.gfind), string.gfind == string.gmatch}", nil, nil, false},
	{"string metatable", "return getmetatable('').__index == string", nil, nil, false},
	{"string metatable write", "getmetatable('').__index = {}", nil, nil, false},
	{"globals metatable write", "getmetatable(_G).__index = {}", nil, nil, false},
	{"library metatable", "return tostring(getmetatable(redis))", nil, nil, false},
	{"cmsgpack big ints", "return cmsgpack.pack(-33, -200, -40000, 2^40, -2^40, 0.1)", nil, nil, false},
}

func TestEvalMatchesRedis(t *testing.T) {
	addr := startRedis(t)
	compareEvalCases(t, newSide(t, addr))
}

// TestEvalMatchesRedisRESP3 runs the replies that depend on the client's
// protocol under HELLO 3.
func TestEvalMatchesRedisRESP3(t *testing.T) {
	addr := startRedis(t)
	s := newSide(t, addr)
	s.redis.do("HELLO", "3")
	s.resp3 = true
	compareEvalCases(t, s)
}

// compareEvalCases runs each of evalCases on Redis and on the engine and
// compares the replies (a VM error's message left out where the case says
// so).
func compareEvalCases(t *testing.T, s *side) {
	t.Helper()
	for _, c := range evalCases {
		want := s.theirs(c.src, c.keys, c.args)
		got := s.ours(c.src, c.keys, c.args)
		if c.vmText {
			got, want = vmErrorShape(got), vmErrorShape(want)
		}
		if string(got) != string(want) {
			t.Errorf("%s: %s\n got: %q\nwant: %q", c.name, c.src, got, want)
		}
	}
}

func TestScriptLoadAndEvalSHA(t *testing.T) {
	addr := startRedis(t)
	s := newSide(t, addr)
	src := "return ARGV[1] .. '!'"
	want := s.redis.do("SCRIPT", "LOAD", src)
	sha, err := s.eng.Load([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if got := (script.Reply{Kind: script.Bulk, Str: sha}).Append(nil, false); string(got) != string(want) {
		t.Fatalf("SCRIPT LOAD: got %q want %q", got, want)
	}
	if !s.eng.Exists(strings.ToUpper(sha)) {
		t.Fatal("Exists: the loaded script is missing")
	}
	r, err := s.eng.EvalSHA(context.Background(), strings.ToUpper(sha), nil, bs([]string{"hi"}), s.caller, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := string(r.Append(nil, false)), string(s.redis.do("EVALSHA", sha, "0", "hi")); got != want {
		t.Fatalf("EVALSHA: got %q want %q", got, want)
	}
	_, err = s.eng.EvalSHA(context.Background(), "0000000000000000000000000000000000000000", nil, nil, s.caller, nil)
	if got, want := "-"+err.Error()+"\r\n", string(s.redis.do("EVALSHA", "0000000000000000000000000000000000000000", "0")); got != want {
		t.Fatalf("NOSCRIPT: got %q want %q", got, want)
	}
	_, err = s.eng.Load([]byte("return +"))
	if got, want := "-"+err.Error()+"\r\n", string(s.redis.do("SCRIPT", "LOAD", "return +")); got != want {
		t.Fatalf("compile error: got %q want %q", got, want)
	}
	s.eng.Flush()
	if s.eng.Exists(sha) {
		t.Fatal("Flush kept the script")
	}
}

// vmErrorShape keeps an error reply's code, position and location suffix
// and drops the message between them.
func vmErrorShape(b []byte) []byte {
	s := string(b)
	i := strings.Index(s, ": ")
	j := strings.LastIndex(s, " script: ")
	if !strings.HasPrefix(s, "-ERR user_script:") || i < 0 || j < i {
		return b
	}
	return []byte(s[:i] + ": ..." + s[j:])
}
