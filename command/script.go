package command

import (
	"context"
	"errors"
	"iter"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/slots"
	"github.com/rlserver/rlserver/values"
)

// Lua scripts: EVAL, EVALSHA, EVAL_RO, EVALSHA_RO, and transactions that
// hold them.
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

// BusyReplyThreshold is Redis's default busy-reply-threshold.
const BusyReplyThreshold = 5 * time.Second

// Backend is what scripts need of the keyspace's backend: running
// requests (reads, effects) and counting keys (DBSIZE in a script).
type Backend interface {
	Do(ctx context.Context, reqs []engine.Request, res []engine.Result) error
	Len(ctx context.Context) (int, error)
}

// Scripts is a server's script cache and the scripts running.
type Scripts struct {
	ctx      context.Context // ends at Stop: every run stops
	stop     context.CancelFunc
	cache    *script.Engine
	backend  Backend
	do       kv.Do    // st.do1, made once: a method value allocates
	fetch    kv.Fetch // reads keys for an overlay through do
	mu       sync.Mutex
	running  map[*scriptRun]struct{}
	n        atomic.Int32 // len(running), read without the lock
	busy     atomic.Int32 // running scripts past busy-reply-threshold, as of the last tick (watchBusy)
	liveBusy atomic.Int32 // those of them on live state (live.go)
	shards   int          // the engine's shards when scripts run on live state (live.go); 0: never
	batches  sync.Pool    // *liveBatch (live.go)
}

type scriptRun struct {
	run     *script.Running
	keys    [][]byte // the connection's own buffers, unchanged while it runs
	held    []bool   // a run on live state: the engine shards it holds (live.go); nil otherwise
	running script.Running
}

// NewScripts returns an empty script cache whose scripts run on backend,
// each within memLimit bytes (0: none). Stop ends its background work.
func NewScripts(backend Backend, memLimit int64) *Scripts {
	ctx, stop := context.WithCancel(context.Background())
	st := &Scripts{ctx: ctx, stop: stop, cache: script.New(), backend: backend,
		running: map[*scriptRun]struct{}{}}
	st.do = st.do1
	st.fetch = kv.FetchWith(st.do)
	st.cache.SetMemoryLimit(memLimit)
	go st.watchBusy()
	return st
}

// Stop stops every run (a script's writes are not applied until it ends:
// stopping one loses nothing acknowledged) and the busy watch.
func (st *Scripts) Stop() { st.stop() }

// SetMemoryLimit bounds each run's memory from the next run on.
func (st *Scripts) SetMemoryLimit(n int64) { st.cache.SetMemoryLimit(n) }

// Run is how a script or transaction runs: the connection's protocol,
// busy-reply-threshold, and whether the server is one of several groups
// (a script's keys must then share one slot).
type Run struct {
	RESP3     bool
	BusyAfter time.Duration
	Sharded   bool
}

// Outcome is what a script or a transaction came to, for the edge to
// write: Err, when set, is an error reply; otherwise Reply is the reply
// in the connection's protocol, and Failed tells whether it is an error
// (a script's error), for the error counters.
type Outcome struct {
	Reply  []byte
	Err    string
	Failed bool
}

func failed(text string) Outcome { return Outcome{Err: text} }

// EvalKeys gives the key positions of an EVAL-family command: its numkeys
// keys after the script (first 0 when there are none or numkeys is bad).
func EvalKeys(args [][]byte) (first, last, step int) {
	if len(args) < 3 {
		return 0, -1, 1
	}
	n, ok := values.ParseInt(args[2])
	if !ok || n <= 0 || n > int64(len(args)-3) {
		return 0, -1, 1
	}
	return 3, 2 + int(n), 1
}

