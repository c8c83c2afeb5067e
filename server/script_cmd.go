package server

import (
	"bytes"
	"context"
	"errors"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/resp"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Lua scripts: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO and SCRIPT.
//
// A script runs on the connection's goroutine against a kv.Overlay: a
// private copy of the keys it touches, read from the engine in one
// command when the run starts (its declared keys) or when it first
// touches another key. Its writes stay in the copy; when it ends they are
// applied as one transaction of absolute restores under WATCH digests of
// every key it touched (kv.Overlay.Effects), through the backend, so in a
// cluster the Raft log carries the script's effects and never the script:
// replicas run no Lua. If another command changed one of its keys in
// between, nothing applies and the script runs again on fresh copies, so
// every run that takes effect is serializable. Writes made before a script
// error stay, as in Redis.
//
// TIME inside a script is the run's time. No shard is held while a script
// runs, so a looping script stalls nobody; past busy-reply-threshold the
// commands on its keys answer BUSY, as Redis's clients expect, and SCRIPT
// KILL stops it if it has not written yet.

// scriptRetries bounds the runs of one script whose effects keep meeting
// changed keys.
const scriptRetries = 64

// busyReplyThreshold is Redis's default busy-reply-threshold.
const busyReplyThreshold = 5 * time.Second

// scriptState is the server's script cache and the scripts running.
type scriptState struct {
	ctx     context.Context // ends at shutdown: every run stops
	stop    context.CancelFunc
	cache   *script.Engine
	mu      sync.Mutex
	running map[*scriptRun]struct{}
	n       atomic.Int32 // len(running), read without the lock
	busy    atomic.Int32 // running scripts past busy-reply-threshold, as of the last tick (watchBusy)
}

type scriptRun struct {
	run  *script.Running
	keys []string
}

func init() {
	evalKeys := func(args [][]byte) (first, last, step int) {
		if len(args) < 3 {
			return 0, -1, 1
		}
		n, ok := values.ParseInt(args[2])
		if !ok || n <= 0 || n > int64(len(args)-3) {
			return 0, -1, 1
		}
		return 3, 2 + int(n), 1
	}
	eval := func(name, since, summary string, sha, ro bool) *entry {
		flags := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
		if ro {
			flags = []string{"readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"}
		}
		return &entry{name: name, arity: -3, flags: flags, acl: []string{"@slow", "@scripting"},
			summary: summary, group: "scripting", since: since, movableKeys: evalKeys,
			handler: func(s *Server, c *client, args [][]byte) outcome {
				s.eval(c, args, sha, ro)
				return cmdOK
			}}
	}
	scriptSub := func(name string, arity int, flags []string, summary string, h func(*Server, *client, [][]byte) outcome) *entry {
		sc := sub("script", name, arity, flags, summary, h)
		sc.acl, sc.group, sc.since = []string{"@slow", "@scripting"}, "scripting", "2.6.0"
		return sc
	}
	register(
		eval("eval", "2.6.0", "Executes a server-side Lua script.", false, false),
		eval("evalsha", "2.6.0", "Executes a server-side Lua script by SHA1 digest.", true, false),
		eval("eval_ro", "7.0.0", "Executes a read-only server-side Lua script.", false, true),
		eval("evalsha_ro", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.", true, true),
		container("script", "A container for Lua scripts management commands.", "scripting",
			scriptSub("load", 3, []string{"noscript", "stale"}, "Loads a server-side Lua script to the script cache.", cmdScriptLoad),
			scriptSub("exists", -3, []string{"noscript"}, "Determines whether server-side Lua scripts exist in the script cache.", cmdScriptExists),
			scriptSub("flush", -2, []string{"noscript"}, "Removes all server-side Lua scripts from the script cache.", cmdScriptFlush),
			scriptSub("kill", 2, []string{"noscript", "allow_busy"}, "Terminates a server-side Lua script during execution.", cmdScriptKill),
		),
	)
}

// scriptsOf returns the server's script state, made on first use.
func (s *Server) scriptsOf() *scriptState {
	if st := s.scripts.Load(); st != nil {
		return st
	}
	ctx, stop := context.WithCancel(context.Background())
	st := &scriptState{ctx: ctx, stop: stop, cache: script.New(), running: map[*scriptRun]struct{}{}}
	st.cache.SetMemoryLimit(s.scriptMem.Load())
	if !s.scripts.CompareAndSwap(nil, st) {
		stop()
		return s.scripts.Load()
	}
	go st.watchBusy()
	return st
}

func (s *Server) eval(c *client, args [][]byte, bySHA, ro bool) {
	keys, ok := s.scriptKeys(c, args, bySHA)
	if !ok {
		return
	}
	st := s.scriptsOf()
	run := st.start(keys)
	defer st.remove(run)
	resp3 := c.memo.resp3
	s.onOverlay(c, keys, nil, func(ov *kv.Overlay, out []byte) []byte {
		return s.runScript(ov, run, args, bySHA, ro, resp3, out)
	})
}

// scriptKeys checks an EVAL's numkeys and the script's presence (EVALSHA)
// and returns its keys, or answers the error.
func (s *Server) scriptKeys(c *client, args [][]byte, bySHA bool) ([][]byte, bool) {
	n, ok := values.ParseInt(args[2]) // canonical, as Redis's string2ll: "01" is not a number
	switch {
	case !ok:
		c.rep.error(errNotInteger)
		return nil, false
	case n < 0:
		c.rep.error("ERR Number of keys can't be negative")
		return nil, false
	case n > int64(len(args)-3):
		c.rep.error("ERR Number of keys can't be greater than number of args")
		return nil, false
	case bySHA && !s.scriptsOf().cache.Exists(strings.ToLower(string(args[1]))):
		c.rep.error(script.ErrNoScript)
		return nil, false
	}
	return args[3 : 3+n], true
}

// onOverlay runs a program (a script, or a transaction that holds
// scripts) on a copy of its keys and applies its effects, running it again
// while another command changed one of its keys in between (kv.Overlay).
// program appends its reply to out and returns it. watches are a
// transaction's WATCHed keys: if one changed since WATCH, the reply is a
// null array and nothing runs.
func (s *Server) onOverlay(c *client, keys [][]byte, watches []kv.Watch, program func(ov *kv.Overlay, out []byte) []byte) {
	st := s.scriptsOf()
	for range scriptRetries {
		ov := kv.NewOverlay(time.Now().UnixNano(), kv.FetchWith(s.do1))
		ov.Load(keys)
		for _, w := range watches {
			if ov.Digest(w.Key) != w.Digest && ov.Err() == nil {
				w := kv.Writer{RESP3: c.memo.resp3}
				w.NilArray()
				c.rep.conn.WriteRaw(w.B)
				return
			}
		}
		out := program(ov, nil)
		if st.ctx.Err() != nil {
			c.rep.error("ERR the server is shutting down: the script was stopped and none of its writes applied")
			return
		}
		if ferr := ov.Err(); ferr != nil {
			// The backend's own text: CLUSTERDOWN, TRYAGAIN, UNKNOWN...
			// tell the client whether the program can have run.
			c.rep.error(engineErrorText(ferr))
			return
		}
		if ov.Wrote() || !ov.Consistent() {
			err := ov.Effects(false).Apply(s.do1)
			var refused *kv.Refused
			switch {
			case errors.Is(err, kv.ErrConflict):
				continue // a key changed since the run read it: run again
			case errors.As(err, &refused):
				// A restore was refused (OOM): nothing that needed a new
				// key applied; report it as Redis would.
				c.rep.error(refused.Text)
				return
			case err != nil:
				c.rep.error(engineErrorText(err))
				return
			}
		}
		if len(out) > 0 && out[0] == '-' {
			c.rep.errors++
		}
		c.rep.conn.WriteRaw(out)
		return
	}
	c.rep.error("BUSY the script's keys kept changing while it ran; try again")
}

// runScript runs one EVAL-family command (args, checked by scriptKeys) on
// ov and appends its reply, errors included, to out.
func (s *Server) runScript(ov *kv.Overlay, run *scriptRun, args [][]byte, bySHA, ro, resp3 bool, out []byte) []byte {
	st := s.scriptsOf()
	n, _ := values.ParseInt(args[2])
	keys, argv := args[3:3+n], args[3+n:]
	caller := &scriptCaller{s: s, ov: ov, ro: ro, run: run.run, slot: -1}
	if s.router != nil && len(keys) > 0 {
		caller.slot = slots.Of(keys[0])
	}
	opts := &script.Options{Running: run.run, BusyAfter: time.Duration(s.busyAfter.Load())}
	var reply script.Reply
	var err error
	if bySHA {
		reply, err = st.cache.EvalSHA(st.ctx, strings.ToLower(string(args[1])), keys, argv, caller, opts)
	} else {
		reply, err = st.cache.Eval(st.ctx, args[1], keys, argv, caller, opts)
	}
	if err != nil {
		return append(append(append(out, '-'), err.Error()...), '\r', '\n')
	}
	return reply.Append(out, resp3)
}

// start registers a script about to run on keys (for BUSY and SCRIPT
// KILL); remove unregisters it.
func (st *scriptState) start(keys [][]byte) *scriptRun {
	run := &scriptRun{run: &script.Running{}}
	for _, k := range keys {
		run.keys = append(run.keys, string(k))
	}
	st.add(run)
	return run
}

// scriptCaller runs a script's redis.call on its overlay.
type scriptCaller struct {
	s    *Server
	ov   *kv.Overlay
	ro   bool
	run  *script.Running
	slot int // the slot of the declared keys in a sharded cluster; -1 otherwise
	buf  []byte
}

// Call implements script.Caller.
func (sc *scriptCaller) Call(args [][]byte, resp3 bool) []byte {
	spec, ok := kv.Lookup(args[0])
	if !ok {
		cmd := lookup(appendLower(nil, args[0]))
		switch {
		case cmd == nil:
			return errReply(script.ErrUnknownCommand)
		case cmd.name == "select" && len(args) == 2:
			if string(args[1]) != "0" {
				return errReply(errDBIndex)
			}
			return []byte("+OK\r\n")
		case cmd.name == "dbsize" && len(args) == 1:
			// The keys of the engine as the script runs; a script's own
			// uncommitted writes are not counted.
			n, err := sc.s.backend.Len(context.Background())
			if err != nil {
				return errReply(engineErrorText(err))
			}
			return []byte(":" + strconv.Itoa(n) + "\r\n")
		case cmd.batch == nil || cmd.render == nil:
			return errReply(script.ErrNotAllowed) // server and admin commands, RL.CHECK's policies
		case !cmd.arityOK(len(args)):
			return errReply(script.ErrWrongArgs)
		}
		return sc.limiter(cmd, args, resp3)
	}
	if !spec.ArityOK(len(args)) {
		return errReply(script.ErrWrongArgs)
	}
	if sc.slot >= 0 {
		for _, k := range spec.KeysOf(args) {
			if slots.Of(k) != sc.slot {
				return errReply("ERR Script attempted to access keys that do not hash to the same slot")
			}
		}
	}
	if spec.Write() {
		if sc.ro {
			return errReply(script.ErrReadOnly)
		}
		sc.run.MarkWritten()
	}
	sc.buf = kv.New(spec, args, resp3).Exec(sc.ov, sc.buf[:0])
	return sc.buf
}

// limiter runs a limiter command (RL.ALLOW, CL.THROTTLE, GCRA, RL.FIXED...)
// on the overlay: each of its requests is applied to a copy of its key's
// state (engine.Simulate), and the reply is rendered as the command's own.
func (sc *scriptCaller) limiter(cmd *entry, args [][]byte, resp3 bool) []byte {
	var memo argMemo
	reqs, errText := cmd.batch(&memo, nil, args)
	if errText != "" {
		return errReply(errText)
	}
	res := make([]engine.Result, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if sc.slot >= 0 && slots.Of(r.Key) != sc.slot {
			return errReply("ERR Script attempted to access keys that do not hash to the same slot")
		}
		var before *engine.Record
		if rec, ok := sc.ov.Record(r.Key); ok {
			before = &rec
		} else if sc.ov.Kind(r.Key) != engine.KindNone {
			res[i] = engine.Result{Err: engine.ErrWrongType} // a data key
			continue
		}
		if !r.ReadOnly && sc.ro && (cmd.write || r.Op == engine.OpDel) {
			return errReply(script.ErrReadOnly)
		}
		out, after, err := engine.Simulate(r.Key, before, r, sc.ov.Now())
		if err != nil {
			return errReply(engineErrorText(err))
		}
		res[i] = out
		if !sameRecord(before, after) {
			sc.run.MarkWritten()
			sc.ov.SetLimiter(r.Key, after)
		}
	}
	if err := firstErr(res); err != nil {
		return errReply(engineErrorText(err))
	}
	var buf bytes.Buffer
	w := resp.NewWriter(&buf)
	w.SetRESP3(resp3)
	cmd.render(&replier{conn: &conn{w: w}}, res)
	w.Flush()
	return buf.Bytes()
}

func sameRecord(a, b *engine.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && slices.Equal(a.Fields, b.Fields)
}

func errReply(text string) []byte { return []byte("-" + text + "\r\n") }

func (st *scriptState) add(r *scriptRun) {
	st.mu.Lock()
	st.running[r] = struct{}{}
	st.n.Store(int32(len(st.running)))
	st.mu.Unlock()
}

// watchBusy counts the scripts past busy-reply-threshold every 10 ms, so
// that the commands of a server with no busy script pay one atomic load
// for the check (busyOn).
func (st *scriptState) watchBusy() {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-st.ctx.Done():
			return
		case <-t.C:
		}
		if st.n.Load() == 0 {
			st.busy.Store(0)
			continue
		}
		n := int32(0)
		st.mu.Lock()
		for r := range st.running {
			if r.run.Busy() {
				n++
			}
		}
		st.mu.Unlock()
		st.busy.Store(n)
	}
}

