package script_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/script"
)

// noCalls is a Caller for scripts that call no command.
var noCalls = script.CallerFunc(func(args [][]byte, resp3 bool) []byte {
	return []byte("-ERR no commands in this test\r\n")
})

// evalText runs src and returns its reply as RESP2 text, or its error's
// text.
func evalText(t *testing.T, eng *script.Engine, src string) (string, time.Duration) {
	t.Helper()
	began := time.Now()
	r, err := eng.Eval(context.Background(), []byte(src), nil, nil, noCalls, nil)
	took := time.Since(began)
	if err != nil {
		return "-" + err.Error(), took
	}
	return string(r.Append(nil, false)), took
}

const boundsMemory = 16 << 20

// boundsValue is the largest value a built-in may make under
// boundsMemory.
const boundsValue = boundsMemory / 4

// TestBuiltinBounds: for each bounded built-in, a call just inside the
// bound works and one just past it fails with Lua's or Redis's text; the
// failure comes at once (the test only catches a hang: timings are
// logged, not asserted).
func TestBuiltinBounds(t *testing.T) {
	eng := script.New()
	eng.SetMemoryLimit(boundsMemory)
	nested := func(open, close string, n int) string {
		return strings.Repeat(open, n) + strings.Repeat(close, n)
	}
	cases := []struct {
		name         string
		inside, want string // a script just inside the bound and its reply
		past, err    string // one just past it and a text its error holds
	}{
		{"unpack", "local t = {} for i = 1, 7997 do t[i] = i end return select('#', unpack(t, 1, 7997))", ":7997\r\n",
			"local t = {} for i = 1, 7998 do t[i] = i end return select('#', unpack(t, 1, 7998))", "too many results to unpack"},
		{"unpack range", "return select('#', unpack({}, -3996, 4000))", ":7997\r\n",
			"return select('#', unpack({}, -2, 2147483647))", "too many results to unpack"},
		{"string.byte", "return select('#', string.byte(string.rep('x', 9000), 1, 7997))", ":7997\r\n",
			"return select('#', string.byte(string.rep('x', 9000), 1, 7998))", "string slice too long"},
		{"string.rep", fmt.Sprintf("return #string.rep('ab', %d)", boundsValue/2), fmt.Sprintf(":%d\r\n", boundsValue),
			fmt.Sprintf("return #string.rep('ab', %d)", boundsValue/2+1), "not enough memory"},
		{"table.concat", fmt.Sprintf("local s = string.rep('x', %d) return #table.concat({s, s}, 'ab')", boundsValue/2-1), fmt.Sprintf(":%d\r\n", boundsValue),
			fmt.Sprintf("local s = string.rep('x', %d) return #table.concat({s, s}, 'abc')", boundsValue/2-1), "not enough memory"},
		{"string.gsub", fmt.Sprintf("local s = string.rep('x', %d) return #(s:gsub('x', 'yy'))", boundsValue/2), fmt.Sprintf(":%d\r\n", boundsValue),
			fmt.Sprintf("local s = string.rep('x', %d) return #(s:gsub('x', 'yy'))", boundsValue/2+1), "not enough memory"},
		{"string.format width", "return #string.format('%99d', 1)", ":99\r\n",
			"return #string.format('%100d', 1)", "invalid format (width or precision too long)"},
		{"string.format precision", "return #string.format('%.99f', 1)", ":101\r\n",
			"return #string.format('%.100f', 1)", "invalid format (width or precision too long)"},
		{"cjson.encode depth", "return #cjson.encode(cjson.decode('" + nested("[", "]", 1000) + "'))", ":2000\r\n",
			"local t = {} for i = 1, 1000 do t = {t} end return cjson.encode(t)", "Cannot serialise, excessive nesting (1001)"},
		{"cjson.decode depth", "return type(cjson.decode('" + nested("[", "]", 1000) + "'))", "$5\r\ntable\r\n",
			"return cjson.decode('" + nested("[", "]", 1001) + "')", "Found too many nested data structures (1001)"},
		{"cjson.encode size", fmt.Sprintf("return #cjson.encode(string.rep('x', %d))", boundsValue-2), fmt.Sprintf(":%d\r\n", boundsValue),
			"local a = {} for i = 1, 40 do a = {a, a} end return cjson.encode(a)", "not enough memory"},
		{"cmsgpack.pack size", "return #cmsgpack.pack(string.rep('x', 1000))", ":1003\r\n",
			"local a = {} for i = 1, 15 do a = {a, a, a, a} end return cmsgpack.pack(a)", "not enough memory"},
		{"cmsgpack.unpack results", "return select('#', cmsgpack.unpack(string.rep(string.char(1), 7999)))", ":7999\r\n",
			"return select('#', cmsgpack.unpack(string.rep(string.char(1), 8000)))", "stack overflow (too many return values at once; use unpack_one or unpack_limit instead.)"},
		{"cmsgpack.unpack nesting", "return type(cmsgpack.unpack(string.rep(string.char(0x91), 7000) .. string.char(1)))", "$5\r\ntable\r\n",
			"return cmsgpack.unpack(string.rep(string.char(0x91), 9000) .. string.char(1))", "stack overflow"},
		{"struct.unpack results", "return select('#', struct.unpack(string.rep('b', 7997), string.rep('x', 7997)))", ":7998\r\n",
			"return select('#', struct.unpack(string.rep('b', 7998), string.rep('x', 7998)))", "stack overflow (too many results)"},
		{"struct.pack size", "return #struct.pack('i32', 1)", ":32\r\n",
			"return struct.pack('i33', 1)", "integral size 33 is larger than limit of 32"},
		{"struct.pack count", fmt.Sprintf("return #struct.pack('c%d', string.rep('x', %d))", boundsValue, boundsValue), fmt.Sprintf(":%d\r\n", boundsValue),
			"return struct.pack('c2147483647', 'x')", "string too short"},
		{"cjson.encode_max_depth", "cjson.encode_max_depth(2) return cjson.encode({{1}})", "$5\r\n[[1]]\r\n",
			"cjson.encode_max_depth(1) return cjson.encode({{1}})", "Cannot serialise, excessive nesting (2)"},
		{"pattern captures", "return select('#', string.match('x', string.rep('(', 32) .. 'x' .. string.rep(')', 32)))", ":32\r\n",
			"return string.match('x', string.rep('(', 33) .. 'x' .. string.rep(')', 33))", "too many captures"},
		{"pattern nesting", "return (string.find(string.rep('a', 9990), string.rep('a?', 9990)))", ":1\r\n",
			"return string.find(string.rep('a', 10001), string.rep('a?', 10001))", "pattern too complex"},
		{"reply size", "local t = {} for i = 1, 1000 do t[i] = {} end return #t", ":1000\r\n",
			"local a = {} for i = 1, 30 do a = {a, a} end return a", "not enough memory"},
		{"heap growth", "local t = {} for i = 1, 100 do t[i] = string.rep('x', 1000) .. i end return #t", ":100\r\n",
			"local s = 'x' for i = 1, 40 do s = s .. s end return #s", "not enough memory"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, _ := evalText(t, eng, c.inside)
			if got != c.want {
				t.Errorf("just inside: %.200s\n\tgot  %q\n\twant %q", c.inside, got, c.want)
			}
			got, took := evalText(t, eng, c.past)
			if !strings.HasPrefix(got, "-") || !strings.Contains(got, c.err) {
				t.Errorf("just past: %.200s\n\tgot  %.300q\n\twant an error with %q", c.past, got, c.err)
			}
			if took > 30*time.Second {
				t.Errorf("just past: the error took %v", took)
			}
			t.Logf("past the bound: %v", took.Round(time.Millisecond))
		})
	}
}

