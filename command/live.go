package command

import (
	"context"
	"errors"
	"slices"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/script"
)

// Scripts on live state. Where the backend is the engine in this process
// and nothing replicates a write (a server running alone), a script runs
// as Redis runs it: on the engine itself, holding the shards of its
// declared keys for the length of the run, so it reads its keys in place
// and its writes land without a second trip or a check. A pipeline's
// scripts run as one engine command, one after another in order, holding
// the shards of all their keys.
//
// The run still goes through a kv.Overlay (NewLiveOverlay): a key is read
// in place, and copied only when a write command first reaches it, so
// nothing reaches the shard until the script ends (kv.Overlay.ApplyLive).
// A script that touches a key on a shard it does not hold, or asks what
// only the whole engine knows (DBSIZE), is stopped and discarded (it
// changed nothing) and runs again on a copy of its keys (the optimistic
// path of script.go), after the scripts before it and before those after
// it, so a pipeline keeps its order.
//
// The price is Redis's: a slow script holds its shards. The commands on
// them wait for it; past busy-reply-threshold they answer BUSY (Busy),
// and SCRIPT KILL stops a script that has not written, as before.

// LiveEngine is what a backend offers when it runs commands on the
// engine's live state in this process, where nothing replicates them (a
// server running alone): the engine's shard count, so a script knows which
// shard holds each key (engine.ShardOf).
type LiveEngine interface {
	Shards() int
}

// liveBatch is a run of scripts as one engine command (engine.Command):
// it holds the shards of every declared key of its scripts. Batches are
// pooled (Scripts.batches) with everything a run needs.
type liveBatch struct {
	st      *Scripts
	calls   []EvalCall
	o       Run
	outs    []Outcome
	keys    [][][]byte // each script's declared keys
	errs    []string   // each script's argument error, or ""
	all     [][]byte   // every declared key (Keys)
	held    []bool     // held[si]: the batch holds shard si
	localFn func([]byte) bool
	ran     int // scripts answered; fewer than len(calls) when one reached past held

	// Reused by each script in turn.
	run    scriptRun
	ov     kv.Overlay
	caller caller
	opts   script.Options
	req    [1]engine.Request
	res    [1]engine.Result
}

// Keys implements engine.Command.
func (b *liveBatch) Keys() [][]byte { return b.all }

func (b *liveBatch) local(key []byte) bool { return b.held[engine.ShardOf(key, len(b.held))] }

// Exec implements engine.Command: it runs the scripts in order on ks and
// leaves their outcomes in b.outs. Its own reply is empty.
func (b *liveBatch) Exec(ks engine.Keyspace, dst []byte) []byte {
	st := b.st
	b.ran = len(b.calls)
	run := &b.run // one registration at a time, reused
	run.run, run.held = &run.running, b.held
	for i, c := range b.calls {
		if b.errs[i] != "" {
			b.outs[i] = failed(b.errs[i])
			continue
		}
		if st.ctx.Err() != nil {
			b.outs[i] = failed(errScriptStopped)
			continue
		}
		run.keys = b.keys[i]
		st.add(run)
		b.ov.ResetLive(ks, b.localFn)
		ov := &b.ov
		reply, isErr := st.runWith(&b.caller, &b.opts, ov, run, c.Args, c.BySHA, c.RO, b.o, nil)
		st.remove(run)
		switch {
		case errors.Is(ov.Err(), kv.ErrNotLocal):
			b.ran = i // it runs again on a copy, then the rest
			return dst
		case st.ctx.Err() != nil:
			b.outs[i] = failed(errScriptStopped)
		case ov.Err() != nil:
			b.outs[i] = failed(Text(ov.Err()))
		case ov.Wrote() && !ov.ApplyLive():
			b.outs[i] = failed(kv.ErrOOM)
		default:
			b.outs[i] = Outcome{Reply: reply, Failed: isErr}
		}
	}
	return dst
}

// live reports whether scripts run on live state (LiveEngine): never in a
// cluster, whose replicas apply a script's effects, not the script.
func (st *Scripts) live(o Run) bool { return st.shards > 0 && !o.Sharded }

// evalLive runs calls in order on live state, each batch of up to
// maxScriptBatch as one engine command, and writes their outcomes.
func (st *Scripts) evalLive(calls []EvalCall, o Run, outs []Outcome) {
	for i := 0; i < len(calls); {
		n := min(len(calls)-i, maxScriptBatch)
		ran := st.liveSegment(calls[i:i+n], o, outs[i:i+n])
		i += ran
		if ran < n {
			// It reached past the shards held: on a copy of its keys.
			c := calls[i]
			outs[i] = st.evalCopy(c.Args, c.BySHA, c.RO, o)
			i++
		}
	}
}

// liveSegment runs calls as one engine command and returns how many it
// answered: all of them, unless one reached past the shards held (it and
// those after it did not run).
func (st *Scripts) liveSegment(calls []EvalCall, o Run, outs []Outcome) int {
	b, _ := st.batches.Get().(*liveBatch)
	if b == nil {
		b = &liveBatch{st: st, held: make([]bool, st.shards)}
		b.localFn = b.local
	}
	defer st.putBatch(b)
	n := len(calls)
	b.calls, b.o, b.outs = calls, o, outs
	b.keys = slices.Grow(b.keys[:0], n)[:n]
	b.errs = slices.Grow(b.errs[:0], n)[:n]
	for i, c := range calls {
		keys, text := st.scriptKeys(c.Args, c.BySHA)
		b.keys[i], b.errs[i] = keys, text
		for _, k := range keys {
			b.all = append(b.all, k)
			b.held[engine.ShardOf(k, st.shards)] = true
		}
	}
	if len(b.all) == 0 {
		b.held[engine.ShardOf(nil, st.shards)] = true // the shard a keyless command runs on
	}
	b.req[0] = engine.CommandRequest(b, false)
	if err := st.backend.Do(context.Background(), b.req[:], b.res[:]); err != nil {
		for i := range outs {
			outs[i] = failed(Text(err))
		}
		return n
	}
	return b.ran
}

// putBatch empties b of its run's references and pools it.
func (st *Scripts) putBatch(b *liveBatch) {
	clear(b.keys)
	clear(b.errs)
	clear(b.all)
	clear(b.held)
	b.calls, b.outs, b.all = nil, nil, b.all[:0]
	b.run.keys = nil
	b.ov.Release()
	b.caller.ov, b.opts = nil, script.Options{}
	b.req[0], b.res[0] = engine.Request{}, engine.Result{}
	st.batches.Put(b)
}
