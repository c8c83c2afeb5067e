package engine

import (
	"bytes"
	"encoding/binary"
	"math/bits"
)

// table is a shard's key index: an open-addressing hash table with linear
// probing, built so that a million keys cost little memory and nothing to
// the garbage collector. It holds no Go pointer per key: the slot array
// and the key arena are pointer-free slices, which the collector never
// scans.
//
// A slot is 16 bytes: the key's place in the arena, its length, an 8-bit
// fingerprint of its hash, its kind, and one int64 value. For KindGCRA and
// KindShape the value IS the state (a TAT, a schedule end), so such a key
// costs one slot plus its bytes and nothing else; for the other kinds it is
// the index of the state in that kind's slab.
//
// Key bytes live in the arena, appended in insertion order. A deleted
// key's bytes stay there (dead) until the table is rebuilt, which copies
// only live keys into a fresh arena; a full arena grows by a quarter
// (appendKey), unless half of it is dead, in which case the shard rebuilds
// the table instead.
//
// Probing is linear (wrapping around) from the home slot, which the hash
// selects by multiply-shift range reduction, so the table can have any
// size: it is rebuilt half full and grows at 13/16 full (tombstones
// included), so a key costs 16/load, 20 to 32 bytes, of slots. A deleted
// slot becomes a tombstone, so entries never move while the table lives:
// an entry keeps its slot index from insertion until it is deleted or the
// whole table is rebuilt into new arrays (growth, shrinking, compaction).
// Paused exports and the sweep cursor rely on this (record.go). A
// tombstone followed by an empty slot becomes empty at once (and so do the
// tombstones before it), so tombstones do not pile up, and a table with no
// live key has no tombstone.
//
// The hash is fixed and unseeded, so a shard's layout, sweep order and
// export order depend only on the operations it applied.
//
// The table does not know about expiry: the shard (shard.go) decides what
// is live, and drives rebuilds.
//
// Large slot arrays and arenas live outside the Go heap (memory.go):
// slotsMem and arenaMem are their regions (nil when on the heap), and the
// owner of a table it drops frees them (release, shard.retire).
type table struct {
	slots     []slot
	arena     []byte // key bytes: len is the bytes in use, live and dead
	live      int    // slots holding a key
	dead      int    // tombstones
	deadBytes int    // arena bytes of deleted keys

	// kinds counts the used slots by slot kind (meta bits 25-27), so the
	// stored keys of each kind are known without a walk. A slot whose
	// kind is changed in place (setKind) is counted under its old kind
	// until removed, and its removal under the new one: only sums over
	// the kinds one Kind.visible maps together are meaningful.
	kinds [8]int

	slotsMem, arenaMem *region
}

// slot is one entry of a table. meta packs, from the low bits:
//
//	bits  0-7   fingerprint: the hash's low byte
//	bits  8-23  key length, or lenLong when the length is >= lenLong: the
//	            arena then holds the length as 8 bytes (little-endian)
//	            before the key, and off points at them
//	bit   24    set when the slot holds a key
//	bits 25-27  the key's Kind
//	bits 28-31  bits 32-35 of the arena offset
//
// An empty slot is all zero; a tombstone is metaTomb.
type slot struct {
	off  uint32 // low 32 bits of the key's offset in the arena
	meta uint32
	val  int64 // the state (KindGCRA, KindShape) or its slab index
}

const (
	lenLong   = 0xFFFF
	metaUsed  = 1 << 24
	metaMatch = 1<<25 - 1 // the bits a lookup compares: used, length, fingerprint
	metaTomb  = 1 << 25   // kind bits 1, used bit clear: never matches, never empty

	// maxArena bounds a shard's key bytes (64 GiB): offsets have 36 bits.
	maxArena = 1 << 36

	// minSlots is the size of a new table; a table is never shrunk below
	// shrinkFloor slots (16 KiB), which would not be worth the rebuild.
	minSlots    = 8
	shrinkFloor = 1024
)

func (s *slot) used() bool { return s.meta&metaUsed != 0 }
func (s *slot) kind() Kind { return Kind(s.meta >> 25 & 7) }

// tableSize is the slot count a rebuilt table gets for n keys: twice n,
// rounded up to a multiple of 8, at least minSlots. The table grows when
// an insert would take it past 13/16 full, so n can grow by 5/8 between
// rebuilds (the growth factor is 1.625, which bounds the slots' share of
// memory better than doubling would).
func tableSize(n int) int {
	return max(minSlots, (2*n+7)&^7)
}

// newTable returns an empty table of size slots (a multiple of 8) whose
// arena has room for arenaCap bytes.
func newTable(size, arenaCap int) table {
	var t table
	t.slots, t.slotsMem = makeSlots(size)
	t.arena, t.arenaMem = makeArena(arenaCap)
	return t
}

