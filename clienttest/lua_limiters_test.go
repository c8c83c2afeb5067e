package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Issue 21: the Lua-based limiters of two npm libraries run unchanged
// against rlserver and give the answers a real redis-server gives.
//
// compat/lua_limiters.js runs them through ioredis (the versions
// package-lock.json pins) and records every command ioredis writes with
// the reply it gets:
//
//   - express-rate-limit with rate-limit-redis (TestLuaExpressRateLimit):
//     the store loads two scripts by SCRIPT LOAD and runs them by EVALSHA
//     (increment: PTTL, then SET key 1 PX window or INCR; get: GET, PTTL),
//     resetKey is DEL, and a NOSCRIPT reply makes it load the script again.
//   - rate-limiter-flexible's RateLimiterRedis (TestLuaRateLimiterRedis):
//     one script (SET key 0 EX d NX; INCRBY; PTTL; EXPIRE when PTTL is -1)
//     through ioredis's defineCommand, which writes EVAL the first time on
//     a connection and EVALSHA after; limiter.get is MULTI GET PTTL EXEC.
//
// Each runs in RESP2 (ioredis's default) and RESP3 on both servers; the
// libraries must decide the same, and the commands and replies must be the
// same, with the milliseconds left of a window (which move with the clock)
// compared as a range.

// luaCmd is one command lua_limiters.js recorded.
type luaCmd struct {
	Cmd   []string `json:"cmd"`
	Reply any      `json:"reply"`
	Error *string  `json:"error"`
}

// luaHits is a rate-limit-redis ClientRateLimitInfo: totalHits (null when
// the library parsed NaN) and resetTime as milliseconds from now.
type luaHits struct {
	TotalHits *int64 `json:"totalHits"`
	MsToReset int64  `json:"msToReset"`
}

// luaHTTP is one request to the express app.
type luaHTTP struct {
	Status     int     `json:"status"`
	Remaining  *int64  `json:"remaining"`
	RetryAfter *string `json:"retryAfter"`
}

// luaRun is what compat/lua_limiters.js prints (the fields of both modes).
type luaRun struct {
	Versions map[string]string `json:"versions"`
	Commands []luaCmd          `json:"commands"`

	// erl
	Store *struct {
		Increments          []luaHits `json:"increments"`
		Passed              int       `json:"passed"`
		Limited             int       `json:"limited"`
		Get                 luaHits   `json:"get"`
		GetAfterReset       luaHits   `json:"getAfterReset"`
		IncrementAfterReset luaHits   `json:"incrementAfterReset"`
	} `json:"store"`
	Noscript []luaHits `json:"noscript"`
	App      *struct {
		Requests   []luaHTTP `json:"requests"`
		Passed     int       `json:"passed"`
		Limited    int       `json:"limited"`
		AfterReset luaHTTP   `json:"afterReset"`
	} `json:"app"`

	// rlf
	rlfResults
}

// runLua runs compat/lua_limiters.js once; ok is false (and the test has
// failed) when it did not finish.
func runLua(t *testing.T, mode, proto, addr, prefix string) (luaRun, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "lua_limiters.js", mode, proto, addr, prefix)
	cmd.Dir = "compat"
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Errorf("node lua_limiters.js %s %s %s: %v\nstderr:\n%s", mode, proto, addr, err, stderr.String())
		return luaRun{}, false
	}
	var run luaRun
	if err := json.Unmarshal(out, &run); err != nil {
		t.Errorf("node lua_limiters.js %s: %v\noutput: %s", mode, err, out)
		return luaRun{}, false
	}
	if s := stderr.String(); s != "" {
		t.Logf("node lua_limiters.js %s %s %s stderr:\n%s", mode, proto, addr, s)
	}
	return run, true
}

// luaTargets starts rlserver and a redis-server.
func luaTargets(t *testing.T) []struct{ name, addr string } {
	t.Helper()
	redisAddr := realRedis(t)
	s := start(t, opts{})
	return []struct{ name, addr string }{{"redis-server", redisAddr}, {"rlserver", s.addr}}
}

