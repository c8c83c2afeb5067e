package clienttest

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"testing"
)

// Issue 21: limiter scripts in use run on rlserver unchanged and answer as
// a real Redis 7 does. TestLuaLimiterScripts runs each script, in the
// shape limiter projects use, through SCRIPT LOAD + EVALSHA and EVAL, on
// a fresh redis-server (Debian's, started by the test) and on rlserver, over raw
// RESP connections in RESP2 and RESP3, with the clock passed in ARGV so
// both servers compute the same, and compares every reply exactly, then
// the keys the script left. Scripts that read TIME are compared field by
// field: the fields that do not move with the clock exactly, the others
// within a tolerance. TestLuaSandboxAndConversions does the same for
// Redis's documented conversion and sandbox cases and the EVAL/SCRIPT
// commands' own errors.
//
// Left out on purpose, where package script documents a difference:
// errors raised by the Lua VM itself (arithmetic on nil, indexing nil...),
// whose wording is gopher-lua's, and the order of a Lua table's hash part
// (a {map=...} of several fields, cjson of an object of several fields).
//
// The three limiter scripts below (scgRateLimiterLua, losantGCRALua,
// rwzGCRALua) are rlserver's own implementations, written for this test,
// of the algorithms and script interfaces that Spring Cloud Gateway,
// Losant/redis-gcra and rwz/redis-gcra publish (keys, ARGV, the reply's
// shape and what is stored); they are not those projects' source text.

// scgRateLimiterLua is a token bucket with the interface of Spring Cloud
// Gateway's RedisRateLimiter script: KEYS are the tokens key and the
// timestamp key, ARGV rate (tokens per second), capacity, now (seconds;
// when it is not a number, TIME's seconds) and the tokens requested. Both
// keys are written with SETEX for twice the time the bucket takes to
// fill (not at all when that rounds down to 0 s); the reply is {allowed
// 0/1, tokens left}, the tokens truncated to an integer by the reply.
const scgRateLimiterLua = `-- token bucket: KEYS tokens, timestamp; ARGV rate, capacity, now, requested
local bucket_key, clock_key = KEYS[1], KEYS[2]
local per_second = tonumber(ARGV[1])
local size       = tonumber(ARGV[2])
local want       = tonumber(ARGV[4])

local at = tonumber(ARGV[3])
if at == nil then
  local clock = redis.call('TIME')
  at = tonumber(clock[1])
end

-- keep the keys twice as long as an empty bucket takes to fill up
local keep_for = math.floor(2 * (size / per_second))

local level = tonumber(redis.call('GET', bucket_key))
if level == nil then
  level = size
end
local seen = tonumber(redis.call('GET', clock_key))
if seen == nil then
  seen = 0
end

local waited = at - seen
if waited < 0 then
  waited = 0 -- the clock went back: add nothing
end
level = math.min(size, level + waited * per_second)

local ok = 0
if level >= want then
  level = level - want
  ok = 1
end

if keep_for > 0 then
  redis.call('SETEX', bucket_key, keep_for, level)
  redis.call('SETEX', clock_key, keep_for, at)
end

return {ok, level}`

// losantGCRALua is a GCRA with the interface of Losant/redis-gcra: KEYS[1]
// holds the theoretical arrival time (ms) as a float string, set with PX
// until it is reached; ARGV are now (ms), burst, rate, period (ms) and
// cost (0 peeks without writing). The reply is {limited 0/1, remaining,
// retry_in ms (-1 when the cost can never fit the burst), reset_in ms}.
const losantGCRALua = `-- GCRA: KEYS[1] holds the TAT (ms); ARGV now, burst, rate, period, cost
local k = KEYS[1]
local t_now  = tonumber(ARGV[1])
local bursts = tonumber(ARGV[2])
local count  = tonumber(ARGV[3])
local span   = tonumber(ARGV[4])
local weight = tonumber(ARGV[5])

local step  = span / count     -- ms between requests at the steady rate
local need  = step * weight    -- how far this request pushes the TAT
local ahead = step * bursts    -- how far the TAT may run ahead of now

local tat = tonumber(redis.call('GET', k))
if tat == nil or tat < t_now then
  tat = t_now
end

local next_tat = tat + need
local margin = t_now - (next_tat - ahead)

if margin < 0 then
  local left = math.floor((t_now - (tat - ahead)) / step)
  if left < 0 then left = 0 end
  local retry = math.ceil(-margin)
  if need > ahead then retry = -1 end
  return {1, left, retry, math.ceil(tat - t_now)}
end

local reset = math.ceil(next_tat - t_now)
if need > 0 then
  redis.call('SET', k, next_tat, 'PX', reset)
end
return {0, math.floor(margin / step), 0, reset}`

