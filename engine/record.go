package engine

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"strings"
)

// Record is one key's whole state in a kind-independent form, for
// snapshots. Fields holds the state's int64s, by kind (times are ns since
// the Unix epoch, lengths in ns):
//
//	KindGCRA    [tat]                      theoretical arrival time
//	KindFixed   [end, window, count]       window end (a multiple of window), length, units admitted
//	KindSliding [end, window, cur, prev]   current window end (a multiple of window), length, its units, the previous window's units
//	KindLog     [window, t1, ..., tn]      window length, then one timestamp per admitted unit, oldest first (1 <= n <= MaxLogLimit)
//	KindShape   [end]                      time at which the queue is empty
//
// These layouts are part of the snapshot format: append fields, never
// reorder them.
type Record struct {
	Key    string
	Kind   Kind
	Fields []int64
}

// exportChunk bounds the keys a shard examines per step of Export and the
// records it inserts per step of Import, so a shard is never held long.
const exportChunk = 4096

// maxStored bounds every stored time: now plus one duration.
const maxStored = MaxNow + MaxDuration

// Export calls fn with every key whose state is not empty at nowNanos, one
// shard after another. Each shard advances to nowNanos, then copies its
// records on its own goroutine in steps of at most exportChunk keys, and fn
// runs between steps, outside the shard, so requests keep flowing.
// Each record is consistent; records are copied at different instants.
// Every key that lives throughout the export appears exactly once; keys
// created or deleted during it appear at most once. fn may keep the
// records. Export returns the largest shard time it saw, which is at least
// every time reflected in the records: restore it with Import so the clock
// never runs backwards across a restart. An error from fn, or ctx ending
// (checked between steps), stops the export and is returned.
func (e *Engine) Export(ctx context.Context, nowNanos int64, fn func(Record) error) (clockNanos int64, err error) {
	for _, s := range e.shards {
		x := &exporter{}
		if err := e.onShard(ctx, s, func(s *shard) { s.advance(nowNanos); x.start(s) }); err != nil {
			return clockNanos, err // the walk never started
		}
		for {
			var recs []Record
			var more bool
			var now int64
			if err := e.onShard(ctx, s, func(s *shard) { recs, more = x.step(); now = s.now }); err != nil {
				x.abort(s)
				return clockNanos, err
			}
			clockNanos = max(clockNanos, now)
			for _, rec := range recs {
				if err := fn(rec); err != nil {
					x.abort(s)
					return clockNanos, err
				}
			}
			if !more {
				break
			}
		}
	}
	return clockNanos, nil
}

// exporter walks one shard's index across several jobs. The walk is a
// paused map iteration (iter.Pull): it only runs inside next, which only
// the shard goroutine calls, so the map is never touched concurrently.
// Go allows a map to change while it is iterated: entries deleted before
// they are reached are not produced, entries added may or may not be. A
// key deleted and added again is a new entry that could be produced a
// second time, so keys added during the walk (noted in created by
// shard.insert) are skipped. Flush replaces the map, which gen detects.
type exporter struct {
	s       *shard
	gen     uint64
	next    func() (struct{}, bool)
	stop    func()
	created map[string]struct{}
	out     []Record
}

func (x *exporter) start(s *shard) {
	x.s, x.gen = s, s.gen
	x.created = make(map[string]struct{})
	s.walks = append(s.walks, x)
	index := s.index
	x.next, x.stop = iter.Pull(func(yield func(struct{}) bool) {
		examined := 0
		for k, r := range index {
			if x.s.gen != x.gen {
				return // flushed: every key that was here is gone
			}
			if _, ok := x.created[k]; !ok && x.s.expiresAt(r) > x.s.now {
				x.out = append(x.out, x.s.record(k, r))
			}
			if examined++; examined == exportChunk {
				examined = 0
				if !yield(struct{}{}) {
					return
				}
			}
		}
	})
}

// step copies the live records among the next exportChunk keys and reports
// whether more keys remain. It runs on the shard goroutine.
func (x *exporter) step() (recs []Record, more bool) {
	x.out = nil
	_, more = x.next()
	if !more {
		x.end()
	}
	return x.out, more
}

// end stops the walk and unregisters it, on the shard goroutine.
func (x *exporter) end() {
	if x.stop == nil {
		return // never started
	}
	x.stop()
	x.s.walks = slices.DeleteFunc(x.s.walks, func(y *exporter) bool { return y == x })
	x.created = nil
}

// abort ends a started walk on the shard goroutine. The job is sent even
// though ctx may be done: shards never block, so the send waits at most for
// the shard's queue to drain, and a paused iteration must not be left
// behind.
func (x *exporter) abort(s *shard) {
	s.ch <- job{fn: func(*shard) { x.end() }, done: make(chan struct{}, 1)}
}

// record copies the state of key k at ref r.
func (s *shard) record(k string, r ref) Record {
	rec := Record{Key: k, Kind: r.kind()}
	switch r.kind() {
	case KindGCRA:
		rec.Fields = []int64{s.gcra.vals[r.slot()]}
	case KindFixed:
		st := s.fixed.vals[r.slot()]
		rec.Fields = []int64{st.end, st.window, st.count}
	case KindSliding:
		st := s.sliding.vals[r.slot()]
		rec.Fields = []int64{st.end, st.window, st.cur, st.prev}
	case KindLog:
		st := &s.log.vals[r.slot()]
		rec.Fields = make([]int64, 1+st.n)
		rec.Fields[0] = st.window
		for i := range st.n {
			rec.Fields[1+i] = st.at(i)
		}
	case KindShape:
		rec.Fields = []int64{s.shape.vals[r.slot()]}
	default:
		panic("engine: unknown kind in index")
	}
	return rec
}