// luaWindow reports whether ms is a time left in a 60 s window.
func luaWindow(ms int64) bool { return ms > 0 && ms <= 60000 }

// luaShape is a run's commands with each reply's milliseconds left in a
// window (an integer in (0, 60000] at index 1 of an EVAL, EVALSHA or EXEC
// reply, the PTTL the scripts return) replaced by "ms", for comparing two
// servers.
func luaShape(cmds []luaCmd) []luaCmd {
	out := make([]luaCmd, len(cmds))
	for i, c := range cmds {
		out[i] = c
		name := strings.ToLower(c.Cmd[0])
		a, ok := c.Reply.([]any)
		if !ok || len(a) != 2 || (name != "eval" && name != "evalsha" && name != "exec") {
			continue
		}
		if f, ok := a[1].(float64); ok && f == float64(int64(f)) && luaWindow(int64(f)) {
			out[i].Reply = []any{a[0], "ms"}
		}
	}
	return out
}

// compareLuaCommands checks that two servers got the same commands and
// gave the same replies, naming the first difference.
func compareLuaCommands(t *testing.T, what string, names [2]string, runs [2]luaRun) {
	t.Helper()
	a, b := luaShape(runs[0].Commands), luaShape(runs[1].Commands)
	for i := 0; i < len(a) || i < len(b); i++ {
		var ca, cb *luaCmd
		if i < len(a) {
			ca = &a[i]
		}
		if i < len(b) {
			cb = &b[i]
		}
		if ca == nil || cb == nil || !reflect.DeepEqual(*ca, *cb) {
			t.Errorf("%s: command %d of %d/%d differs:\n%s: %s\n%s: %s", what, i+1, len(a), len(b),
				names[0], luaCmdString(ca, runs[0].Commands, i), names[1], luaCmdString(cb, runs[1].Commands, i))
			return
		}
	}
}

// luaNames is a run's command names (SCRIPT with its subcommand), upper
// case.
func luaNames(cmds []luaCmd) []string {
	out := make([]string, len(cmds))
	for i, c := range cmds {
		out[i] = strings.ToUpper(c.Cmd[0])
		if out[i] == "SCRIPT" && len(c.Cmd) > 1 {
			out[i] += " " + strings.ToUpper(c.Cmd[1])
		}
	}
	return out
}

// luaRepeat is n copies of name.
func luaRepeat(name string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = name
	}
	return out
}

// wantERLNames is what rate-limit-redis sends in mode erl: two SCRIPT
// LOADs at init, an EVALSHA per increment and get, DEL for resetKey, and
// after SCRIPT FLUSH a NOSCRIPT EVALSHA, SCRIPT LOAD and the EVALSHA again.
var wantERLNames = slices.Concat(
	luaRepeat("SCRIPT LOAD", 2), luaRepeat("EVALSHA", 8), []string{"DEL", "EVALSHA", "EVALSHA"},
	[]string{"SCRIPT FLUSH", "EVALSHA", "SCRIPT LOAD", "EVALSHA", "EVALSHA"},
	luaRepeat("SCRIPT LOAD", 2), luaRepeat("EVALSHA", 7), []string{"DEL", "EVALSHA"})

// wantRLFNames is what RateLimiterRedis sends in mode rlf: EVAL the first
// time on the connection, EVALSHA after, and MULTI GET PTTL EXEC for get.
var wantRLFNames = slices.Concat([]string{"EVAL"}, luaRepeat("EVALSHA", 12), []string{"MULTI", "GET", "PTTL", "EXEC"})

func luaCmdString(c *luaCmd, raw []luaCmd, i int) string {
	if c == nil {
		return "(none)"
	}
	r := raw[i]
	args, _ := json.Marshal(r.Cmd)
	if r.Error != nil {
		return fmt.Sprintf("%s -> error %q", args, *r.Error)
	}
	reply, _ := json.Marshal(r.Reply)
	return fmt.Sprintf("%s -> %s", args, reply)
}

