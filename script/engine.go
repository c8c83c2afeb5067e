// Package script runs Redis Lua scripts: it compiles them and caches them
// by SHA1, sandboxes them as Redis 7.0 does, and converts between Lua
// values and RESP by Redis's rules.
//
// The interpreter is gopher-lua (Lua 5.1 in Go). A script reaches the
// keyspace only through a Caller, which runs one command and returns its
// RESP reply; the package knows nothing of the engine, so the caller
// decides where a script runs and what a command may touch.
package script

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	lua "github.com/yuin/gopher-lua"
	"github.com/yuin/gopher-lua/parse"
)

// Redis's version as scripts see it (redis.REDIS_VERSION and
// redis.REDIS_VERSION_NUM): the Redis whose script behaviour this package
// reproduces.
const (
	RedisVersion    = "7.0.15"
	RedisVersionNum = 0x0007000f
)

// The errors a Caller returns, as RESP error replies ("-" + text +
// "\r\n"), when it refuses a command; the texts are Redis's.
const (
	ErrUnknownCommand = "ERR Unknown Redis command called from script"
	ErrWrongArgs      = "ERR Wrong number of args calling Redis command from script"
	ErrNotAllowed     = "ERR This Redis command is not allowed from script"
	ErrReadOnly       = "ERR Write commands are not allowed from read-only scripts."
	ErrNoScript       = "NOSCRIPT No matching script. Please use EVAL."
	ErrNotBusy        = "NOTBUSY No scripts in execution right now."
	ErrUnkillable     = "UNKILLABLE Sorry the script already executed write commands against the dataset. You can either wait the script termination or kill the server in a hard way using the SHUTDOWN NOSAVE command."
	ErrBusy           = "BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	errKilled         = "ERR Script killed by user with SCRIPT KILL..."
)

// The levels of redis.log (redis.LOG_DEBUG...).
const (
	LogDebug   = 0
	LogVerbose = 1
	LogNotice  = 2
	LogWarning = 3
)

// Caller runs one command for a script: args is the command, name first;
// the reply is RESP3 when resp3 is set (the script called
// redis.setresp(3)), RESP2 otherwise. A command the caller refuses gets an
// error reply (ErrUnknownCommand...). The reply may be reused once Call is
// called again.
type Caller interface {
	Call(args [][]byte, resp3 bool) []byte
}

// CallerFunc is a Caller that is a function.
type CallerFunc func(args [][]byte, resp3 bool) []byte

// Call implements Caller.
func (f CallerFunc) Call(args [][]byte, resp3 bool) []byte { return f(args, resp3) }

// RunError is a script that did not run or did not finish: its Error is
// Redis's error text without the leading '-' ("NOSCRIPT ...", "ERR
// user_script:1: ... script: <sha>, on @user_script:1.").
type RunError struct{ Msg string }

func (e *RunError) Error() string { return e.Msg }

// Reply is the error as the reply Redis sends.
func (e *RunError) Reply() Reply { return Reply{Kind: Error, Str: e.Msg} }

// Options are the settings of one run. The zero value runs a script with
// no time limit that nobody can kill, and drops redis.log lines.
type Options struct {
	// Running, when set, is the handle through which the caller sees the
	// script busy and kills it; the Caller marks it written.
	Running *Running
	// BusyAfter is Redis's busy-reply-threshold: after it Running.Busy
	// reports true. 0: never busy.
	BusyAfter time.Duration
	// Log receives redis.log lines (level LogDebug..LogWarning).
	Log func(level int, msg string)
}

// Engine holds the compiled scripts, by SHA1, and the interpreters that
// run them. It is safe for concurrent use: each run takes an interpreter
// of its own.
type Engine struct {
	mu      sync.RWMutex
	scripts map[string]*lua.FunctionProto
	flags   map[string]Flags // of the cached scripts with a shebang line
	flagged atomic.Bool      // len(flags) > 0

	// states are idle interpreters, kept across garbage collections (a
	// sync.Pool would drop them at every one, and building one costs more
	// than a run).
	states chan *state

	randMu sync.Mutex
	rand   lrand48

	lim limits
	dog watchdog
}

