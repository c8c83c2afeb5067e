package engine

import (
	"context"
	"fmt"
	"slices"
)

// Record is one key's whole state in a kind-independent form, for
// snapshots. Fields holds the state's int64s, by kind (times are ns since
// the Unix epoch, lengths in ns):
//
//	KindGCRA    [tat]                      theoretical arrival time
//	            [tat, interval, limit]     the same, kept with the parameters it was charged under (Request.Scaled)
//	KindFixed   [end, window, count]       window end (a multiple of window), length, units admitted
//	KindSliding [end, window, cur, prev]   current window end (a multiple of window), length, its units, the previous window's units
//	KindLog     [window, t1, ..., tn]      window length, then one timestamp per admitted unit, oldest first (1 <= n <= MaxLogLimit)
//	KindShape   [end]                      time at which the queue is empty
//	            [end, interval, limit]     the same, with its parameters (Request.Scaled)
//
// These layouts are part of the snapshot format: append fields, never
// reorder them. A scaled GCRA or SHAPE state has the compact layout with
// two fields appended, so a snapshot that holds none reads as before, and
// the snapshot encoding, which codes only the first field of these kinds
// as a time, carries both forms unchanged.
type Record struct {
	Key    string
	Kind   Kind
	Fields []int64
}

// exportChunk bounds the keys a shard examines per step of Export (and of
// a Snapshot) and the records it inserts per step of Import, so a shard is
// never held long. Tests lower it to interleave steps with writes.
var exportChunk = 4096

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

// exporter walks one shard's table across several jobs, in slot order.
//
// Entries never move while a table lives (table.go), so a key that lives
// throughout the walk stays in one slot, which the walk reaches exactly
// once. Two things could break that, and are handled:
//
//   - A key deleted and inserted again during the walk may land in another
//     slot, one the walk has not reached yet although it was exported
//     already. So the walk notes every slot at or past its position that
//     an insert takes during the walk (created), and skips those: a key
//     created during an export appears at most once.
//   - A rebuild (growth, shrinking, compaction) copies every key into new
//     arrays. The walk then goes on over the old slot array and the old
//     arena (frozen), which the table never writes again once it has
//     replaced them. Every key that lives throughout is in the old slots
//     exactly once: behind the position (exported already) or ahead of it
//     (exported when reached). Its state is looked up in the current
//     table, because an old slab index may belong to another key by then;
//     a key no longer there was deleted during the export and is left
//     out. Keys inserted after the rebuild are in the new arrays only, so
//     the walk never sees them.
//
// Flush replaces the table and the slabs; gen detects it and ends the walk:
// every key that was there is gone.
//
// A point-in-time walk (pit, Engine.Mark) reads the state as it was at its
// start instead: see mark.go.
type exporter struct {
	s       *shard
	gen     uint64
	slots   []slot   // the slot array walked: the table's, until frozen
	arena   []byte   // once frozen, the arena the walked slots point into
	frozen  bool     // the table has replaced slots
	pos     int      // the next slot to examine
	created []uint64 // bit i: slot i >= pos is not to be read (an insert took it during the walk; pit: or its key's state was saved)
	out     []Record

	// Point-in-time walks only (mark.go).
	pit   bool
	now   int64    // the shard's time at the mark: records are the states live then
	src   *shard   // where states are read: s, or the state s had when it was flushed (detach)
	saved []Record // states saved before a change (touch), not yet returned
	done  bool     // the walk has ended (Snapshot.Next's bookkeeping)
}

func (x *exporter) start(s *shard) {
	x.s, x.src, x.gen, x.slots = s, s, s.gen, s.tab.slots
	s.walks = append(s.walks, x)
}

// inserted notes that an insert took slot i of the current table.
func (x *exporter) inserted(i int) {
	if x.frozen || i < x.pos {
		return // the walk never reads that slot (again)
	}
	x.skip(i)
}

// skip marks slot i of x.slots as one the walk does not read.
func (x *exporter) skip(i int) {
	if x.created == nil {
		x.created = make([]uint64, (len(x.slots)+63)/64)
	}
	x.created[i/64] |= 1 << (i % 64)
}

// skipped reports whether skip(i) was called.
func (x *exporter) skipped(i int) bool {
	return x.created != nil && x.created[i/64]&(1<<(i%64)) != 0
}

// freeze is called when the table replaces its arrays: arena is the old
// one, and from now on neither it nor x.slots is ever written.
func (x *exporter) freeze(arena []byte) {
	if !x.frozen {
		x.frozen, x.arena = true, arena
	}
}

// step copies the live records among the next exportChunk keys (reading
// at most 16*exportChunk slots) and reports whether more keys remain. It
// runs on the shard goroutine.
func (x *exporter) step() (recs []Record, more bool) {
	x.out = nil
	s := x.s
	if !x.pit && s.gen != x.gen {
		x.end() // flushed: every key that was here is gone
		return nil, false
	}
	// src is s, or for a point-in-time walk over a flushed state, that
	// state; at is the time at which a record must be live.
	src, at := x.src, s.now
	if x.pit {
		at = x.now
	}
	for examined, scanned := 0, 0; x.pos < len(x.slots) && examined < exportChunk && scanned < 16*exportChunk; x.pos, scanned = x.pos+1, scanned+1 {
		sl := &x.slots[x.pos]
		if !sl.used() || x.skipped(x.pos) {
			continue
		}
		examined++
		var key []byte
		if x.frozen {
			key = keyOf(x.arena, sl)
			i := src.tab.find(key, hashKey(key))
			if i < 0 {
				continue // deleted since the table was rebuilt
			}
			sl = &src.tab.slots[i]
		} else {
			key = keyOf(src.tab.arena, sl)
		}
		if src.expiresAt(sl.kind(), sl.val) > at {
			x.out = append(x.out, src.record(key, sl.kind(), sl.val))
		}
	}
	if len(x.saved) > 0 {
		x.out = append(x.out, x.saved...)
		x.saved = nil
	}
	more = x.pos < len(x.slots)
	if !more {
		x.end()
	}
	return x.out, more
}