// TestLuaExpressRateLimit runs express-rate-limit's Redis store,
// rate-limit-redis, with a limit of 5 a 60 s window, on redis-server and on
// rlserver (see compat/lua_limiters.js, mode erl):
//
//   - the store driven directly: 7 increments count 1..7 (5 within the
//     limit, 2 over it) with the window's time left in (0, 60000]; get
//     after them 7; after resetKey get finds nothing ([nil, -2], which the
//     library parses as NaN hits) and an increment starts at 1;
//   - after SCRIPT FLUSH, an increment gets NOSCRIPT, loads the script
//     again and counts 1, the next 2;
//   - an express app under the middleware: 7 requests give 200 five times
//     (RateLimit remaining 4..0) and 429 twice (Retry-After 60 or less);
//     after limiter.resetKey the next request is 200 with 4 remaining.
func TestLuaExpressRateLimit(t *testing.T) {
	compatNode(t, "ioredis", "express-rate-limit", "rate-limit-redis", "express")
	runLuaModes(t, "erl", "express-rate-limit", wantERLNames, func(server, proto string, run luaRun) string {
		name := fmt.Sprintf("%s RESP%s (express-rate-limit %s, rate-limit-redis %s, express %s, ioredis %s)", server, proto,
			run.Versions["express-rate-limit"], run.Versions["rate-limit-redis"], run.Versions["express"], run.Versions["ioredis"])
		checkERL(t, name, run)
		return name
	})
}

// runLuaModes runs compat/lua_limiters.js in mode on redis-server and on
// rlserver, in RESP2 and in RESP3. check checks each run and returns the
// name to report it by; each must send wantNames, and the two servers must get the same commands and give the
// same replies (what names the library in a message).
func runLuaModes(t *testing.T, mode, what string, wantNames []string, check func(server, proto string, run luaRun) (name string)) {
	t.Helper()
	targets := luaTargets(t)
	for _, proto := range []string{"2", "3"} {
		var runs [2]luaRun
		var names [2]string
		ok := true
		for i, tg := range targets {
			run, done := runLua(t, mode, proto, tg.addr, mode+proto)
			ok = ok && done
			if !done {
				continue
			}
			names[i], runs[i] = tg.name, run
			name := check(tg.name, proto, run)
			if got := luaNames(run.Commands); !slices.Equal(got, wantNames) {
				t.Errorf("%s sent %v\nwant %v", name, got, wantNames)
			}
		}
		if ok {
			compareLuaCommands(t, "RESP"+proto+" "+what, names, runs)
		}
	}
}