// New returns an empty script cache.
func New() *Engine {
	e := &Engine{scripts: map[string]*lua.FunctionProto{}, flags: map[string]Flags{}, states: make(chan *state, 64)}
	e.rand.x = [3]uint32{0x330E, 0xABCD, 0x1234} // where Redis's rand.c starts (math.random is not reseeded per script in 7.0)
	e.lim.memory.Store(DefaultMemoryLimit)
	e.dog.lim = &e.lim
	return e
}

// SetMemoryLimit sets the most a run may grow the process's live heap
// by (bytes; 0: no limit); a quarter of it is the largest value one
// built-in may make, or a script may return. A run past either ends
// with "not enough memory".
func (e *Engine) SetMemoryLimit(bytes int64) { e.lim.memory.Store(bytes) }

// MemoryLimit is the limit SetMemoryLimit set.
func (e *Engine) MemoryLimit() int64 { return e.lim.memory.Load() }

// SHA1 is Redis's name for a script: the hex SHA1 of its text.
func SHA1(src []byte) string {
	sum := sha1.Sum(src)
	return hex.EncodeToString(sum[:])
}

// Load compiles src and caches it (SCRIPT LOAD); it returns the SHA1.
func (e *Engine) Load(src []byte) (string, error) {
	sha := SHA1(src)
	_, err := e.load(sha, src)
	return sha, err
}

func (e *Engine) load(sha string, src []byte) (*lua.FunctionProto, error) {
	e.mu.RLock()
	p := e.scripts[sha]
	e.mu.RUnlock()
	if p != nil {
		return p, nil
	}
	p, err := compile(src)
	if err != nil {
		return nil, err
	}
	f, _, _ := ParseShebang(src) // compile checked it
	e.mu.Lock()
	if q := e.scripts[sha]; q != nil {
		p = q
	} else {
		e.scripts[sha] = p
		if f.Shebang {
			e.flags[sha] = f
			e.flagged.Store(true)
		}
	}
	e.mu.Unlock()
	return p, nil
}

// FlagsOf returns the flags of the cached script sha (lower case), ok
// false when it is not cached.
func (e *Engine) FlagsOf(sha string) (f Flags, ok bool) {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.flags[sha], e.scripts[sha] != nil
}

// AnyFlagged reports whether a cached script has a shebang line: while
// none has, a run need not look its flags up (one atomic load).
func (e *Engine) AnyFlagged() bool { return e.flagged.Load() }

// Exists reports whether the script sha (any case) is cached.
func (e *Engine) Exists(sha string) bool {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return e.scripts[strings.ToLower(sha)] != nil
}

// Flush empties the cache (SCRIPT FLUSH).
func (e *Engine) Flush() {
	e.mu.Lock()
	e.scripts = map[string]*lua.FunctionProto{}
	e.flags = map[string]Flags{}
	e.flagged.Store(false)
	e.mu.Unlock()
}

// Len is the number of cached scripts.
func (e *Engine) Len() int {
	e.mu.RLock()
	defer e.mu.RUnlock()
	return len(e.scripts)
}

// Eval compiles src (or finds it cached), caches it and runs it (EVAL).
// keys and args must not change until it returns: KEYS and ARGV point
// into them.
func (e *Engine) Eval(ctx context.Context, src []byte, keys, args [][]byte, c Caller, o *Options) (Reply, error) {
	sha := SHA1(src)
	p, err := e.load(sha, src)
	if err != nil {
		return Reply{}, err
	}
	return e.run(ctx, sha, p, keys, args, c, o)
}

// EvalSHA runs the cached script sha (EVALSHA): NOSCRIPT when it is not
// cached.
func (e *Engine) EvalSHA(ctx context.Context, sha string, keys, args [][]byte, c Caller, o *Options) (Reply, error) {
	sha = strings.ToLower(sha)
	e.mu.RLock()
	p := e.scripts[sha]
	e.mu.RUnlock()
	if p == nil {
		return Reply{}, &RunError{ErrNoScript}
	}
	return e.run(ctx, sha, p, keys, args, c, o)
}