// TestLoadstringBound: loadstring compiles up to 8 MiB of source (the
// compiler cannot be stopped) and refuses more, as load does.
func TestLoadstringBound(t *testing.T) {
	eng := script.New()
	eng.SetMemoryLimit(0)
	src := fmt.Sprintf("return type(loadstring('return 1 --' .. string.rep('x', %d)))", 8<<20-11)
	if got, _ := evalText(t, eng, src); got != "$8\r\nfunction\r\n" {
		t.Errorf("8 MiB of source: %q", got)
	}
	for _, src := range []string{
		fmt.Sprintf("return select(2, loadstring('return 1 --' .. string.rep('x', %d)))", 8<<20-10),
		fmt.Sprintf("local s = string.rep('x', %d) local n = 0 return select(2, load(function() n = n + 1 if n == 1 then return 'return 1 --' elseif n == 2 then return s end end))", 8<<20-10),
	} {
		if got, _ := evalText(t, eng, src); got != "$43\r\nchunk too large (the most is 8388608 bytes)\r\n" {
			t.Errorf("one byte more: %q", got)
		}
	}
}

// TestSyntaxLevels: a source nested past Lua 5.1's 200 syntax levels is
// refused before the compiler sees it (2 MB of '{' overflowed Go's stack
// and killed the process), from EVAL as from loadstring; nesting within
// the bound compiles.
func TestSyntaxLevels(t *testing.T) {
	eng := script.New()
	nest := func(n int) string { return strings.Repeat("{", n) + strings.Repeat("}", n) }
	if got, _ := evalText(t, eng, "local t = "+nest(150)+" return 1"); got != ":1\r\n" {
		t.Errorf("150 levels: %q", got)
	}
	// Numbers that start with a dot: the check once looped on them.
	if got, _ := evalText(t, eng, "return .5 + .25e1 + ."+strings.Repeat("5", 10)); got != ":3\r\n" {
		t.Errorf("numbers with a leading dot: %q", got)
	}
	if got, _ := evalText(t, eng, ".0"); !strings.HasPrefix(got, "-ERR Error compiling script") {
		t.Errorf(".0 alone: %q", got)
	}
	for _, src := range []string{
		"return " + nest(1<<20),
		"return " + strings.Repeat("(", 1<<20) + "1" + strings.Repeat(")", 1<<20),
		"return x" + strings.Repeat("..x", 1<<17),
		"return " + strings.Repeat("not ", 1<<18) + "true",
		strings.Repeat("do ", 1<<18) + strings.Repeat("end ", 1<<18),
		"if x then " + strings.Repeat("elseif x then ", 20000) + "end",
	} {
		got, took := evalText(t, eng, src)
		if !strings.HasPrefix(got, "-ERR Error compiling script (new function): user_script:1: ") ||
			!(strings.HasSuffix(got, "chunk has too many syntax levels") || strings.HasSuffix(got, "control structure too long")) {
			t.Errorf("%.40s... (%d bytes): %.200q", src, len(src), got)
		}
		t.Logf("%.20s... refused in %v", src, took.Round(time.Millisecond))
	}
	if got, _ := evalText(t, eng, "return select(2, loadstring('return ' .. string.rep('{', 1000000)))"); !strings.HasSuffix(got, "chunk has too many syntax levels\r\n") {
		t.Errorf("loadstring: %q", got)
	}
}