func checkERL(t *testing.T, name string, run luaRun) {
	t.Helper()
	hits := func(what string, h luaHits, want int64) {
		if h.TotalHits == nil || *h.TotalHits != want || !luaWindow(h.MsToReset) {
			t.Errorf("%s: %s = %s; want totalHits %d, msToReset in (0, 60000]", name, what, luaHitsString(h), want)
		}
	}
	st := run.Store
	if st == nil || run.App == nil {
		t.Errorf("%s: no store or app results", name)
		return
	}
	if len(st.Increments) != 7 || st.Passed != 5 || st.Limited != 2 {
		t.Errorf("%s: store: %d increments, %d within the limit of 5, %d over; want 7, 5 and 2", name, len(st.Increments), st.Passed, st.Limited)
	}
	for i, h := range st.Increments {
		hits(fmt.Sprintf("store increment %d", i+1), h, int64(i+1))
	}
	hits("store get after 7", st.Get, 7)
	if h := st.GetAfterReset; h.TotalHits != nil || h.MsToReset >= 0 {
		t.Errorf("%s: store get after resetKey = %s; want totalHits NaN (the reply [nil, -2]), msToReset < 0", name, luaHitsString(h))
	}
	hits("store increment after resetKey", st.IncrementAfterReset, 1)
	if len(run.Noscript) != 2 {
		t.Errorf("%s: %d increments after SCRIPT FLUSH, want 2", name, len(run.Noscript))
	} else {
		hits("increment after SCRIPT FLUSH", run.Noscript[0], 1)
		hits("second increment after SCRIPT FLUSH", run.Noscript[1], 2)
	}

	app := run.App
	if len(app.Requests) != 7 || app.Passed != 5 || app.Limited != 2 {
		t.Errorf("%s: app: %d requests, %d passed, %d limited; want 7, 5 and 2", name, len(app.Requests), app.Passed, app.Limited)
	}
	for i, r := range app.Requests {
		if !luaHTTPIs(r, i < 5, max(4-int64(i), 0)) {
			t.Errorf("%s: request %d: %s; want %s", name, i+1, luaHTTPString(r), luaHTTPWant(i < 5, max(4-int64(i), 0)))
		}
	}
	if r := app.AfterReset; !luaHTTPIs(r, true, 4) {
		t.Errorf("%s: request after resetKey: %s; want %s", name, luaHTTPString(r), luaHTTPWant(true, 4))
	}
	if len(app.Requests) > 0 {
		last := app.Requests[len(app.Requests)-1]
		t.Logf("%s: store %d passed, %d limited; app %d passed, %d limited (the last: %s); after resetKey %d",
			name, st.Passed, st.Limited, app.Passed, app.Limited, luaHTTPString(last), app.AfterReset.Status)
	}
}

func luaHitsString(h luaHits) string {
	if h.TotalHits == nil {
		return fmt.Sprintf("{totalHits NaN, msToReset %d}", h.MsToReset)
	}
	return fmt.Sprintf("{totalHits %d, msToReset %d}", *h.TotalHits, h.MsToReset)
}

// luaHTTPIs: 200 with remaining left, or 429 with 0 left and a Retry-After
// of at most 60 s.
func luaHTTPIs(r luaHTTP, pass bool, remaining int64) bool {
	if r.Remaining == nil || *r.Remaining != remaining {
		return false
	}
	if pass {
		return r.Status == 200 && r.RetryAfter == nil
	}
	if r.Status != 429 || r.RetryAfter == nil {
		return false
	}
	s, err := strconv.Atoi(*r.RetryAfter)
	return err == nil && s > 0 && s <= 60
}

func luaHTTPWant(pass bool, remaining int64) string {
	if pass {
		return fmt.Sprintf("200, remaining %d", remaining)
	}
	return "429, remaining 0, Retry-After in (0, 60]"
}

func luaHTTPString(r luaHTTP) string {
	s := fmt.Sprintf("%d", r.Status)
	if r.Remaining != nil {
		s += fmt.Sprintf(", remaining %d", *r.Remaining)
	}
	if r.RetryAfter != nil {
		s += ", Retry-After " + *r.RetryAfter
	}
	return s
}

// TestLuaRateLimiterRedis runs rate-limiter-flexible's default
// RateLimiterRedis, 10 points a 60 s window, on redis-server and on
// rlserver (compat/lua_limiters.js, mode rlf): 13 consumes of one key allow
// exactly the first 10 and reject 3, each with msBeforeNext in (0, 60000]
// and consumedPoints counting 1..13 (a rejected consume still counts, as
// the script INCRBYs first), and limiter.get after them finds 13.
func TestLuaRateLimiterRedis(t *testing.T) {
	compatNode(t, "ioredis", "rate-limiter-flexible")
	runLuaModes(t, "rlf", "rate-limiter-flexible", wantRLFNames, func(server, proto string, run luaRun) string {
		name := fmt.Sprintf("%s RESP%s (rate-limiter-flexible %s, ioredis %s)", server, proto, run.Versions["rate-limiter-flexible"], run.Versions["ioredis"])
		checkRLF(t, name, run.rlfResults, 13)
		return name
	})
}