// Eval runs an EVAL-family command (bySHA: EVALSHA; ro: the _RO forms);
// args fit its arity.
func (st *Scripts) Eval(args [][]byte, bySHA, ro bool, o Run) Outcome {
	if st.live(o) {
		var outs [1]Outcome
		st.evalLive([]EvalCall{{Args: args, BySHA: bySHA, RO: ro}}, o, outs[:])
		return outs[0]
	}
	return st.evalCopy(args, bySHA, ro, o)
}

// evalCopy runs a script on a copy of its keys and applies its effects
// (onOverlay).
func (st *Scripts) evalCopy(args [][]byte, bySHA, ro bool, o Run) Outcome {
	keys, text := st.scriptKeys(args, bySHA)
	if text != "" {
		return failed(text)
	}
	run := st.start(keys)
	defer st.remove(run)
	return st.onOverlay(keys, nil, o.RESP3, func(ov *kv.Overlay, out []byte) ([]byte, bool) {
		return st.runScript(ov, run, args, bySHA, ro, o, out)
	})
}

// scriptKeys checks an EVAL's numkeys and the script's presence (EVALSHA)
// and returns its keys, or the error text.
func (st *Scripts) scriptKeys(args [][]byte, bySHA bool) ([][]byte, string) {
	n, ok := values.ParseInt(args[2]) // canonical, as Redis's string2ll: "01" is not a number
	switch {
	case !ok:
		return nil, ErrNotInteger
	case n < 0:
		return nil, errNumKeysNegative
	case n > int64(len(args)-3):
		return nil, errNumKeysTooMany
	case bySHA && !st.cache.Exists(strings.ToLower(string(args[1]))):
		return nil, script.ErrNoScript
	}
	return args[3 : 3+n], ""
}

// do1 runs one request through the backend (kv.Do).
func (st *Scripts) do1(req engine.Request) (engine.Result, error) {
	res := make([]engine.Result, 1)
	err := st.backend.Do(context.Background(), []engine.Request{req}, res)
	return res[0], err
}

// onOverlay runs a program (a script, or a transaction that holds
// scripts) on a copy of its keys and applies its effects, running it again
// while another command changed one of its keys in between (kv.Overlay).
// program appends its reply to out and returns it, and whether it is an
// error. watches are a transaction's WATCHed keys: if one changed since
// WATCH, the reply is a null array and nothing runs.
func (st *Scripts) onOverlay(keys [][]byte, watches []kv.Watch, resp3 bool, program func(ov *kv.Overlay, out []byte) ([]byte, bool)) Outcome {
	for range scriptRetries {
		ov := kv.NewOverlay(time.Now().UnixNano(), st.fetch)
		ov.Load(keys)
		for _, w := range watches {
			if ov.Digest(w.Key) != w.Digest && ov.Err() == nil {
				w := kv.Writer{RESP3: resp3}
				w.NilArray()
				return Outcome{Reply: w.B}
			}
		}
		out, isErr := program(ov, nil)
		if st.ctx.Err() != nil {
			return failed(errScriptStopped)
		}
		if ferr := ov.Err(); ferr != nil {
			// The backend's own text: CLUSTERDOWN, TRYAGAIN, UNKNOWN...
			// tell the client whether the program can have run.
			return failed(Text(ferr))
		}
		if ov.Wrote() || !ov.Consistent() {
			if err := ov.Effects(false).Apply(st.do); err != nil {
				if errors.Is(err, kv.ErrConflict) {
					continue // a key changed since the run read it: run again
				}
				return failed(effectsError(err))
			}
		}
		return Outcome{Reply: out, Failed: isErr}
	}
	return failed(errScriptKeysChanged)
}

// effectsError is the reply to effects that did not apply: a refused
// restore (OOM; nothing that needed a new key applied) as Redis words
// it, or the backend's error.
func effectsError(err error) string {
	var refused *kv.Refused
	if errors.As(err, &refused) {
		return refused.Text
	}
	return Text(err)
}