// Import validates recs and inserts them, replacing any state their keys
// hold. Every shard first advances to nowNanos (the clock Export returned),
// so time never runs backwards across a restart; records whose state is
// empty at that time are left out (and remove their key). If any record is
// invalid, Import returns an error wrapping ErrBadRecord and inserts
// nothing. Records are inserted in steps of at most exportChunk per shard
// job. ctx is checked between steps; on its error some records may have
// been inserted. Import does not keep recs, and no shard reads them after
// Import returns.
func (e *Engine) Import(ctx context.Context, nowNanos int64, recs []Record) error {
	for i := range recs {
		if why := checkRecord(&recs[i]); why != "" {
			return fmt.Errorf("%w: record %d (key %q, kind %d): %s", ErrBadRecord, i, recs[i].Key, recs[i].Kind, why)
		}
	}
	n := len(e.shards)
	byShard := make([][]int32, n)
	for i := range recs {
		si := ShardOf([]byte(recs[i].Key), n)
		byShard[si] = append(byShard[si], int32(i))
	}
	for si, s := range e.shards {
		idx := byShard[si]
		for {
			chunk := idx[:min(len(idx), exportChunk)]
			err := e.onShard(ctx, s, func(s *shard) {
				s.advance(nowNanos)
				for _, i := range chunk {
					s.put(&recs[i])
				}
			})
			if err != nil {
				return err
			}
			idx = idx[len(chunk):]
			if len(idx) == 0 {
				break
			}
		}
	}
	return nil
}

// checkRecord reports why rec is not a state the engine could have made,
// or "" when it is valid. Bounds keep every later sum within int64.
func checkRecord(rec *Record) string {
	f := rec.Fields
	time := func(t int64) bool { return t >= 0 && t <= maxStored }
	window := func(w int64) bool { return w >= 1 && w <= MaxDuration }
	aligned := func(end, w int64) bool { return time(end) && end >= w && end%w == 0 }
	count := func(c int64) bool { return c >= 0 && c <= MaxLimit }
	switch rec.Kind {
	case KindGCRA, KindShape:
		if len(f) != 1 || !time(f[0]) {
			return "want [time]"
		}
	case KindFixed:
		if len(f) != 3 || !window(f[1]) || !aligned(f[0], f[1]) || !count(f[2]) || f[2] == 0 {
			return "want [end, window, count] with end a multiple of window and count >= 1"
		}
	case KindSliding:
		if len(f) != 4 || !window(f[1]) || !aligned(f[0], f[1]) || !count(f[2]) || !count(f[3]) || f[2]+f[3] == 0 {
			return "want [end, window, cur, prev] with end a multiple of window and a count >= 1"
		}
	case KindLog:
		if len(f) < 2 || len(f) > 1+MaxLogLimit || !window(f[0]) {
			return "want [window, t1, ..., tn] with 1 <= n <= MaxLogLimit"
		}
		for i := 1; i < len(f); i++ {
			if f[i] < 0 || f[i] > MaxNow || (i > 1 && f[i] < f[i-1]) {
				return "log times must be ascending and within [0, MaxNow]"
			}
		}
	default:
		return "unknown kind"
	}
	return ""
}

// put stores a checked record under its key, replacing what the key holds.
// The key is copied so the index never pins the caller's buffers.
func (s *shard) put(rec *Record) {
	if old, ok := s.index[rec.Key]; ok {
		delete(s.index, rec.Key)
		s.free(old)
	}
	s.dirty++
	f := rec.Fields
	var r ref
	switch rec.Kind {
	case KindGCRA:
		r = makeRef(KindGCRA, s.gcra.add(f[0]))
	case KindFixed:
		r = makeRef(KindFixed, s.fixed.add(fixedState{end: f[0], window: f[1], count: f[2]}))
	case KindSliding:
		r = makeRef(KindSliding, s.sliding.add(slidingState{end: f[0], window: f[1], cur: f[2], prev: f[3]}))
	case KindLog:
		st := logState{window: f[0], n: uint32(len(f) - 1), ring: make([]int64, len(f)-1)}
		copy(st.ring, f[1:])
		r = makeRef(KindLog, s.log.add(st))
	case KindShape:
		r = makeRef(KindShape, s.shape.add(f[0]))
	}
	if s.expiresAt(r) <= s.now {
		s.free(r)
		return
	}
	s.insert(strings.Clone(rec.Key), r)
}

// onShard runs fn on s's goroutine and waits for it. Either fn ran and
// onShard returns nil, or it was never queued and onShard returns ctx's
// error: ctx only bounds the wait to enqueue. Once queued, fn is waited for
// even if ctx ends, so nothing fn touches is used after onShard returns;
// that wait is short because fn is one bounded step and shards never block.
func (e *Engine) onShard(ctx context.Context, s *shard, fn func(*shard)) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan struct{}, 1)
	select {
	case s.ch <- job{fn: fn, done: done}:
	case <-ctx.Done():
		return ctx.Err()
	}
	<-done
	return nil
}
