package engine

import (
	"context"
	"io"
)

// Point-in-time exports (Engine.Mark): the state exactly as it was at one
// instant, read while requests keep changing it, in steps of exportChunk
// keys, so neither the shards nor the caller's memory holds the whole
// state at once. The Raft FSM takes one for each snapshot: Mark between
// two entries (O(shards)), then Next outside its lock while entries are
// applied.
//
// Copy on write. At the mark every shard starts a walk over its slot
// array (exporter, pit set) and notes its time. From then on, before any
// request reads, changes or removes a key (shard.lookup and shard.remove
// call touch, which every path to a key's state goes through: decisions,
// data commands, DEL, expiry on access, the sweep, a rebuild's drops,
// eviction, DeleteMatching, Import's replacements), the walk is told: if
// the key is one the walk has not reached yet and has not saved already,
// its record is copied into the walk's saved list (when it was live at the
// mark) and its slot is marked to be skipped. So whenever the walk reads a
// slot that is not skipped, the key there has not been touched since the
// mark and its state is the mark's. Keys inserted after the mark are
// skipped (exporter.inserted), as Export does; keys deleted after the
// mark come from their saved copy. A rebuild freezes the walk on the old
// arrays as it does for Export: the walk then finds a touched key's slot
// in the frozen table by its key (it is still a valid hash table), and
// reads an untouched key's state from the current table. A flush does not
// end the walk: the shard hands its old table and slabs to the walk
// (detach), which nothing writes again, and the walk reads them to the end.
//
// Cost. With no walk in progress, touch costs one test of len(s.walks) in
// lookup and remove. During one, a touched key costs one bitmap test (a
// find in the frozen table once a rebuild happened) and, the first time
// only, one record: the memory of saved records is bounded by the keys
// written between two steps of their shard, since each step hands the
// saved records over with the walked ones. A key read or written many
// times costs one copy. Like a fork's copy-on-write, a burst of writes
// over many keys during an export (a slot move's DeleteMatching, say)
// costs up to one record per key it reaches before the walk does.
//
// Order. Records come shard by shard, round robin, each shard in slot
// order with its saved records after each step: not sorted, and not the
// same order on two replicas (their tables have different histories).

// Snapshot is a point-in-time export in progress (Engine.Mark). Its
// methods must not be called concurrently.
type Snapshot struct {
	e     *Engine
	walks []*exporter // one per shard
	next  int         // the shard Next steps first
	left  int         // walks not ended
	clock int64
	keys  int // keys the shards held at the mark
}

// Mark starts a point-in-time export of the state at nowNanos: every shard
// advances to nowNanos and notes its keys, and Next then returns every key
// whose state is not empty at the shard's time, as it is at the mark,
// whatever requests do in between. The mark takes one job per shard, run
// on all shards at once; the caller must keep Do from running while Mark
// does (the Raft FSM holds its lock), or the shards mark different
// batches. Every Snapshot must be closed. ctx is honoured only before the
// jobs are queued.
func (e *Engine) Mark(ctx context.Context, nowNanos int64) (*Snapshot, error) {
	sn := &Snapshot{e: e, walks: make([]*exporter, len(e.shards)), left: len(e.shards)}
	clocks := make([]int64, len(e.shards))
	keys := make([]int, len(e.shards))
	if err := e.onEach(ctx, func(i int, s *shard) {
		s.advance(nowNanos)
		x := &exporter{pit: true, now: s.now}
		x.start(s)
		sn.walks[i], clocks[i], keys[i] = x, s.now, s.tab.live
	}); err != nil {
		return nil, err
	}
	for i, c := range clocks {
		sn.clock = max(sn.clock, c)
		sn.keys += keys[i]
	}
	return sn, nil
}

// Clock is the largest shard time at the mark: restore the records with
// Import at this time, as Export's result.
func (sn *Snapshot) Clock() int64 { return sn.clock }