// runScript runs one EVAL-family command (args, checked by scriptKeys) on
// ov and appends its reply, errors included, to out.
func (st *Scripts) runScript(ov *kv.Overlay, run *scriptRun, args [][]byte, bySHA, ro bool, o Run, out []byte) ([]byte, bool) {
	return st.runWith(&caller{}, &script.Options{}, ov, run, args, bySHA, ro, o, out)
}

// runWith is runScript with the caller and options to fill and use, so a
// batch of scripts can reuse one of each.
func (st *Scripts) runWith(sc *caller, opts *script.Options, ov *kv.Overlay, run *scriptRun, args [][]byte, bySHA, ro bool, o Run, out []byte) ([]byte, bool) {
	n, _ := values.ParseInt(args[2])
	keys, argv := args[3:3+n], args[3+n:]
	var flags script.Flags
	if bySHA {
		if st.cache.AnyFlagged() {
			flags, _ = st.cache.FlagsOf(strings.ToLower(string(args[1])))
		}
	} else {
		flags, _, _ = script.ParseShebang(args[1]) // a bad line fails to compile below
	}
	if flags.Shebang {
		// Redis 7's checks of a script with flags, before it runs
		// (scriptPrepareForRun); a script without a #! line is checked
		// command by command instead.
		switch {
		case ro && !flags.NoWrites:
			return appendErr(out, script.ErrWriteFlagRO), true
		case flags.NoCluster && o.Sharded:
			return appendErr(out, script.ErrNoCluster), true
		case !flags.NoWrites && !flags.AllowOOM && ov.Refusing():
			return appendErr(out, kv.ErrOOM), true
		}
		ro = ro || flags.NoWrites
		if flags.AllowOOM {
			ov.SetAllowOOM(true)
		}
	}
	*sc = caller{st: st, ov: ov, ro: ro, run: run.run, slot: -1, buf: sc.buf[:0]}
	if o.Sharded && len(keys) > 0 {
		sc.slot = slots.Of(keys[0])
	}
	*opts = script.Options{Running: run.run, BusyAfter: o.BusyAfter}
	var reply script.Reply
	var err error
	if bySHA {
		reply, err = st.cache.EvalSHA(st.ctx, strings.ToLower(string(args[1])), keys, argv, sc, opts)
	} else {
		reply, err = st.cache.Eval(st.ctx, args[1], keys, argv, sc, opts)
	}
	if err != nil {
		return append(append(append(out, '-'), err.Error()...), '\r', '\n'), true
	}
	return reply.Append(out, o.RESP3), reply.Kind == script.Error // an error the script returned is an error reply too
}

// start registers a script about to run on keys (for BUSY and SCRIPT
// KILL); remove unregisters it.
func (st *Scripts) start(keys [][]byte) *scriptRun {
	run := &scriptRun{keys: keys}
	run.run = &run.running
	st.add(run)
	return run
}

func (st *Scripts) add(r *scriptRun) {
	st.mu.Lock()
	st.running[r] = struct{}{}
	st.n.Store(int32(len(st.running)))
	st.mu.Unlock()
}

func (st *Scripts) remove(r *scriptRun) {
	st.mu.Lock()
	delete(st.running, r)
	st.n.Store(int32(len(st.running)))
	if st.busy.Load() != 0 {
		st.recountLocked() // a busy script ended: the commands it held answer at once
	}
	st.mu.Unlock()
}

// recountLocked counts the running scripts past busy-reply-threshold;
// the caller holds st.mu.
func (st *Scripts) recountLocked() {
	n, live := int32(0), int32(0)
	for r := range st.running {
		if r.run.Busy() {
			n++
			if r.held != nil {
				live++
			}
		}
	}
	st.busy.Store(n)
	st.liveBusy.Store(live)
}

// watchBusy counts the scripts past busy-reply-threshold every 10 ms, so
// that the commands of a server with no busy script pay one atomic load
// for the check (Busy).
func (st *Scripts) watchBusy() {
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
			st.liveBusy.Store(0)
			continue
		}
		st.mu.Lock()
		st.recountLocked()
		st.mu.Unlock()
	}
}