// rwzGCRALua is a GCRA with the interface of rwz/redis-gcra, on Redis's
// clock (TIME, seconds and microseconds, counted from 2023-11-14 so the
// float keeps its microseconds): KEYS[1] holds the theoretical arrival
// time in seconds, set with EX; ARGV are burst, rate, period (s) and cost,
// used as strings in the arithmetic (Lua's coercion). The reply is
// {limited 0/1, remaining, retry_after, reset_after}, the times as
// strings of seconds, retry_after "-1" when the request is allowed or can
// never fit the burst.
const rwzGCRALua = `-- GCRA on TIME: KEYS[1] holds the TAT (s); ARGV burst, rate, period, cost
local slot = KEYS[1]
local burst, rate, period, cost = ARGV[1], ARGV[2], ARGV[3], ARGV[4]

local clock = redis.call('TIME')
local now = (clock[1] - 1700000000) + clock[2] / 1000000

local gap      = period / rate
local push     = gap * cost
local headroom = gap * burst

local tat = tonumber(redis.call('GET', slot))
if tat == nil or tat < now then
  tat = now
end
local pushed = tat + push
local spare = now - (pushed - headroom)

if spare < 0 then
  local left = math.floor((now - (tat - headroom)) / gap)
  if left < 0 then left = 0 end
  local wait = -spare
  if push > headroom then wait = -1 end
  return {1, left, tostring(wait), tostring(tat - now)}
end

local until_reset = pushed - now
if push > 0 then
  redis.call('SET', slot, pushed, 'EX', math.ceil(until_reset))
end
return {0, math.floor(spare / gap), tostring(-1), tostring(until_reset)}
`

// articleTokenBucketLua is the token bucket of the background article
// "distributed rate limiting in Rust" (../shared/background/): one hash
// {tokens, ts} read with HMGET, written with HSET and PEXPIRE, the clock
// in ARGV[3] (ms). It is kept once, in bench/kvcompare/token_bucket.lua,
// which kvcompare -scripts embeds.
var articleTokenBucketLua = mustReadFile("../bench/kvcompare/token_bucket.lua")

