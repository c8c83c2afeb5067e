package engine

import (
	"runtime"
	"sync/atomic"
	"unsafe"

	"github.com/rlserver/rlserver/internal/offheap"
)

// Off-heap table arrays.
//
// A table's slot array and key arena (table.go) are pointer-free and make
// up most of a shard's memory. Kept on the Go heap, they cost more than
// their size: the collector lets the heap grow by GOGC percent of the live
// heap before it collects, so garbage worth a quarter to a whole table
// (GOGC 25 to 100) stays resident, and the arrays a table drops when it
// grows (its size over 1.625: 62% of the new one) stay resident until a
// collection finds them and the scavenger returns them, minutes later.
// At 1,000,000 token-bucket keys that made the process 72-85 bytes per key
// for a table of 44 (bench-compare); off the heap it is 45.
//
// Large arrays are therefore mapped outside the Go heap (anonymous private
// mmap, internal/offheap) and unmapped as soon as the table drops them, so
// the resident memory follows the tables exactly and the collector's
// headroom applies only to the small heap that is left. Arrays smaller
// than mmapMin, and every array on systems without mmap, come from make:
// a page per tiny table would cost more than it saves.
//
// Ownership: a region belongs to the table whose slots or arena it
// holds, and is freed by the shard goroutine when the table drops it:
// at once when the arena grows (nothing else reads the old arena), and on
// a rebuild or flush once no export is walking the old arrays (the shard
// keeps them in retired until then). A region that becomes unreachable
// without being freed (an engine never closed, in tests) is unmapped by a
// cleanup. Nothing outside the package ever sees a region's memory: keys
// leave the engine as copies.

// mmapMin is the smallest array mapped outside the heap (16 pages).
const mmapMin = 64 << 10

// offHeapBytes counts the bytes mapped by every engine in the process.
var offHeapBytes atomic.Int64

// OffHeapBytes reports the bytes of table arrays mapped outside the Go
// heap by every engine in the process: resident memory the Go runtime's
// statistics do not show.
func OffHeapBytes() int64 { return offHeapBytes.Load() }

// region is one array mapped outside the heap.
type region struct {
	mem     []byte
	cleanup runtime.Cleanup
}

// newRegion maps n zeroed bytes, or returns nil when n is below mmapMin or
// the system cannot map memory (the caller then uses make).
func newRegion(n int) *region {
	if n < mmapMin {
		return nil
	}
	mem := offheap.Map(n)
	if mem == nil {
		return nil
	}
	offHeapBytes.Add(int64(len(mem)))
	r := &region{mem: mem}
	r.cleanup = runtime.AddCleanup(r, unmapRegion, mem)
	return r
}

// free unmaps r at once; nil is a no-op. Nothing may read r's memory
// afterwards.
func (r *region) free() {
	if r == nil || r.mem == nil {
		return
	}
	r.cleanup.Stop()
	unmapRegion(r.mem)
	r.mem = nil
}

func unmapRegion(mem []byte) {
	offHeapBytes.Add(-int64(len(mem)))
	offheap.Unmap(mem)
}

// makeSlots returns n zeroed slots and the region holding them (nil: on
// the Go heap).
func makeSlots(n int) ([]slot, *region) {
	size := int(unsafe.Sizeof(slot{}))
	if r := newRegion(n * size); r != nil {
		return unsafe.Slice((*slot)(unsafe.Pointer(unsafe.SliceData(r.mem))), n), r
	}
	return make([]slot, n), nil
}

// makeArena returns an empty arena of capacity c and the region holding it
// (nil: on the Go heap).
func makeArena(c int) ([]byte, *region) {
	if r := newRegion(c); r != nil {
		return r.mem[:0:c], r
	}
	return make([]byte, 0, c), nil
}

// release frees the table's regions at once. The table must not be used
// afterwards.
func (t *table) release() {
	t.slotsMem.free()
	t.arenaMem.free()
	t.slotsMem, t.arenaMem = nil, nil
}

// retire frees the regions of t, a table the shard has replaced, at once
// when no export walks it, or keeps them until the last export ends
// (freeRetired).
func (s *shard) retire(t *table) {
	if len(s.walks) == 0 {
		t.release()
		return
	}
	s.retired = append(s.retired, t.slotsMem, t.arenaMem)
}

// freeRetired frees the regions kept for exports once none is left.
func (s *shard) freeRetired() {
	if len(s.walks) > 0 {
		return
	}
	for _, r := range s.retired {
		r.free()
	}
	s.retired = nil
}