// AnyBusy reports whether a script runs past busy-reply-threshold: one
// atomic load, for every command's check.
func (st *Scripts) AnyBusy() bool { return st.busy.Load() != 0 }

// Busy reports whether a script that runs past busy-reply-threshold holds
// one of the keys of args at positions (Cmd.KeyPositions): the command
// then answers BUSY. A script stalls only the commands on its keys.
func (st *Scripts) Busy(args [][]byte, positions iter.Seq[int]) bool {
	if st.busy.Load() == 0 {
		return false
	}
	st.mu.Lock()
	defer st.mu.Unlock()
	for r := range st.running {
		if !r.run.Busy() {
			continue
		}
		for i := range positions {
			if r.held != nil && r.held[engine.ShardOf(args[i], len(r.held))] {
				return true // on a shard it holds
			}
			if slices.ContainsFunc(r.keys, func(k []byte) bool { return string(k) == string(args[i]) }) {
				return true
			}
		}
	}
	return false
}

// Load compiles and caches a script (SCRIPT LOAD) and returns its SHA1,
// or the compile error's text.
func (st *Scripts) Load(src []byte) (sha string, errText string) {
	sha, err := st.cache.Load(src)
	if err != nil {
		return "", err.Error()
	}
	return sha, ""
}

// Exists reports whether the script of sha (any case) is cached.
func (st *Scripts) Exists(sha []byte) bool {
	return st.cache.Exists(strings.ToLower(string(sha)))
}

// Flush empties the cache (SCRIPT FLUSH).
func (st *Scripts) Flush() { st.cache.Flush() }

// Kill stops the running script (SCRIPT KILL): the one past
// busy-reply-threshold if there is one. It returns the error text when
// no script runs or the script has written.
func (st *Scripts) Kill() string {
	st.mu.Lock()
	var target *script.Running
	for r := range st.running {
		if r.run.Active() && (target == nil || r.run.Busy()) {
			target = r.run
		}
	}
	st.mu.Unlock()
	if target == nil {
		return script.ErrNotBusy
	}
	if err := target.Kill(); err != nil {
		return err.Error()
	}
	return ""
}

func init() {
	eval := func(name, since, summary string, bySHA, ro bool) *Cmd {
		flags := []string{"noscript", "stale", "skip_monitor", "may_replicate", "no_mandatory_keys", "movablekeys"}
		if ro {
			flags = []string{"readonly", "noscript", "stale", "skip_monitor", "no_mandatory_keys", "movablekeys"}
		}
		return &Cmd{Name: name, Arity: -3, Flags: flags, ACL: []string{"@slow", "@scripting"},
			Summary: summary, Group: "scripting", Since: since, MovableKeys: EvalKeys,
			Run: func(x *Call, args [][]byte) {
				x.write(x.Env.Scripts().Eval(args, bySHA, ro, x.run()))
			}}
	}
	scriptSub := func(name string, arity int, flags []string, summary string, run Handler) *Cmd {
		sc := sub("script", name, arity, flags, summary, run)
		sc.ACL, sc.Group, sc.Since = []string{"@slow", "@scripting"}, "scripting", "2.6.0"
		return sc
	}
	register(
		eval("eval", "2.6.0", "Executes a server-side Lua script.", false, false),
		eval("evalsha", "2.6.0", "Executes a server-side Lua script by SHA1 digest.", true, false),
		eval("eval_ro", "7.0.0", "Executes a read-only server-side Lua script.", false, true),
		eval("evalsha_ro", "7.0.0", "Executes a read-only server-side Lua script by SHA1 digest.", true, true),
		container("script", "A container for Lua scripts management commands.", "scripting",
			scriptSub("load", 3, []string{"noscript", "stale"}, "Loads a server-side Lua script to the script cache.", scriptLoad),
			scriptSub("exists", -3, []string{"noscript"}, "Determines whether server-side Lua scripts exist in the script cache.", scriptExists),
			scriptSub("flush", -2, []string{"noscript"}, "Removes all server-side Lua scripts from the script cache.", scriptFlush),
			scriptSub("kill", 2, []string{"noscript", "allow_busy"}, "Terminates a server-side Lua script during execution.", scriptKill),
		),
	)
}