// Next returns the next records: at most exportChunk walked keys of one
// shard, plus the records saved on that shard since its last step. It
// returns io.EOF when every shard is done. The caller may keep the
// records. An error (ctx ended before a step was queued) leaves the
// Snapshot to be closed.
func (sn *Snapshot) Next(ctx context.Context) ([]Record, error) {
	for sn.left > 0 {
		x := sn.walks[sn.next]
		sn.next = (sn.next + 1) % len(sn.walks)
		if x.done {
			continue
		}
		var recs []Record
		var more bool
		if err := sn.e.onShard(ctx, x.s, func(*shard) { recs, more = x.step() }); err != nil {
			return nil, err
		}
		if !more {
			x.done = true
			sn.left--
		}
		if len(recs) > 0 {
			return recs, nil
		}
	}
	return nil, io.EOF
}

// Close ends the walks that have not ended, so the shards stop saving
// records for them and free the arrays kept for them. It may be called
// more than once, and after Next returned io.EOF.
func (sn *Snapshot) Close() {
	for _, x := range sn.walks {
		if x != nil && !x.done {
			x.done = true
			sn.left--
			x.abort(x.s)
		}
	}
}

// touch tells the point-in-time walks of s that the key in used slot i of
// the current table is about to be read, changed or removed (see the top
// of this file). Only called while a walk is in progress.
func (s *shard) touch(i int) {
	for _, x := range s.walks {
		if x.pit && x.src == s {
			x.save(i)
		}
	}
}

// save copies the mark's state of the key in slot i of s's current table
// (which nothing has changed since the mark unless the key was saved
// already) when the walk has yet to read it.
func (x *exporter) save(i int) {
	s := x.s
	sl := &s.tab.slots[i]
	j := i
	var key []byte
	if x.frozen {
		// The walked slots are an older table's: find the key there. It
		// is missing when inserted after the rebuild.
		key = keyOf(s.tab.arena, sl)
		old := table{slots: x.slots, arena: x.arena}
		if j = old.find(key, hashKey(key)); j < 0 {
			return
		}
	}
	if j < x.pos || x.skipped(j) {
		return // read already, saved already, or inserted after the mark
	}
	x.skip(j)
	if s.expiresAt(sl.kind(), sl.val) > x.now {
		if key == nil {
			key = keyOf(s.tab.arena, sl)
		}
		x.saved = append(x.saved, s.record(key, sl.kind(), sl.val))
	}
}

// detach gives a point-in-time walk that reads s's current state the
// state itself, as s is about to drop it (flush): its table, whose arrays
// s retires (kept until the walks end), and its slabs, which s replaces.
// Nothing writes them again, so the walk needs no more saves.
func (x *exporter) detach(s *shard) {
	if !x.pit || x.src != s {
		return
	}
	x.src = &shard{now: s.now, tab: s.tab, fixed: s.fixed, sliding: s.sliding, log: s.log, scaled: s.scaled, data: s.data}
}

// Keys is the number of keys the shards held at the mark, expired ones
// not yet dropped included: at least the number of records the export
// returns. A restore passes it to Reserve.
func (sn *Snapshot) Keys() int { return sn.keys }

// Reserve sizes every shard's table for keys keys in all (spread evenly
// over the shards) and keeps it at least that large (neither the sweep nor
// a rebuild shrinks it) until Reserve is called again; Reserve(0) lifts
// the floor. Importing a point-in-time export needs it: its records come
// in table order, which is hash order, so a table that grew during the
// import would hold each time keys of a narrow range of hashes in a table
// sized for all of them, piled into one long probe run, and each insert
// would cost in proportion to the keys imported so far. Sized up front,
// every key lands near its home slot. keys is capped at maxReserve.
func (e *Engine) Reserve(ctx context.Context, keys int) error {
	keys = min(max(keys, 0), maxReserve)
	per := (keys + len(e.shards) - 1) / len(e.shards)
	per += per / 16 // the hash spreads keys unevenly over the shards
	return e.onEach(ctx, func(_ int, s *shard) {
		if keys == 0 {
			s.floor = 0
			return
		}
		s.floor = tableSize(per)
		if len(s.tab.slots) < s.floor {
			s.rebuild()
		}
	})
}

// maxReserve bounds Reserve, so a wrong hint costs at most 2^28 keys'
// slots (8 GiB, mapped but untouched until written).
const maxReserve = 1 << 28