func (st *scriptState) remove(r *scriptRun) {
	st.mu.Lock()
	delete(st.running, r)
	st.n.Store(int32(len(st.running)))
	st.mu.Unlock()
}

// busyOn reports whether a script that runs past busy-reply-threshold
// holds one of the keys of cmd: the command then answers BUSY. A script
// stalls only the commands on its keys.
func (s *Server) busyOn(cmd *entry, args [][]byte) bool {
	st := s.scripts.Load()
	if st == nil || st.busy.Load() == 0 {
		return false
	}
	first, last, step := cmd.keyRange(args)
	if first <= 0 {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for r := range st.running {
		if !r.run.Busy() {
			continue
		}
		for i := first; i <= last && i < len(args); i += step {
			if slices.Contains(r.keys, string(args[i])) {
				return true
			}
		}
	}
	return false
}

func cmdScriptLoad(s *Server, c *client, args [][]byte) outcome {
	sha, err := s.scriptsOf().cache.Load(args[2])
	if err != nil {
		c.rep.error(err.Error())
		return cmdOK
	}
	c.rep.conn.WriteBulkString(sha)
	return cmdOK
}

func cmdScriptExists(s *Server, c *client, args [][]byte) outcome {
	cache := s.scriptsOf().cache
	c.rep.conn.WriteArray(len(args) - 2)
	for _, a := range args[2:] {
		if cache.Exists(strings.ToLower(string(a))) {
			c.rep.conn.WriteInt(1)
		} else {
			c.rep.conn.WriteInt(0)
		}
	}
	return cmdOK
}

func cmdScriptFlush(s *Server, c *client, args [][]byte) outcome {
	if len(args) > 3 || (len(args) == 3 && !equalFold(args[2], "async") && !equalFold(args[2], "sync")) {
		c.rep.error("ERR SCRIPT FLUSH only support SYNC|ASYNC option")
		return cmdOK
	}
	s.scriptsOf().cache.Flush()
	c.rep.conn.WriteString("OK")
	return cmdOK
}

func cmdScriptKill(s *Server, c *client, _ [][]byte) outcome {
	st := s.scriptsOf()
	st.mu.Lock()
	var target *script.Running
	for r := range st.running {
		if r.run.Active() && (target == nil || r.run.Busy()) {
			target = r.run
		}
	}
	st.mu.Unlock()
	if target == nil {
		c.rep.error(script.ErrNotBusy)
		return cmdOK
	}
	if err := target.Kill(); err != nil {
		c.rep.error(err.Error())
		return cmdOK
	}
	c.rep.conn.WriteString("OK")
	return cmdOK
}