func scriptLoad(x *Call, args [][]byte) {
	sha, text := x.Env.Scripts().Load(args[2])
	if text != "" {
		x.fail(text)
		return
	}
	x.W.BulkString(sha)
}

func scriptExists(x *Call, args [][]byte) {
	st := x.Env.Scripts()
	x.W.Array(len(args) - 2)
	for _, a := range args[2:] {
		if st.Exists(a) {
			x.W.Int(1)
		} else {
			x.W.Int(0)
		}
	}
}

func scriptFlush(x *Call, args [][]byte) {
	if len(args) > 3 || (len(args) == 3 && !EqualFold(args[2], "async") && !EqualFold(args[2], "sync")) {
		x.fail(errScriptFlushOption)
		return
	}
	x.Env.Scripts().Flush()
	x.W.OK()
}

func scriptKill(x *Call, _ [][]byte) { x.okOr(x.Env.Scripts().Kill()) }

// EvalCall is one EVAL-family command of a pipeline (EvalBatch).
type EvalCall struct {
	Args      [][]byte
	BySHA, RO bool
}

// maxScriptBatch bounds the scripts of a pipeline run as one batch: their
// reads and their effects are each one backend call.
const maxScriptBatch = 128

// EvalBatch runs a pipeline's consecutive EVAL-family commands, in order,
// and returns their outcomes (outs is reused when long enough). It gives
// what running them one at a time (Eval) would give, in fewer backend
// calls: the declared keys of every script of a segment are read in one
// call, the scripts run one after another, each on its own overlay, and
// the effects of all of them are applied in one call (in a cluster, one
// log entry).
//
// A segment holds scripts whose keys are pairwise disjoint: it ends
// before a script that declares a key an earlier one of the segment
// declared or touched, and a script that turns out to touch (undeclared)
// a key an earlier one touched is dropped from it, its run discarded: it
// starts the next segment, after the effects before it are applied, so
// it sees them. Disjoint scripts' effects commute, so applying them
// together is running them in order. A script whose effects meet a key
// changed by another client since the read runs again alone (onOverlay),
// after the rest of its segment applied: with disjoint keys that is still
// the pipeline's order for every key.
func (st *Scripts) EvalBatch(calls []EvalCall, o Run, outs []Outcome) []Outcome {
	outs = slices.Grow(outs[:0], len(calls))[:len(calls)]
	if st.live(o) {
		st.evalLive(calls, o, outs)
		return outs
	}
	for i := 0; i < len(calls); {
		i += st.evalSegment(calls[i:], o, outs[i:])
	}
	return outs
}

// segmentRun is one script of a segment as it ran.
type segmentRun struct {
	keys  [][]byte
	ov    *kv.Overlay
	fetch int // index of its read in the segment's requests; -1: none
	apply int // index of its effects in the segment's requests; -1: none
	txn   *kv.Txn
	done  bool // its outcome is final
}