// home is the slot where the probe for hash h starts: the high word of
// h*len(slots), uniform over the slots for any size.
func (t *table) home(h uint64) int {
	hi, _ := bits.Mul64(h, uint64(len(t.slots)))
	return int(hi)
}

// full reports whether inserting one more key needs a rebuild first: the
// table would pass 13/16 full (live keys and tombstones), or the key does
// not fit in the arena and half of the arena is dead (so the rebuild's
// compaction pays instead of growing it).
func (t *table) full(keyLen int) bool {
	if (t.live+t.dead+1)*16 > len(t.slots)*13 {
		return true
	}
	need := keyLen
	if keyLen >= lenLong {
		need += 8
	}
	return len(t.arena)+need > cap(t.arena) && t.deadBytes*2 >= len(t.arena)
}

// match is the part of meta a slot holding key (of hash h) has.
func match(h uint64, keyLen int) uint32 {
	return metaUsed | uint32(min(keyLen, lenLong))<<8 | uint32(uint8(h))
}

// keyOf returns the key of the used slot s, whose bytes are in arena.
func keyOf(arena []byte, s *slot) []byte {
	off := int(s.off) | int(s.meta>>28)<<32
	n := int(s.meta >> 8 & 0xFFFF)
	if n == lenLong {
		n = int(binary.LittleEndian.Uint64(arena[off:]))
		off += 8
	}
	return arena[off : off+n : off+n]
}

// find returns the index of key's slot (h = hashKey(key)), or -1.
func (t *table) find(key []byte, h uint64) int {
	want := match(h, len(key))
	n := len(t.slots)
	i := t.home(h)
	for {
		s := &t.slots[i]
		if s.meta&metaMatch == want && sameKey(keyOf(t.arena, s), key) {
			return i
		}
		if s.meta == 0 {
			return -1
		}
		if i++; i == n {
			i = 0
		}
	}
}

// sameKey is bytes.Equal, 8 bytes at a time and inlined for the short
// keys the index mostly holds (a call to the runtime's memequal costs as
// much as comparing a 21-byte key).
func sameKey(a, b []byte) bool {
	n := len(a)
	if n != len(b) {
		return false
	}
	if n < 8 || n > 64 {
		return bytes.Equal(a, b)
	}
	for i := 0; i < n-8; i += 8 {
		if binary.LittleEndian.Uint64(a[i:]) != binary.LittleEndian.Uint64(b[i:]) {
			return false
		}
	}
	return binary.LittleEndian.Uint64(a[n-8:]) == binary.LittleEndian.Uint64(b[n-8:])
}

// insert stores key (absent from the table, h = hashKey(key)) with kind k
// and value v, and returns its slot index. The caller has checked full.
func (t *table) insert(key []byte, h uint64, k Kind, v int64) int {
	n := len(t.slots)
	i := t.home(h)
	for t.slots[i].used() {
		if i++; i == n {
			i = 0
		}
	}
	s := &t.slots[i]
	if s.meta == metaTomb {
		t.dead--
	}
	off := t.appendKey(key)
	s.off = uint32(off)
	s.meta = match(h, len(key)) | uint32(k)<<25 | uint32(off>>32)<<28
	s.val = v
	t.live++
	t.kinds[k&7]++
	return i
}

// appendKey copies key to the end of the arena and returns its offset.
// A full arena grows into a fresh array, by a quarter (doubling while
// below 64 KiB): the slack, which the allocator may have zeroed and so made
// resident, stays below a quarter of the keys' bytes, and the copies cost
// amortised four bytes per byte. The old array, which nothing else reads
// (an export reads the current arena, or a frozen one from before a
// rebuild), is freed at once.
func (t *table) appendKey(key []byte) int {
	need := len(key)
	if need >= lenLong {
		need += 8
	}
	off := len(t.arena)
	if off+need > maxArena {
		panic("engine: a shard's keys exceed 64 GiB")
	}
	if off+need > cap(t.arena) {
		c := cap(t.arena)
		if c < 64<<10 {
			c *= 2
		} else {
			c += c / 4
		}
		a, r := makeArena(min(max(c, off+need, 64), maxArena))
		a = a[:off]
		copy(a, t.arena)
		t.arenaMem.free()
		t.arena, t.arenaMem = a, r
	}
	if len(key) >= lenLong {
		t.arena = binary.LittleEndian.AppendUint64(t.arena, uint64(len(key)))
	}
	t.arena = append(t.arena, key...)
	return off
}