// compile parses and compiles a script as Redis's "user_script" chunk,
// from after its shebang line if it has one (ParseShebang).
func compile(src []byte) (*lua.FunctionProto, error) {
	_, n, text := ParseShebang(src)
	if text != "" {
		return nil, &RunError{text}
	}
	body := src[n:]
	if msg := checkLevels(string(body), "user_script"); msg != "" {
		return nil, &RunError{"ERR Error compiling script (new function): " + msg}
	}
	chunk, err := parse.Parse(strings.NewReader(string(body)), "user_script")
	if err != nil {
		return nil, &RunError{"ERR Error compiling script (new function): " + compileError(err, "user_script")}
	}
	p, err := lua.Compile(chunk, "user_script")
	if err != nil {
		return nil, &RunError{"ERR Error compiling script (new function): " + compileError(err, "user_script")}
	}
	// gopher-lua marks every vararg function, the main chunk included,
	// as needing Lua 5.0's implicit arg table, and builds one (a table and
	// a hash map for its "n") on every call. Lua 5.1 never does for the
	// main chunk (lparser.c: it is VARARG_ISVARARG only), and gopher-lua
	// declares no arg local there either, so the table was garbage made
	// on every run: a quarter of a token-bucket EVALSHA's bytes.
	// Functions inside the script keep arg, as in Redis's Lua
	// (LUA_COMPAT_VARARG).
	p.IsVarArg &^= lua.VarArgNeedsArg
	return p, nil
}

// compileError writes a gopher-lua parse error the way Lua 5.1 writes
// its own: "user_script:LINE: <message> near '<token>'". The message
// itself is gopher-lua's (Lua names the expected token more often).
func compileError(err error, chunk string) string {
	var pe *parse.Error
	switch e := err.(type) {
	case *parse.Error:
		pe = e
	case *lua.ApiError:
		pe, _ = e.Cause.(*parse.Error)
	}
	if pe == nil {
		msg := strings.TrimSpace(err.Error())
		if strings.HasPrefix(msg, chunk) {
			return msg
		}
		return chunk + ": " + msg
	}
	msg := strings.TrimSpace(pe.Message)
	if msg == "syntax error" {
		msg = "unexpected symbol"
	}
	if pe.Pos.Line == parse.EOF || pe.Token == "" || pe.Token == "EOF" {
		line := pe.Pos.Line
		if line == parse.EOF || line <= 0 {
			line = 1 + strings.Count(strings.TrimRight(msg, "\n"), "\n")
		}
		return chunk + ":" + itoa(line) + ": " + msg + " near '<eof>'"
	}
	return chunk + ":" + itoa(pe.Pos.Line) + ": " + msg + " near '" + pe.Token + "'"
}

// Running is a script in execution as the caller sees it: busy past the
// threshold, killable until it writes. The zero value is ready; one
// Running serves one run at a time.
type Running struct {
	mu     sync.Mutex
	active bool
	start  time.Time
	after  time.Duration
	wrote  bool
	killed bool
	cancel context.CancelCauseFunc
}

func (r *Running) begin(cancel context.CancelCauseFunc, after time.Duration) {
	r.mu.Lock()
	r.active, r.start, r.after, r.wrote, r.killed, r.cancel = true, time.Now(), after, false, false, cancel
	r.mu.Unlock()
}

func (r *Running) end() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.active, r.cancel = false, nil
	return r.killed
}

// Active reports whether a script is executing.
func (r *Running) Active() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active
}

// Busy reports whether the script has run past its BusyAfter threshold:
// Redis then answers other clients BUSY.
func (r *Running) Busy() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active && r.after > 0 && time.Since(r.start) >= r.after
}

// MarkWritten records that the script ran a write command: from then on
// it cannot be killed. The Caller calls it.
func (r *Running) MarkWritten() {
	r.mu.Lock()
	r.wrote = true
	r.mu.Unlock()
}

// Written reports whether MarkWritten was called in this run.
func (r *Running) Written() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.wrote
}

// Abandon stops the script whatever it wrote: the caller discards the
// run (its writes never left its copy) and runs it again elsewhere.
func (r *Running) Abandon() {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.cancel != nil {
		r.cancel(nil)
	}
}

// Kill stops the script (SCRIPT KILL): NOTBUSY when none is executing,
// UNKILLABLE once it has written. The script ends with Redis's error
// "ERR Script killed by user with SCRIPT KILL...".
func (r *Running) Kill() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	switch {
	case !r.active:
		return &RunError{ErrNotBusy}
	case r.wrote:
		return &RunError{ErrUnkillable}
	}
	r.killed = true
	r.cancel(nil)
	return nil
}

// run is one execution of a compiled script.
type run struct {
	e      *Engine
	caller Caller
	resp3  bool
	log    func(int, string)
	argbuf [][]byte // redis.call's arguments, reused
	numbuf []byte   // redis.call's numeric arguments, formatted, reused
}