// evalSegment runs the longest segment at the head of calls (at least
// one call) and returns how many calls it answered.
func (st *Scripts) evalSegment(calls []EvalCall, o Run, outs []Outcome) int {
	if len(calls) == 1 {
		c := calls[0]
		outs[0] = st.evalCopy(c.Args, c.BySHA, c.RO, o)
		return 1
	}
	n := min(len(calls), maxScriptBatch)
	runs := make([]segmentRun, n)
	declared := map[string]struct{}{}
	var reqs []engine.Request
	end := n
	for i := range n {
		c := calls[i]
		r := &runs[i]
		r.fetch, r.apply = -1, -1
		keys, text := st.scriptKeys(c.Args, c.BySHA)
		if text != "" {
			outs[i], r.done = failed(text), true
			continue
		}
		clash := false
		for _, k := range keys {
			if _, ok := declared[string(k)]; ok {
				clash = true
				break
			}
		}
		if clash {
			end = i
			break
		}
		for _, k := range keys {
			declared[string(k)] = struct{}{}
		}
		r.keys = keys
		if len(keys) > 0 {
			r.fetch = len(reqs)
			reqs = append(reqs, kv.NewDump(keys).Request())
		}
	}
	if end == 0 {
		// Cannot happen (the first call clashes with nothing); answer one.
		outs[0] = st.evalCopy(calls[0].Args, calls[0].BySHA, calls[0].RO, o)
		return 1
	}
	runs = runs[:end]
	res := make([]engine.Result, len(reqs))
	var batchErr error
	if len(reqs) > 0 {
		batchErr = st.backend.Do(context.Background(), reqs, res)
	}
	touched := map[string]struct{}{}
	for i := range runs {
		r := &runs[i]
		if r.done {
			continue
		}
		if batchErr != nil {
			outs[i], r.done = failed(Text(batchErr)), true
			continue
		}
		ov := kv.NewOverlay(time.Now().UnixNano(), st.fetch)
		if r.fetch >= 0 {
			states, err := kv.DumpOutcome(res[r.fetch], len(r.keys))
			if err != nil {
				outs[i], r.done = failed(Text(err)), true
				continue
			}
			ov.Preload(r.keys, states)
		}
		c := calls[i]
		run := st.start(r.keys)
		reply, isErr := st.runScript(ov, run, c.Args, c.BySHA, c.RO, o, nil)
		st.remove(run)
		clash := false
		for _, k := range ov.Touched() {
			if _, ok := touched[k]; ok {
				clash = true
				break
			}
		}
		if clash {
			// It read a key an earlier script of the segment may write:
			// its run is void; it starts the next segment.
			runs = runs[:i]
			break
		}
		for _, k := range ov.Touched() {
			touched[k] = struct{}{}
		}
		switch {
		case st.ctx.Err() != nil:
			outs[i], r.done = failed(errScriptStopped), true
		case ov.Err() != nil:
			outs[i], r.done = failed(Text(ov.Err())), true
		case ov.Wrote() || !ov.Consistent():
			r.ov, r.txn = ov, ov.Effects(false)
			outs[i] = Outcome{Reply: reply, Failed: isErr}
		default:
			outs[i], r.done = Outcome{Reply: reply, Failed: isErr}, true
		}
	}
	reqs = reqs[:0]
	for i := range runs {
		if r := &runs[i]; r.txn != nil {
			r.apply = len(reqs)
			reqs = append(reqs, r.txn.Request())
		}
	}
	if len(reqs) > 0 {
		res = slices.Grow(res[:0], len(reqs))[:len(reqs)]
		clear(res)
		batchErr = st.backend.Do(context.Background(), reqs, res)
	}
	for i := range runs {
		r := &runs[i]
		if r.apply < 0 {
			continue
		}
		var err error
		if batchErr != nil {
			err = batchErr
		} else {
			err = r.txn.Outcome(res[r.apply])
		}
		switch {
		case err == nil:
		case errors.Is(err, kv.ErrConflict):
			// Another client changed one of its keys: it runs again, alone.
			c := calls[i]
			outs[i] = st.evalCopy(c.Args, c.BySHA, c.RO, o)
		default:
			outs[i] = failed(effectsError(err))
		}
	}
	if len(runs) == 0 {
		// The first script clashed with none before it: cannot happen;
		// answer it alone.
		outs[0] = st.evalCopy(calls[0].Args, calls[0].BySHA, calls[0].RO, o)
		return 1
	}
	return len(runs)
}