// TestPanicIsTheScriptsError: a Go panic inside a run (here, in the
// caller a script's redis.call reaches) is the script's error, and the
// engine goes on.
func TestPanicIsTheScriptsError(t *testing.T) {
	eng := script.New()
	boom := script.CallerFunc(func(args [][]byte, resp3 bool) []byte { panic("boom") })
	_, err := eng.Eval(context.Background(), []byte("return redis.call('get', 'k')"), nil, nil, boom, nil)
	if err == nil || !strings.Contains(err.Error(), "boom") {
		t.Fatalf("a panicking call: %v", err)
	}
	if got, _ := evalText(t, eng, "return ('ok'):upper()"); got != "$2\r\nOK\r\n" {
		t.Fatalf("after the panic: %q", got)
	}
}

// TestKillStopsBuiltins: cancelling a run (SCRIPT KILL, shutdown) stops
// it inside each long-running built-in.
func TestKillStopsBuiltins(t *testing.T) {
	eng := script.New()
	eng.SetMemoryLimit(1 << 30)
	for _, src := range []string{
		"return string.find(string.rep('a', 40), string.rep('a*', 40) .. 'b')",
		"return string.match(string.rep('a', 40), string.rep('a-', 40) .. 'b')",
		"local n = 0 for w in string.gmatch(string.rep('a', 40), string.rep('a*', 40) .. 'b') do n = n + 1 end return n",
		"return string.gsub(string.rep('a', 40), string.rep('a*', 40) .. 'b', 'x')",
		"local t = {} for i = 1, 3000000 do t[i] = (i * 7919) % 1000003 end table.sort(t) return 1",
		"local a = {} for i = 1, 40 do a = {a, a} end return #cjson.encode(a)",
		"local a = {} for i = 1, 15 do a = {a, a, a, a} end return #cmsgpack.pack(a)",
		"while true do pcall(function() while true do end end) end",
		"while true do xpcall(function() while true do end end, function(e) return e end) end",
		"local f = coroutine.wrap(function() while true do end end) f()",
	} {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() {
			_, err := eng.Eval(ctx, []byte(src), nil, nil, noCalls, nil)
			done <- err
		}()
		time.Sleep(200 * time.Millisecond)
		cancel()
		began := time.Now()
		select {
		case err := <-done:
			if err == nil {
				t.Errorf("%s: finished without an error after the cancel", src)
			}
			t.Logf("%.60s: stopped %v after the cancel", src, time.Since(began).Round(time.Millisecond))
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: still running 30 s after the cancel", src)
		}
	}
}