func (e *Engine) run(ctx context.Context, sha string, p *lua.FunctionProto, keys, args [][]byte, c Caller, o *Options) (reply Reply, err error) {
	if o == nil {
		o = &Options{}
	}
	var st *state
	select {
	case st = <-e.states:
	default:
		st = e.newState()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if o.Running != nil {
		o.Running.begin(cancel, o.BusyAfter)
	}
	w := &watched{cancel: cancel}
	e.dog.add(w)
	defer e.dog.remove(w)
	healthy := false
	defer func() {
		// A Go panic inside the interpreter (gopher-lua's or a
		// built-in's) is the script's error. PCall catches most, resets
		// the stacks and hands them to the error handler like any error;
		// one it lets through (a panic while it handles an error) lands
		// here, and that interpreter is dropped: its stacks may be left
		// in any state.
		if r := recover(); r != nil {
			if o.Running != nil {
				o.Running.end()
			}
			reply, err = Reply{}, &RunError{"ERR Error running script " + sha + ", " + sanitize(fmt.Sprint(r))}
			return
		}
		st.reset()
		if !healthy {
			return
		}
		select {
		case e.states <- st:
		default: // enough idle interpreters
		}
	}()
	L := st.L
	st.run = &run{e: e, caller: c, log: o.Log}
	st.globals.RawSetString("KEYS", stringArray(L, keys))
	st.globals.RawSetString("ARGV", stringArray(L, args))
	L.SetContext(ctx)
	fn := L.NewFunctionFromProto(p)
	L.Push(fn)
	err = L.PCall(0, 1, st.handler)
	L.RemoveContext()
	killed := ctx.Err() != nil
	if o.Running != nil {
		killed = o.Running.end() || killed
	}
	healthy = true
	if ae, ok := err.(*lua.ApiError); ok && ae.Type == lua.ApiErrorPanic {
		healthy = false // a Go panic PCall caught with no handler to call
	}
	switch {
	case w.memoryEnded.Load():
		err = &RunError{"ERR Error running script " + sha + ", " + errMemory.Error()}
	case err == nil:
		var ok bool
		reply, ok = toReplyBounded(L, L.Get(-1), st.run.resp3, e.lim.maxBytes())
		L.Pop(1)
		if !ok {
			reply, err = Reply{}, &RunError{"ERR Error running script " + sha + ", " + errMemory.Error()}
		}
	default:
		err = runError(err, sha, killed)
	}
	return reply, err
}

// reset clears what a run left: its globals, the settings it changed.
func (st *state) reset() {
	st.run = nil
	st.nesting = 0
	st.globals.RawSetString("KEYS", lua.LNil)
	st.globals.RawSetString("ARGV", lua.LNil)
	st.cjson.reset()
	st.L.RemoveContext()
	st.L.SetTop(0)
}

// runError is Redis's text for a script that raised err: the error
// handler left a table {err=, source=, line=}.
func runError(err error, sha string, killed bool) error {
	ae, ok := err.(*lua.ApiError)
	if !ok {
		return &RunError{"ERR Error running script " + sha + ", " + err.Error()}
	}
	t, ok := ae.Object.(*lua.LTable)
	if !ok {
		msg := "execution failure"
		if s, ok := ae.Object.(lua.LString); ok {
			msg = string(s)
		}
		if len(msg) > 100 {
			msg = msg[:100]
		}
		return &RunError{sanitize("ERR Error running script " + sha + ", " + msg)}
	}
	msg := "ERR unknown error"
	if s, ok := t.RawGetString("err").(lua.LString); ok {
		msg = string(s)
	}
	if killed {
		msg = errKilled
	}
	src, hasSrc := t.RawGetString("source").(lua.LString)
	line, hasLine := t.RawGetString("line").(lua.LNumber)
	if hasSrc && hasLine {
		msg += " script: " + sha + ", on " + string(src) + ":" + itoa(int(line)) + "."
	}
	return &RunError{sanitize(msg)}
}

// sanitize keeps an error reply on one line, as Redis's reply writer
// does for formatted errors.
func sanitize(s string) string {
	s = strings.TrimRight(s, "\r\n")
	return strings.Map(func(r rune) rune {
		if r == '\r' || r == '\n' {
			return ' '
		}
		return r
	}, s)
}