// remove deletes the key in used slot i. The slot becomes a tombstone, or
// empty when the next slot is empty, and then so do the tombstones before
// it: no probe needs them to go on. When the last key goes, the arena is
// emptied in place (nothing refers to its bytes any more).
func (t *table) remove(i int) {
	size := len(t.slots)
	s := &t.slots[i]
	n := int(s.meta >> 8 & 0xFFFF)
	if n == lenLong {
		n = 8 + len(keyOf(t.arena, s))
	}
	t.deadBytes += n
	t.live--
	t.kinds[s.kind()]--
	next := i + 1
	if next == size {
		next = 0
	}
	if t.slots[next].meta != 0 {
		*s = slot{meta: metaTomb}
		t.dead++
	} else {
		*s = slot{}
		for j := i; ; {
			if j == 0 {
				j = size
			}
			if j--; t.slots[j].meta != metaTomb {
				break
			}
			t.slots[j] = slot{}
			t.dead--
		}
	}
	if t.live == 0 {
		t.arena = t.arena[:0]
		t.deadBytes = 0
	}
}

// liveBytes is the arena space the live keys take.
func (t *table) liveBytes() int { return len(t.arena) - t.deadBytes }

// rehash returns a new table of size slots (at least tableSize(t.live))
// holding t's keys, with the value of each passed through
// remap when remap is not nil. The new table has new arrays: t's are left
// exactly as they were, so a paused export may keep reading them. Its
// arena holds only the live keys (compaction), with an eighth more room.
func (t *table) rehash(size int, remap func(k Kind, v int64) int64) table {
	lb := t.liveBytes()
	nt := newTable(size, min(lb+lb/8+64, maxArena))
	for i := range t.slots {
		s := &t.slots[i]
		if !s.used() {
			continue
		}
		v := s.val
		if remap != nil {
			v = remap(s.kind(), v)
		}
		key := keyOf(t.arena, s)
		nt.insert(key, hashKey(key), s.kind(), v)
	}
	return nt
}

// hashKey is the index's hash of a key: wyhash (final version 4's
// structure, with a shorter path for 17 to 32 bytes) with a fixed seed, so its values are the same in every
// process and on every CPU. It reads 8 bytes at a time and mixes with 64x64->128-bit
// multiplies, so a 21-byte key costs a few nanoseconds. It is unrelated to
// ShardOf's FNV-1a, so a shard's keys, which share FNV-1a residues, still
// spread over the whole table.
func hashKey(p []byte) uint64 {
	const (
		p0 = 0xa0761d6478bd642f
		p1 = 0xe7037ed1a0b428db
		p2 = 0x8ebc6af09c88c6e3
		p3 = 0x589965cc75374cc3
	)
	seed := hashSeed
	n := len(p)
	var a, b uint64
	switch {
	case n == 0:
	case n < 4:
		a = uint64(p[0])<<16 | uint64(p[n>>1])<<8 | uint64(p[n-1])
	case n <= 16:
		q := (n >> 3) << 2
		a = uint64(binary.LittleEndian.Uint32(p))<<32 | uint64(binary.LittleEndian.Uint32(p[q:]))
		b = uint64(binary.LittleEndian.Uint32(p[n-4:]))<<32 | uint64(binary.LittleEndian.Uint32(p[n-4-q:]))
	case n <= 32:
		// Two independent lanes, folded by one multiply: the hash of the
		// common 17 to 32-byte key is two multiplies deep, not three.
		x := wymix(binary.LittleEndian.Uint64(p)^p1, binary.LittleEndian.Uint64(p[8:])^seed)
		y := wymix(binary.LittleEndian.Uint64(p[n-16:])^p2, binary.LittleEndian.Uint64(p[n-8:])^seed)
		return wymix(x^p0, y^uint64(n))
	default:
		i, j := n, 0 // i bytes left from p[j]
		if i > 48 {
			s1, s2 := seed, seed
			for i > 48 {
				q := p[j : j+48]
				seed = wymix(binary.LittleEndian.Uint64(q)^p1, binary.LittleEndian.Uint64(q[8:])^seed)
				s1 = wymix(binary.LittleEndian.Uint64(q[16:])^p2, binary.LittleEndian.Uint64(q[24:])^s1)
				s2 = wymix(binary.LittleEndian.Uint64(q[32:])^p3, binary.LittleEndian.Uint64(q[40:])^s2)
				i -= 48
				j += 48
			}
			seed ^= s1 ^ s2
		}
		for i > 16 {
			q := p[j : j+16]
			seed = wymix(binary.LittleEndian.Uint64(q)^p1, binary.LittleEndian.Uint64(q[8:])^seed)
			i -= 16
			j += 16
		}
		a = binary.LittleEndian.Uint64(p[j+i-16:])
		b = binary.LittleEndian.Uint64(p[j+i-8:])
	}
	a ^= p1
	b ^= seed
	hi, lo := bits.Mul64(a, b)
	return wymix(lo^p0^uint64(n), hi^p1)
}

// hashSeed is the fixed seed. Changing it changes every shard's layout
// (never a decision): keep it.
const hashSeed uint64 = 0x1ff5c2923a788d2c

func wymix(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	return hi ^ lo
}
