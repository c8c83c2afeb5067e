package engine

import (
	"context"
	"math/bits"
	"slices"
)

// SCAN's walk over a shard's keys. A key's home slot is the high word of
// hashKey(key)*len(slots) (table.home): it rises with the hash whatever
// the table's size, and linear probing keeps a key at or after its home,
// before the next empty slot. So the walk goes in hash order, not slot
// order: a position is a hash value, and a step returns the live keys
// whose hash lies in [from, next). A key present for the whole walk is
// returned exactly once, however often the table grows, shrinks or is
// rebuilt in between (Redis's reverse-binary cursor gives the same
// guarantee with duplicates allowed); keys added or removed during it
// may or may not be seen.
//
// A cursor packs three fields so that it fits Redis's unsigned 64-bit
// cursor and 0 starts and ends a walk:
//
//	bits  0-11  the shard (shards number at most 4096)
//	bits 12-23  the key space: 0 on a server of one engine; the Raft
//	            group's id with --groups (below 4096)
//	bits 24-63  the position's top 40 bits: positions are multiples of
//	            ScanStep
const (
	scanShardBits = 12
	scanSpaceBits = 12
	scanPosShift  = scanShardBits + scanSpaceBits

	// ScanStep is the granularity of a position: a table of up to 2^40
	// slots still advances by at least one step per slot.
	ScanStep = uint64(1) << scanPosShift

	// MaxScanSpace bounds a key space's number.
	MaxScanSpace = 1<<scanSpaceBits - 1
)

// SplitCursor is a cursor's key space, shard and position.
func SplitCursor(c uint64) (space uint32, shard int, pos uint64) {
	return uint32(c >> scanShardBits & MaxScanSpace), int(c & (1<<scanShardBits - 1)), c &^ (ScanStep - 1)
}

// JoinCursor is the cursor of a key space, shard and position (a
// multiple of ScanStep).
func JoinCursor(space uint32, shard int, pos uint64) uint64 {
	return pos&^(ScanStep-1) | uint64(space&MaxScanSpace)<<scanShardBits | uint64(shard)
}

// Scan continues a walk of the engine's keys from the shard and position
// of cursor (its key space is kept in the cursor it returns), calling fn
// with each live key at nowNanos and its kind. It visits at least count
// keys when that many remain, finishing the current stretch of the table
// (up to an empty slot), and may go on into the next shards. It returns
// the cursor to continue from, and done when the last shard is finished.
// Nothing is written: expired keys are skipped, not dropped, and no key
// counts as used.
func (e *Engine) Scan(ctx context.Context, nowNanos int64, cursor uint64, count int,
	fn func(key []byte, k Kind)) (next uint64, done bool, err error) {
	space, si, pos := SplitCursor(cursor)
	if si >= len(e.shards) {
		return 0, true, nil
	}
	count = max(count, 1)
	seen := 0
	for {
		var end bool
		err := e.onShard(ctx, e.shards[si], func(s *shard) {
			pos, end = s.scan(nowNanos, pos, count-seen, func(key []byte, k Kind) {
				seen++
				fn(key, k)
			})
		})
		if err != nil {
			return cursor, false, err
		}
		if !end {
			return JoinCursor(space, si, pos), false, nil
		}
		if si++; si == len(e.shards) {
			return 0, true, nil
		}
		pos = 0
		if seen >= count {
			return JoinCursor(space, si, 0), false, nil
		}
	}
}

// scanKey is a key met by a walk, with its hash.
type scanKey struct {
	h   uint64
	key []byte
	k   Kind
}

// scan calls fn with the live keys whose hash is in [from, next), in hash
// order, at least count of them unless the table ends first, and returns
// next (a multiple of ScanStep) and whether the table ended (no key at or
// after next).
func (s *shard) scan(now int64, from uint64, count int, fn func(key []byte, k Kind)) (next uint64, end bool) {
	t := &s.tab
	n := len(t.slots)
	if n == 0 || t.live == 0 {
		return 0, true
	}
	var got []scanKey
	collect := func(i int) {
		sl := &t.slots[i]
		if !sl.used() {
			return
		}
		key := keyOf(t.arena, sl)
		h := hashKey(key)
		if h < from {
			return
		}
		got = append(got, scanKey{h: h, key: key, k: s.visibleKind(sl)})
	}
	start := t.home(from)
	i := start
	live := 0 // keys in [from, ...) met so far
	for ; i < n; i++ {
		before := len(got)
		collect(i)
		live += len(got) - before
		if t.slots[i].meta == 0 && live >= count {
			break
		}
	}
	if i == n {
		// The table's last stretch may run on at its start: those keys'
		// homes are at the end, so their hashes are at or after from,
		// which collect checks. From the start, the loop above saw them.
		for j := 0; j < start && t.slots[j].meta != 0; j++ {
			collect(j)
		}
		end = true
	} else {
		// Every key whose home is below i is in [home(from), i): the
		// stretch it lies in ends at the empty slot i at the latest. The
		// first hash whose home is i is ceil(i*2^64/n); round it down to
		// a step.
		q, r := bits.Div64(uint64(i), 0, uint64(n))
		if r != 0 {
			q++
		}
		next = q &^ (ScanStep - 1)
		if next <= from {
			next = from + ScanStep // a table beyond 2^40 slots; unreachable
		}
	}
	slices.SortFunc(got, func(a, b scanKey) int {
		switch {
		case a.h < b.h:
			return -1
		case a.h > b.h:
			return 1
		}
		return 0
	})
	for _, g := range got {
		if !end && g.h >= next {
			break
		}
		if g.k == KindNone || s.expiredAt(&g, now) {
			continue
		}
		fn(g.key, g.k)
	}
	return next, end
}

// expiredAt reports whether the key g (met by scan) is empty at now.
func (s *shard) expiredAt(g *scanKey, now int64) bool {
	i := s.tab.find(g.key, g.h)
	if i < 0 {
		return true
	}
	sl := &s.tab.slots[i]
	return s.expiresAt(sl.kind(), sl.val) <= max(now, s.now)
}
