package command

import (
	"context"
	"slices"
	"strconv"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/script"
	"github.com/rlserver/rlserver/slots"
)

// caller runs a script's redis.call on its overlay: a data command
// through kv, a limiter command simulated on the copy of its key.
type caller struct {
	st   *Scripts
	ov   *kv.Overlay
	ro   bool
	run  *script.Running
	slot int // the slot of the declared keys in a sharded cluster; -1 otherwise
	buf  []byte
	cmd  kv.Cmd // the command running, reused
}

// Call implements script.Caller.
func (sc *caller) Call(args [][]byte, resp3 bool) []byte {
	out := sc.call(args, resp3)
	if sc.ov.Live() && sc.ov.Err() != nil {
		sc.run.Abandon() // it reached past its shards: it runs again on a copy
	}
	return out
}

func (sc *caller) call(args [][]byte, resp3 bool) []byte {
	spec, ok := kv.Lookup(args[0])
	if !ok {
		name := appendLower(nil, args[0])
		lim := lookupLimiter(name)
		switch {
		case string(name) == "select" && len(args) == 2:
			if string(args[1]) != "0" {
				return errReply(ErrDBIndex)
			}
			return []byte("+OK\r\n")
		case string(name) == "dbsize" && len(args) == 1:
			// The keys of the engine as the script runs; a script's own
			// uncommitted writes are not counted. A script on live state
			// holds shards the count needs: it runs again on a copy.
			if sc.ov.Live() {
				sc.ov.Abort()
				return errReply(Text(kv.ErrNotLocal))
			}
			n, err := sc.st.backend.Len(context.Background())
			if err != nil {
				return errReply(Text(err))
			}
			return []byte(":" + strconv.Itoa(n) + "\r\n")
		case lim != nil:
			if !lim.ArityOK(len(args)) {
				return errReply(script.ErrWrongArgs)
			}
			return sc.limiter(lim, args, resp3, nil)
		case Lookup(name) != nil:
			return errReply(script.ErrNotAllowed) // server and admin commands, RL.CHECK's policies
		}
		return errReply(script.ErrUnknownCommand)
	}
	if !spec.ArityOK(len(args)) {
		return errReply(script.ErrWrongArgs)
	}
	if spec.NoScript() {
		return errReply(script.ErrNotAllowed) // BLPOP, BRPOP, BLMOVE, BZPOPMIN...: as Redis 7.0 refuses them
	}
	if sc.slot >= 0 {
		for _, k := range spec.KeysOf(args) {
			if slots.Of(k) != sc.slot {
				return errReply(errCrossSlotScript)
			}
		}
	}
	if spec.Write() {
		if sc.ro {
			return errReply(script.ErrReadOnly)
		}
		sc.run.MarkWritten()
	}
	sc.ov.SetWriting(spec.Write())
	sc.cmd.Set(spec, args, resp3)
	sc.cmd.Script = true
	sc.buf = sc.cmd.Exec(sc.ov, sc.buf[:0])
	sc.ov.SetWriting(false)
	return sc.buf
}

// limiter runs a limiter command (RL.ALLOW, CL.THROTTLE, GCRA, RL.FIXED...)
// on the overlay: each of its requests is applied to a copy of its key's
// state (engine.Simulate), and the reply, appended to out, is the
// command's own.
func (sc *caller) limiter(cmd *Cmd, args [][]byte, resp3 bool, out []byte) []byte {
	var memo Memo
	reqs, errText := cmd.Batch(&memo, nil, args)
	if errText != "" {
		return appendErr(out, errText)
	}
	res := make([]engine.Result, len(reqs))
	for i := range reqs {
		r := &reqs[i]
		if sc.slot >= 0 && slots.Of(r.Key) != sc.slot {
			return appendErr(out, errCrossSlotScript)
		}
		var before *engine.Record
		if rec, ok := sc.ov.Record(r.Key); ok {
			before = &rec
		} else if sc.ov.Kind(r.Key) != engine.KindNone {
			res[i] = engine.Result{Err: engine.ErrWrongType} // a data key
			continue
		}
		if !r.ReadOnly && sc.ro && (cmd.Write || r.Op == engine.OpDel) {
			return appendErr(out, script.ErrReadOnly)
		}
		o, after, err := engine.Simulate(r.Key, before, r, sc.ov.Now())
		if err != nil {
			return appendErr(out, Text(err))
		}
		res[i] = o
		if !sameRecord(before, after) {
			sc.run.MarkWritten()
			sc.ov.SetLimiter(r.Key, after)
		}
	}
	if err := FirstErr(res); err != nil {
		return appendErr(out, Text(err))
	}
	w := kv.Writer{B: out, RESP3: resp3}
	cmd.Render(&w, res)
	return w.B
}

func sameRecord(a, b *engine.Record) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Kind == b.Kind && slices.Equal(a.Fields, b.Fields)
}

// FirstErr is the first of the results' errors, or nil.
func FirstErr(res []engine.Result) error {
	for i := range res {
		if res[i].Err != nil {
			return res[i].Err
		}
	}
	return nil
}

func errReply(text string) []byte { return appendErr(nil, text) }

func appendErr(out []byte, text string) []byte {
	return append(append(append(out, '-'), text...), '\r', '\n')
}

// appendLower appends b in lower case to dst.
func appendLower(dst, b []byte) []byte {
	for _, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		dst = append(dst, c)
	}
	return dst
}