// mustReadFile is the text of a file the tests need, relative to this
// package's directory.
func mustReadFile(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// articleTokenBucketTimeLua is the same script on Redis's clock, as the
// article advises ("use redis.call('TIME') inside the script as the single
// clock"): only the line that reads the clock differs.
var articleTokenBucketTimeLua = onRedisClock(articleTokenBucketLua)

func onRedisClock(src string) string {
	const nowLine = "local now_ms   = tonumber(ARGV[3])"
	if !strings.Contains(src, nowLine) {
		panic("the token bucket script has no line " + strconv.Quote(nowLine))
	}
	return strings.Replace(src, nowLine,
		"local t        = redis.call('TIME')\nlocal now_ms   = t[1] * 1000 + math.floor(t[2] / 1000)", 1)
}

// slidingWindowLogLua is the sliding-window log in its common form (many
// projects ship it nearly word for word; this one is written for the
// test): a sorted set of request times, trimmed with ZREMRANGEBYSCORE,
// counted with ZCARD, added to with ZADD, expiring with PEXPIRE; a denied
// request learns when the oldest entry leaves the window.
const slidingWindowLogLua = `local key    = KEYS[1]
local now    = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local limit  = tonumber(ARGV[3])
local member = ARGV[4]

redis.call('ZREMRANGEBYSCORE', key, 0, now - window)
local count = redis.call('ZCARD', key)
if count < limit then
  redis.call('ZADD', key, now, member)
  redis.call('PEXPIRE', key, window)
  return {1, limit - count - 1, 0}
end
local oldest = redis.call('ZRANGE', key, 0, 0, 'WITHSCORES')
return {0, 0, tonumber(oldest[2]) + window - now}`

// luaCall is one command of a sequence, on connection conn of each
// server, and how its replies compare: exactly when cmp is nil.
type luaCall struct {
	conn int
	args []string
	cmp  func(want, got value) bool
	note string // why a comparison is loose, for the failure message
}

type luaSeq struct {
	name  string
	calls []luaCall
}

func lc(args ...string) luaCall  { return luaCall{args: args} }
func lc1(args ...string) luaCall { return luaCall{conn: 1, args: args} }

// lcNear is a call whose integer reply moves with the clock.
func lcNear(tol int64, args ...string) luaCall {
	return luaCall{args: args, cmp: func(w, g value) bool { return nearValue(w, g, tol) }, note: fmt.Sprintf("integers within %d", tol)}
}

// fieldRule says how one element of an array reply compares: 'e' exactly,
// 'i' an integer within tol, 'f' a number in a string within tol
// (both "-1" or both numbers).
func lcFields(rules string, tol float64, args ...string) luaCall {
	return luaCall{args: args, note: fmt.Sprintf("fields %q within %g", rules, tol), cmp: func(w, g value) bool {
		if w.kind != '*' || g.kind != '*' || len(w.elems) != len(rules) || len(g.elems) != len(rules) {
			return false
		}
		for i, r := range rules {
			a, b := w.elems[i], g.elems[i]
			switch r {
			case 'e':
				if !luaExact(a, b) {
					return false
				}
			case 'i':
				if a.kind != ':' || b.kind != ':' || math.Abs(float64(a.num-b.num)) > tol {
					return false
				}
			case 'f':
				if a.kind != b.kind || a.kind != '$' {
					return false
				}
				x, err1 := strconv.ParseFloat(a.str, 64)
				y, err2 := strconv.ParseFloat(b.str, 64)
				if err1 != nil || err2 != nil || math.Abs(x-y) > tol {
					return false
				}
			}
		}
		return true
	}}
}

// lcFloat is a call whose reply is a number in a bulk string that moves
// with the clock.
func lcFloat(tol float64, args ...string) luaCall {
	return luaCall{args: args, note: fmt.Sprintf("a number within %g", tol), cmp: func(w, g value) bool {
		if w.kind != '$' || g.kind != '$' || w.null != g.null {
			return false
		}
		x, err1 := strconv.ParseFloat(w.str, 64)
		y, err2 := strconv.ParseFloat(g.str, 64)
		return err1 == nil && err2 == nil && math.Abs(x-y) <= tol
	}}
}

func luaExact(want, got value) bool {
	return want.String() == got.String() && sameKinds(want, got)
}

// runScript calls src with each of calls (keys then ARGV, numkeys
// nkeys), alternating EVALSHA (of the SHA1 SCRIPT LOAD returned) and
// EVAL, after a SCRIPT LOAD whose reply compares too. Each call's reply
// compares with cmp (exactly when nil).
func runScript(src string, nkeys int, cmp func(want, got value) bool, calls ...[]string) []luaCall {
	sha := scriptSHA(src)
	out := []luaCall{lc("SCRIPT", "LOAD", src), lc("SCRIPT", "EXISTS", sha, strings.ToUpper(sha))}
	for i, c := range calls {
		head := []string{"EVALSHA", sha}
		if i%2 == 1 {
			head = []string{"EVAL", src}
		}
		args := append(append(head, strconv.Itoa(nkeys)), c...)
		out = append(out, luaCall{args: args, cmp: cmp})
	}
	return out
}

// runScriptFields is runScript with each reply compared by lcFields.
func runScriptFields(src string, nkeys int, rules string, tol float64, calls ...[]string) []luaCall {
	cmp := lcFields(rules, tol).cmp
	out := runScript(src, nkeys, cmp, calls...)
	for i := range out {
		if out[i].cmp != nil {
			out[i].note = fmt.Sprintf("fields %q within %g", rules, tol)
		}
	}
	return out
}

func seqOf(parts ...any) []luaCall {
	var out []luaCall
	for _, p := range parts {
		switch p := p.(type) {
		case luaCall:
			out = append(out, p)
		case []luaCall:
			out = append(out, p...)
		default:
			panic(fmt.Sprintf("seqOf: %T", p))
		}
	}
	return out
}

// args builds one call's keys and ARGV.
func args(a ...string) []string { return a }

func luaLimiterSeqs() []luaSeq {
	const T = "1700000000000" // a clock in ms, passed in ARGV
	ms := func(d int64) string { return strconv.FormatInt(1700000000000+d, 10) }
	scgKeys := func(id string) []string {
		return []string{"request_rate_limiter.{" + id + "}.tokens", "request_rate_limiter.{" + id + "}.timestamp"}
	}
	scg := func(id string, argv ...string) []string { return append(scgKeys(id), argv...) }
	a, at := scgKeys("a"), scgKeys("t")
	var seqs []luaSeq
	add := func(name string, parts ...any) { seqs = append(seqs, luaSeq{name: name, calls: seqOf(parts...)}) }

	add("SpringCloudGatewayTokenBucket",
		runScript(scgRateLimiterLua, 2, nil,
			// rate 1/s, capacity 3: three allowed, the fourth denied.
			scg("a", "1", "3", "1000", "1"), scg("a", "1", "3", "1000", "1"), scg("a", "1", "3", "1000", "1"),
			scg("a", "1", "3", "1000", "1"),
			// half a token: denied, 0.5 stored as a float string.
			scg("a", "1", "3", "1000.5", "1"),
			scg("a", "1", "3", "1001", "1"),
			// more than the capacity.
			scg("a", "1", "3", "1010", "5"),
			// a clock that went back: no refill.
			scg("a", "1", "3", "1005", "1"),
			// rate 0.5: fractional tokens, truncated in the reply.
			scg("a", "0.5", "3", "1012", "1"),
			// fill time 1/3 s: ttl 0, nothing written.
			scg("a", "3", "1", "2000", "1"),
			// a bucket of a different key.
			scg("b", "10", "20", "1", "7"),
		),
		lc("GET", a[0]), lc("GET", a[1]), lc("TYPE", a[0]), lcNear(msTol, "PTTL", a[0]), lcNear(msTol, "PTTL", a[1]),
		lc("MGET", "request_rate_limiter.{b}.tokens", "request_rate_limiter.{b}.timestamp"),
		// The clock from TIME (ARGV[3] is not a number): at 0.001 token/s
		// a second more or less refills nothing the reply shows.
		runScript(scgRateLimiterLua, 2, nil,
			scg("t", "0.001", "3", "", "1"), scg("t", "0.001", "3", "", "1"), scg("t", "0.001", "3", "", "1"),
			scg("t", "0.001", "3", "", "1")),
		lcNear(msTol, "PTTL", at[0]), lcNear(msTol, "PTTL", at[1]),
		lcFloat(5, "GET", at[1]),
	)

	gcra := func(now, burst, rate, period, cost string) []string {
		return args("gcra:user", now, burst, rate, period, cost)
	}
	add("LosantGCRA",
		runScript(losantGCRALua, 1, nil,
			// burst 3 at 1/s: three allowed, then limited.
			gcra(T, "3", "1", "1000", "1"), gcra(T, "3", "1", "1000", "1"), gcra(T, "3", "1", "1000", "1"),
			gcra(T, "3", "1", "1000", "1"),
			gcra(ms(500), "3", "1", "1000", "1"),
			gcra(ms(1000), "3", "1", "1000", "1"),
			// peek (cost 0), and a cost of 2.
			gcra(ms(1000), "3", "1", "1000", "0"),
			gcra(ms(5000), "3", "1", "1000", "2"),
			gcra(ms(5000), "3", "1", "1000", "0"),
			// 3 per second: an emission interval of 333.33 ms, a float
			// theoretical arrival time.
			gcra(ms(6000), "3", "3", "1000", "1"), gcra(ms(6000), "3", "3", "1000", "1"),
			gcra(ms(6001), "3", "3", "1000", "1"), gcra(ms(6001), "3", "3", "1000", "1"),
			// a cost over the burst.
			gcra(ms(9000), "3", "3", "1000", "10"),
			// a fresh key at a fractional clock.
			args("gcra:other", "1700000000000.25", "2", "7", "1000", "1"),
		),
		lc("GET", "gcra:user"), lc("GET", "gcra:other"), lcNear(msTol, "PTTL", "gcra:user"), lcNear(msTol, "PTTL", "gcra:other"),
	)

	// rwz/redis-gcra on Redis's clock: burst 5 at one per 1000 s, so the
	// decisions and counts are exact and the times (strings of seconds)
	// move by the time the calls take.
	rwz := func(cost string) []string { return args("rwz:user", "5", "1", "1000", cost) }
	add("RwzGCRAOnTime",
		runScriptFields(rwzGCRALua, 1, "eeff", 5,
			rwz("1"), rwz("1"), rwz("1"), rwz("1"), rwz("1"), rwz("1"), rwz("1"), rwz("0"), rwz("2")),
		lcNear(secTol, "TTL", "rwz:user"), lcFloat(5, "GET", "rwz:user"), lc("TYPE", "rwz:user"),
	)

	tb := func(key, capacity, rate, now, cost string) []string { return args(key, capacity, rate, now, cost) }
	add("ArticleTokenBucket",
		runScript(articleTokenBucketLua, 1, nil,
			tb("rl:tb:a", "3", "1", T, "1"), tb("rl:tb:a", "3", "1", T, "1"), tb("rl:tb:a", "3", "1", T, "1"),
			tb("rl:tb:a", "3", "1", T, "1"),
			tb("rl:tb:a", "3", "1", ms(500), "1"),
			tb("rl:tb:a", "3", "1", ms(1000), "1"),
			tb("rl:tb:a", "3", "1", ms(1250), "2"),
			// a clock that went back refills nothing.
			tb("rl:tb:a", "3", "1", ms(1000), "1"),
			tb("rl:tb:a", "3", "1", ms(100000), "1"),
			// 0.3 tokens/s: 3/0.3*1000 is 10000.000000000002, so the
			// PEXPIRE is 11001.
			tb("rl:tb:b", "3", "0.3", T, "1"), tb("rl:tb:b", "3", "0.3", ms(333), "2"), tb("rl:tb:b", "3", "0.3", ms(334), "1"),
		),
		lc("HMGET", "rl:tb:a", "tokens", "ts", "nosuch"), lc("HMGET", "rl:tb:b", "tokens", "ts"),
		lc("HLEN", "rl:tb:a"), lc("TYPE", "rl:tb:a"),
		lcNear(msTol, "PTTL", "rl:tb:a"), lcNear(msTol, "PTTL", "rl:tb:b"),
	)
	// The same on Redis's clock, at one token per 1000 s: the decisions
	// and floor(tokens) are exact, retry_ms moves by the calls' time.
	add("ArticleTokenBucketOnTime",
		runScriptFields(articleTokenBucketTimeLua, 1, "eei", 5000,
			tb("rl:tb:t", "3", "0.001", "", "1"), tb("rl:tb:t", "3", "0.001", "", "1"), tb("rl:tb:t", "3", "0.001", "", "1"),
			tb("rl:tb:t", "3", "0.001", "", "1"), tb("rl:tb:t", "3", "0.001", "", "2")),
		lcNear(msTol, "PTTL", "rl:tb:t"), lc("HLEN", "rl:tb:t"), lc("HEXISTS", "rl:tb:t", "ts"),
	)

	sw := func(now, member string) []string { return args("sw:user", now, "1000", "3", member) }
	add("SlidingWindowLog",
		runScript(slidingWindowLogLua, 1, nil,
			sw("1000", "r1"), sw("1100", "r2"), sw("1200", "r3"),
			sw("1300", "r4"), sw("1999", "r5"),
			// 1000 leaves the window at 2000 (ZREMRANGEBYSCORE is
			// inclusive).
			sw("2000", "r6"), sw("2100.5", "r7"),
			// the same member again moves its score.
			sw("3150", "r7"), sw("3150", "r8"), sw("3150", "r9"), sw("3151", "r10"),
		),
		lc("ZRANGE", "sw:user", "0", "-1", "WITHSCORES"), lc("ZCARD", "sw:user"), lcNear(msTol, "PTTL", "sw:user"),
	)
	return seqs
}

// TestLuaLimiterScripts runs luaLimiterSeqs on redis-server and on
// rlserver, in RESP2 and RESP3.
func TestLuaLimiterScripts(t *testing.T) {
	runLuaSeqs(t, luaLimiterSeqs())
}

// runLuaSeqs runs each of seqs on redis-server and on an rlserver with 4
// shards, in RESP2 and RESP3, a subtest each.
func runLuaSeqs(t *testing.T, seqs []luaSeq) {
	redisAddr := realRedis(t)
	s := start(t, opts{args: []string{"--shards", "4"}})
	for _, proto := range []int{2, 3} {
		for _, sq := range seqs {
			t.Run(fmt.Sprintf("RESP%d/%s", proto, sq.name), func(t *testing.T) {
				runLuaSeq(t, proto, sq, redisAddr, s.addr)
			})
		}
	}
}

// runLuaSeq runs one sequence on both servers, call by call: each call on
// Redis, then on rlserver. The keyspace and the script cache start empty.
// RL_LUA_SHOW=1 logs rlserver's replies.
func runLuaSeq(t *testing.T, proto int, sq luaSeq, redisAddr, rlAddr string) {
	nconn := 1
	for _, c := range sq.calls {
		nconn = max(nconn, c.conn+1)
	}
	both := openBoth(t, proto, nconn, redisAddr, rlAddr, []string{"FLUSHALL"}, []string{"SCRIPT", "FLUSH"})
	for i, c := range sq.calls {
		wants, gots := both.run(c.conn, c.args)
		want, got := wants[0], gots[0]
		cmp, note := c.cmp, c.note
		if cmp == nil {
			cmp, note = luaExact, "exactly"
		}
		if os.Getenv("RL_LUA_SHOW") != "" {
			t.Logf("%s -> %v", shortArgs(c.args), got)
		}
		if !cmp(want, got) {
			t.Errorf("call %d (connection %d, compared %s): %s\n\tredis-server: %v\n\trlserver:     %v",
				i+1, c.conn, note, shortArgs(c.args), want, got)
		}
	}
}

// shortArgs quotes a command for a message, with a script's text cut to
// its first line.
func shortArgs(args []string) string {
	a := append([]string(nil), args...)
	for i, s := range a {
		if len(s) > 60 || strings.Contains(s, "\n") {
			first, _, _ := strings.Cut(strings.TrimSpace(s), "\n")
			if len(first) > 50 {
				first = first[:50]
			}
			a[i] = strconv.Quote(first + "...")
		}
	}
	return quoteArgs(a)
}

// scriptSHA is Redis's name for a script: the hex SHA1 of its text.
func scriptSHA(src string) string {
	sum := sha1.Sum([]byte(src))
	return hex.EncodeToString(sum[:])
}

// ev is EVAL src with keys... (numkeys counted) then ARGV after "--".
func ev(src string, keysArgs ...string) luaCall {
	return lc(evArgs("EVAL", src, keysArgs...)...)
}

func evArgs(cmd, src string, keysArgs ...string) []string {
	keys, argv := keysArgs, []string(nil)
	for i, a := range keysArgs {
		if a == "--" {
			keys, argv = keysArgs[:i], keysArgs[i+1:]
			break
		}
	}
	out := append([]string{cmd, src, strconv.Itoa(len(keys))}, keys...)
	return append(out, argv...)
}

func luaSandboxSeqs() []luaSeq {
	var seqs []luaSeq
	add := func(name string, parts ...any) { seqs = append(seqs, luaSeq{name: name, calls: seqOf(parts...)}) }
	writeSrc := "return redis.call('set', KEYS[1], 'x')"
	readSrc := "return redis.call('get', KEYS[1])"

	add("RedisCallUnknownCommand",
		ev("return redis.call('nosuchcommand', 'x')"),
		ev("return redis.pcall('nosuchcommand')"),
		ev("local r = redis.pcall('nosuchcommand') return {type(r), r.err}"),
		ev("local ok, e = pcall(redis.call, 'nosuchcommand') return {tostring(ok), e}"),
		ev("return redis.call('get')"),
		ev("return redis.pcall('get')"),
		ev("return redis.call()"),
		ev("return redis.call('get', {})"),
		ev("return redis.call('multi')"),
		ev("return redis.call('eval', 'return 1', '0')"),
		ev("return redis.call('watch', KEYS[1])", "k"),
		// SORT of a set BY a constant, from a script: sorted, as Redis
		// sorts it for scripts.
		ev("redis.call('sadd', KEYS[1], 'c', 'a', 'b', 'aa', 'z') return redis.call('sort', KEYS[1], 'by', 'nosort', 'alpha')", "sortset"),
		ev("return redis.call('sort', KEYS[1], 'by', 'nosort', 'alpha', 'desc')", "sortset"),
		// Redis 7.0's noscript commands, after the arity check.
		ev("return redis.pcall('blpop', KEYS[1], 0)", "k"),
		ev("return redis.pcall('brpop', KEYS[1], 0)", "k"),
		ev("return redis.pcall('blmove', KEYS[1], KEYS[1], 'left', 'right', 0)", "k"),
		ev("return redis.pcall('bzpopmin', KEYS[1], 0)", "k"),
		ev("return redis.pcall('blpop', KEYS[1])", "k"),
		// commands a script may call besides the data commands.
		ev("return {redis.call('ping'), redis.call('echo', 'e'), redis.call('exists', KEYS[1]), redis.call('type', KEYS[1]), redis.call('ttl', KEYS[1])}", "k"),
	)
	add("ServerCommandsFromScripts",
		ev("return redis.call('dbsize')"),
		ev("return redis.call('select', 0)"),
	)
	add("ErrorInsidePcall",
		lc("SET", "s", "abc"),
		ev("return {pcall(function() error('inner') end)}"),
		ev("local ok, e = pcall(function() error('inner') end) return e"),
		ev("local ok, e = pcall(function() error({err='MYERR table'}) end) return e"),
		ev("local ok, e = pcall(error, {err='X y'}) return e"),
		ev("return {pcall(function() return 1, 2 end)}"),
		ev("local ok, e = pcall(redis.call, 'incr', KEYS[1]) return {tostring(ok), e}", "s"),
		ev("local ok, e = pcall(function() return redis.call('hget', KEYS[1], 'f') end) return {tostring(ok), e}", "s"),
		ev("return redis.pcall('incr', KEYS[1])", "s"),
		ev("local r = redis.pcall('incr', KEYS[1]) return r.err", "s"),
		ev("return redis.call('incr', KEYS[1])", "s"),
		ev("return redis.call('hset', KEYS[1], 'f', 'v')", "s"),
		ev("error('boom')"),
		ev("local a = 1\nlocal b = 2\nerror('third')"),
		ev("error('nopos', 0)"),
		ev("error({err='MYCODE from error'})"),
		ev("local function f()\n error('deep')\nend\nf()"),
		ev("local ok = pcall(redis.call, 'incr', KEYS[1]) return redis.call('get', KEYS[1])", "s"),
	)
	add("Shebang",
		ev("#!lua\nreturn 1"),
		ev("#!lua flags=\nreturn 2"),
		ev("#!not-lua\nreturn 1"),
		ev("#!lua badger=data\nreturn 1"),
		ev("#!lua flags=allow-oom,what?\nreturn 1"),
		ev("#!lua"),
		ev("#!lua flags=no-writes\nreturn redis.call('set', KEYS[1], 'x')", "sb"),
		ev("#!lua flags=no-writes,allow-stale\nreturn redis.call('get', KEYS[1])", "sb"),
		ev("#!lua flags=allow-oom\nreturn redis.call('set', KEYS[1], 'y')", "sb"),
		ev("#!lua\n\nerror('line three')"), // line numbers count the #! line
		lc(evArgs("EVAL_RO", "#!lua\nreturn redis.call('get', KEYS[1])", "sb")...),
		lc(evArgs("EVAL_RO", "#!lua flags=no-writes\nreturn redis.call('get', KEYS[1])", "sb")...),
		lc("SCRIPT", "LOAD", "#!lua badger\nreturn 1"),
	)
	add("Globals",
		ev("x = 1"),
		ev("function f() end"),
		ev("_G.x = 1"),
		ev("return y"),
		ev("return undefined_global.field"),
		ev("return rawget(_G, 'nope') == nil"),
		ev("string.x = 1"),
		ev("redis.call = nil"),
		ev("print(1)"),
		ev("return os"),
		ev("return loadfile"),
		ev("return {type(pcall), type(loadstring), type(cjson), type(bit), type(struct), type(cmsgpack)}"),
		ev("local x = 5 local function g(a) return a * 2 end return g(x)"),
		ev("KEYS[1] = 'changed' return KEYS[1]", "k"),
	)
	add("WriteAfterTime",
		ev("local t = redis.call('time') return redis.call('set', KEYS[1], 'x')", "k"),
		lc("GET", "k"),
		ev("local t = redis.call('TIME') redis.call('incr', KEYS[1]) return {#t, type(t[1]), redis.call('get', KEYS[1])}", "n"),
		ev("local t = redis.call('TIME') return tonumber(t[2]) < 1000000", "n"),
		lc("GET", "n"),
	)
	add("NestedTablesAndNilHoles",
		ev("return {1, 2, nil, 4}"),
		ev("return {1, {2, nil, 3}, nil, 4}"),
		ev("return {nil, 1}"),
		ev("return {{}, {{'a', {false, true}}}, {}}"),
		ev("return {1, 'two', 3.5, true, false}"),
		ev("return {'a', {ok='S'}, {err='E nested'}}"),
		ev("return {1, 2, foo='bar'}"),
		ev("return {}"),
		ev("return {foo='bar'}"),
		ev("local t = {} t[1] = 'a' t[3] = 'c' return t"),
	)
	add("Floats",
		ev("return 3.99"),
		ev("return -3.99"),
		ev("return {1.5, 2.9, -0.5, -0.0}"),
		ev("return 0.1 + 0.2"),
		ev("return tostring(0.1 + 0.2)"),
		ev("return tostring(1/3)"),
		ev("return 2^53"),
		ev("return tostring(2^53)"),
		ev("return 1e15 + 0.5"),
		ev("return tonumber('1.5e+20')"),
		ev("return tostring(tonumber('0x10') + tonumber(' 5 ') + tonumber('.5'))"),
		ev("redis.call('set', KEYS[1], 0.1) return redis.call('get', KEYS[1])", "f"),
		ev("redis.call('set', KEYS[1], 100) return redis.call('get', KEYS[1])", "f"),
		ev("redis.call('set', KEYS[1], 1/3) return redis.call('get', KEYS[1])", "f"),
		ev("redis.call('set', KEYS[1], 1e20) return redis.call('get', KEYS[1])", "f"),
		ev("return redis.call('incrbyfloat', KEYS[1], 1.5)", "g"),
		ev("return tonumber(redis.call('get', KEYS[1])) * 2", "g"),
		ev("return redis.call('incrby', KEYS[1], 2.0)", "i"),
		ev("return redis.pcall('incrby', KEYS[1], 2.5)", "i"),
		ev("redis.call('zadd', KEYS[1], 1.5, 'a', 0.1, 'b') return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", "z"),
		ev("return redis.call('zscore', KEYS[1], 'b')", "z"),
		ev("return redis.call('zincrby', KEYS[1], 0.2, 'b')", "z"),
		lc("GET", "f"),
	)
	add("StatusAndErrorTables",
		ev("return {ok='FINE'}"),
		ev("return {err='MYERR bad'}"),
		ev("return {err='plain'}"),
		ev("return redis.status_reply('PONG')"),
		ev("return redis.error_reply('MY code here')"),
		ev("return redis.error_reply('foo')"),
		ev("return redis.call('set', KEYS[1], 'x')", "k"),
		ev("return redis.call('set', KEYS[1], 'x').ok", "k"),
		ev("return type(redis.call('set', KEYS[1], 'x'))", "k"),
		ev("return redis.call('get', KEYS[1])", "missing"),
		ev("return tostring(redis.call('get', KEYS[1]))", "missing"),
		ev("return redis.call('hmget', KEYS[1], 'a', 'b')", "missing"),
		ev("return {redis.call('exists', KEYS[1]), redis.call('del', KEYS[1]), redis.call('exists', KEYS[1])}", "k"),
	)
	add("SetResp3",
		lc("HSET", "h", "a", "1"), lc("ZADD", "z", "2.5", "m"),
		ev("redis.setresp(3) return redis.call('hgetall', KEYS[1])", "h"),
		ev("redis.setresp(3) return redis.call('hgetall', KEYS[1]).map.a", "h"),
		ev("redis.setresp(3) return redis.call('hgetall', KEYS[1])", "nosuch"),
		ev("return redis.call('hgetall', KEYS[1])", "h"),
		ev("redis.setresp(3) return redis.call('zscore', KEYS[1], 'm')", "z"),
		ev("redis.setresp(3) return redis.call('zscore', KEYS[1], 'm').double * 2", "z"),
		ev("redis.setresp(3) return redis.call('zrange', KEYS[1], 0, -1, 'withscores')", "z"),
		ev("redis.setresp(3) return redis.call('get', KEYS[1]) == nil", "nosuch"),
		ev("redis.setresp(3) return redis.call('get', KEYS[1])", "nosuch"),
		ev("redis.setresp(3) return redis.call('set', KEYS[1], 'v')", "s"),
		ev("redis.setresp(3) return true"),
		ev("redis.setresp(3) return false"),
		ev("return true"),
		ev("return false"),
		ev("return {double=3.5}"),
		ev("return {double=1/3}"),
		ev("return {map={a=1}}"),
		ev("return {set={a=true}}"),
		ev("return {big_number='123456789012345678901234567890'}"),
		ev("redis.setresp(4)"),
		ev("redis.setresp(2) return redis.call('hgetall', KEYS[1])", "h"),
	)
	add("EvalRO",
		lc("SET", "k", "v"),
		lc(evArgs("EVAL_RO", writeSrc, "k")...),
		lc(evArgs("EVAL_RO", readSrc, "k")...),
		lc(evArgs("EVAL_RO", "return redis.pcall('set', KEYS[1], 'y')", "k")...),
		lc(evArgs("EVAL_RO", "local ok = pcall(redis.call, 'incr', KEYS[1]) return redis.call('get', KEYS[1])", "k")...),
		lc(evArgs("EVAL_RO", "return redis.call('expire', KEYS[1], 10)", "k")...),
		lc("SCRIPT", "LOAD", writeSrc), lc("SCRIPT", "LOAD", readSrc),
		lc(evArgs("EVALSHA_RO", scriptSHA(writeSrc), "k")...),
		lc(evArgs("EVALSHA_RO", scriptSHA(readSrc), "k")...),
		lc(evArgs("EVALSHA_RO", strings.Repeat("0", 40), "k")...),
		lc("GET", "k"), lc("TTL", "k"),
	)
	add("ScriptCommands",
		lc("SCRIPT", "LOAD", "return 1"),
		lc("SCRIPT", "EXISTS", scriptSHA("return 1"), strings.ToUpper(scriptSHA("return 1")), strings.Repeat("0", 40), "short"),
		lc("EVALSHA", strings.ToUpper(scriptSHA("return 1")), "0"),
		lc("SCRIPT", "LOAD", "return 1"),
		lc("SCRIPT", "FLUSH"),
		lc("SCRIPT", "EXISTS", scriptSHA("return 1")),
		lc("EVALSHA", scriptSHA("return 1"), "0"),
		lc("EVALSHA", "abc", "0"),
		// EVAL caches the script it runs.
		ev("return 2"),
		lc("SCRIPT", "EXISTS", scriptSHA("return 2")),
		lc("EVALSHA", scriptSHA("return 2"), "0"),
		lc("SCRIPT", "FLUSH", "ASYNC"), lc("SCRIPT", "FLUSH", "sync"), lc("SCRIPT", "FLUSH", "bogus"), lc("SCRIPT", "FLUSH", "SYNC", "ASYNC"),
		lc("SCRIPT", "EXISTS", scriptSHA("return 2")),
		lc("SCRIPT", "LOAD", "return 1 +"),
		ev("return 1 +"),
		lc("SCRIPT", "LOAD"), lc("SCRIPT", "EXISTS"), lc("SCRIPT", "KILL"), lc("SCRIPT", "KILL", "x"), lc("SCRIPT", "BOGUS"), lc("SCRIPT"),
		lc("EVAL"), lc("EVAL", "return 1"), lc("EVALSHA", scriptSHA("return 1")),
		// the cache is the server's, not the connection's.
		lc("SCRIPT", "LOAD", "return 3"), lc1("EVALSHA", scriptSHA("return 3"), "0"),
	)
	add("NumKeys",
		lc("EVAL", "return 1", "2", "a"),
		lc("EVAL", "return 1", "-1", "a"),
		lc("EVAL", "return 1", "x", "a"),
		lc("EVAL", "return 1", "1.5", "a"),
		lc("EVAL", "return 1", "", "a"),
		lc("EVAL", "return 1", "99999999999999999999"),
		lc("EVAL", "return 1", "1"),
		lc("EVALSHA", strings.Repeat("0", 40), "3", "a"),
		lc("EVALSHA", strings.Repeat("0", 40), "-1"),
		lc("EVAL_RO", "return 1", "2", "a"),
		lc("EVALSHA_RO", strings.Repeat("0", 40), "x"),
		lc("EVAL", "return {#KEYS, #ARGV, KEYS[1], ARGV[1], ARGV[2]}", "1", "a", "b", "c"),
		lc("EVAL", "return {#KEYS, #ARGV}", "2", "a", "b"),
		lc("EVAL", "return {#KEYS, #ARGV}", "0", "a", "b"),
		lc("EVAL", "return {#KEYS, #ARGV}", "0"),
	)
	add("NumKeysLeadingZero",
		lc("EVAL", "return ARGV[1] .. KEYS[1]", "01", "k", "v"),
	)
	add("ToNumber",
		ev("return tonumber('1e3')"),
		ev("return tostring(tonumber('1e-05'))"),
		ev("return tostring(tonumber('99999999999999999999'))"),
		ev("return tostring(tonumber('inf'))"),
		ev("return tonumber('-0x10')"),
		ev("return tonumber('0x1p4')"),
		// A limiter that reads back a number Redis wrote with %.17g.
		ev("redis.call('set', KEYS[1], 1e20) return tostring(tonumber(redis.call('get', KEYS[1])) or 'missing')", "n"),
	)
	add("EvalInMulti",
		lc("MULTI"),
		ev("return redis.call('incr', KEYS[1])", "m"),
		ev("redis.call('incr', KEYS[1]) error('in multi')", "m"),
		ev("return redis.call('get', KEYS[1])", "m"),
		lc("EXEC"),
	)
	add("EvalAndWatch",
		lc("WATCH", "w"),
		lc1(evArgs("EVAL", "return redis.call('set', KEYS[1], 'other')", "w")...),
		lc("MULTI"), lc("SET", "w", "mine"), lc("EXEC"),
		lc("GET", "w"),
		// a script that only reads a watched key does not fail EXEC.
		lc("WATCH", "w"),
		lc1(evArgs("EVAL", "return redis.call('get', KEYS[1])", "w")...),
		lc("MULTI"), lc("GET", "w"), lc("EXEC"),
	)
	return seqs
}

// TestLuaSandboxAndConversions runs luaSandboxSeqs on redis-server and
// on rlserver, in RESP2 and RESP3.
func TestLuaSandboxAndConversions(t *testing.T) {
	runLuaSeqs(t, luaSandboxSeqs())
}

// luaWritesBeforeErrorSeq: a script's writes before an error stay, as in
// Redis (a script is not a transaction); keys on several shards.
func luaWritesBeforeErrorSeq() luaSeq {
	return luaSeq{name: "WritesBeforeErrorStay", calls: seqOf(
		ev("redis.call('set',KEYS[1],'1'); error('x')", "k"),
		lc("GET", "k"),
		ev("redis.call('set', KEYS[1], '2') redis.call('hset', KEYS[2], 'f', 'v') return redis.call('incr', KEYS[3])", "k", "h", "s"),
		lc("MGET", "k", "s"), lc("HGETALL", "h"),
		lc("SET", "s", "str"),
		ev("redis.call('incr', KEYS[1]) redis.call('pexpire', KEYS[1], 100000) redis.call('incr', KEYS[2])", "k", "s"),
		lc("GET", "k"), lcNear(msTol, "PTTL", "k"),
		// an error caught by pcall goes on, and so do the writes after it.
		ev("redis.call('set', KEYS[1], 'a') pcall(redis.call, 'incr', KEYS[2]) redis.call('append', KEYS[1], 'b') error('late')", "k", "s"),
		lc("GET", "k"),
		// a script that does not compile writes nothing.
		ev("redis.call('set', KEYS[1], 'never') return +", "k"),
		lc("GET", "k"),
	)}
}

// TestLuaWritesBeforeErrorStay runs luaWritesBeforeErrorSeq on
// redis-server and on rlserver, in RESP2 and RESP3.
func TestLuaWritesBeforeErrorStay(t *testing.T) {
	redisAddr := realRedis(t)
	s := start(t, opts{args: []string{"--shards", "4"}})
	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("RESP%d", proto), func(t *testing.T) {
			runLuaSeq(t, proto, luaWritesBeforeErrorSeq(), redisAddr, s.addr)
		})
	}
}

// TestLuaCallsNativeLimiter: redis.call reaches rlserver's own limiter
// commands (issue 21), so a script can wrap RL.ALLOW: the script's reply
// is RL.ALLOW's.
func TestLuaCallsNativeLimiter(t *testing.T) {
	s := start(t, opts{args: []string{"--shards", "4"}})
	c := s.raw(t)
	src := "return redis.call('RL.ALLOW', KEYS[1], ARGV[1], ARGV[2], ARGV[3])"
	for i := range 4 {
		c.send(respCommand("EVAL", src, "1", "{b}script", "3", slowRate, "1"))
		got := c.read()
		c.send(respCommand("RL.ALLOW", "{b}direct", "3", slowRate, "1"))
		want := c.read()
		// The countdowns may differ by the time between the two.
		same := want.kind == got.kind && len(want.elems) == 4 && len(got.elems) == 4
		for j := 0; same && j < 4; j++ {
			same = nearValue(want.elems[j], got.elems[j], int64(min(j/2, 1))*1000)
		}
		if !same {
			t.Errorf("call %d: the script answers %v, RL.ALLOW answers %v", i+1, got, want)
		}
	}
}