// end unregisters the walk, on the shard goroutine.
func (x *exporter) end() {
	if x.s == nil {
		return // never started
	}
	x.s.walks = slices.DeleteFunc(x.s.walks, func(y *exporter) bool { return y == x })
	x.s.freeRetired()
	x.slots, x.arena, x.created, x.src, x.saved = nil, nil, nil, nil, nil
}

// abort ends a started walk on the shard goroutine. The job is sent even
// though ctx may be done: shards never block, so the send waits at most for
// the shard's queue to drain, and a registered walk must not be left
// behind.
func (x *exporter) abort(s *shard) {
	s.ch <- job{fn: func(*shard) { x.end() }, done: make(chan struct{}, 1)}
}

// record copies key's state, of kind k in value v (a slot's).
func (s *shard) record(key []byte, k Kind, v int64) Record {
	rec := Record{Key: string(key), Kind: k.visible()}
	switch k {
	case kindData:
		rec.Kind, rec.Fields = s.dataRecord(v)
	case KindGCRA, KindShape:
		rec.Fields = []int64{v}
	case kindGCRAScaled, kindShapeScaled:
		st := s.scaled.vals[v]
		rec.Fields = []int64{st.val, st.interval, st.limit}
	case KindFixed:
		st := s.fixed.vals[v]
		rec.Fields = []int64{st.end, st.window, st.count}
	case KindSliding:
		st := s.sliding.vals[v]
		rec.Fields = []int64{st.end, st.window, st.cur, st.prev}
	case KindLog:
		st := &s.log.vals[v]
		rec.Fields = make([]int64, 1+st.n)
		rec.Fields[0] = st.window
		for i := range st.n {
			rec.Fields[1+i] = st.at(i)
		}
	default:
		panic("engine: unknown kind in index")
	}
	return rec
}

// ValidateRecords checks records as Import does, inserting nothing: an
// error wraps ErrBadRecord and names the first invalid record.
func ValidateRecords(recs []Record) error {
	for i := range recs {
		if why := checkRecord(&recs[i]); why != "" {
			return fmt.Errorf("%w: record %d (key %q, kind %d): %s", ErrBadRecord, i, recs[i].Key, recs[i].Kind, why)
		}
	}
	return nil
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
	if err := ValidateRecords(recs); err != nil {
		return err
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
		switch {
		case len(f) == 1 && time(f[0]):
		case len(f) == 3 && time(f[0]) && f[1] >= 1 && f[1] <= MaxDuration && f[2] >= 1 && f[2] <= MaxDuration/f[1]:
		default:
			return "want [time] or [time, interval, limit] with interval, limit >= 1 and interval*limit <= MaxDuration"
		}
	case KindFixed:
		if len(f) != 3 || !window(f[1]) || !aligned(f[0], f[1]) || !count(f[2]) || f[2] == 0 {
			return "want [end, window, count] with end a multiple of window and count >= 1"
		}
	case KindSliding:
		if len(f) != 4 || !window(f[1]) || !aligned(f[0], f[1]) || !count(f[2]) || !count(f[3]) || f[2]+f[3] == 0 {
			return "want [end, window, cur, prev] with end a multiple of window and a count >= 1"
		}
	case KindString, KindHash, KindZSet, KindList, KindSet:
		return checkDataRecord(rec)
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
// The key is copied into the table's arena, so the table never pins the
// caller's buffers.
func (s *shard) put(rec *Record) {
	key := []byte(rec.Key)
	h := hashKey(key)
	if i := s.tab.find(key, h); i >= 0 {
		s.remove(i)
	}
	s.dirty++
	f := rec.Fields
	switch rec.Kind {
	case KindString, KindHash, KindZSet, KindList, KindSet:
		s.putData(key, h, rec)
		return
	}
	// The state is built, and its expiry found, before insert, which may
	// rebuild the table and renumber the slabs.
	var (
		fx      fixedState
		sw      slidingState
		lg      logState
		expires int64
	)
	k := rec.Kind
	switch k {
	case KindGCRA, KindShape:
		expires = f[0]
		if len(f) == 3 {
			k = k.scaledKind()
		}
	case KindFixed:
		fx = fixedState{end: f[0], window: f[1], count: f[2]}
		expires = fx.end
	case KindSliding:
		sw = slidingState{end: f[0], window: f[1], cur: f[2], prev: f[3]}
		expires = sw.expiresAt()
	case KindLog:
		lg = logState{window: f[0], n: uint32(len(f) - 1), ring: slices.Clone(f[1:])}
		expires = lg.expiresAt()
	}
	if expires <= s.now {
		return
	}
	i := s.insert(key, h, k)
	switch k {
	case KindGCRA, KindShape:
		s.tab.slots[i].val = f[0]
	case kindGCRAScaled, kindShapeScaled:
		s.tab.slots[i].val = s.scaled.add(scaledState{val: f[0], interval: f[1], limit: f[2]})
	case KindFixed:
		s.tab.slots[i].val = s.fixed.add(fx)
	case KindSliding:
		s.tab.slots[i].val = s.sliding.add(sw)
	case KindLog:
		s.tab.slots[i].val = s.log.add(lg)
	}
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
