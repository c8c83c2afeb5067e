// Package offheap maps memory outside the Go heap, for large pointer-free
// arrays whose lifetime the program knows exactly: the engine's key
// tables and a snapshot's copy of the state. Such memory costs no garbage
// collection work, does not count toward the collector's heap goal (so
// GOGC's headroom does not multiply it), and is returned to the system the
// moment it is unmapped, where a freed heap array stays resident until the
// collector finds it and the scavenger returns it.
//
// The memory must hold no Go pointers, and nothing may touch it after
// Unmap. On systems without anonymous mmap (mmap_other.go) Map returns
// nil and callers use make.
package offheap

import "sync/atomic"

var mapped atomic.Int64

// Mapped reports the bytes currently mapped through this package.
func Mapped() int64 { return mapped.Load() }

// Map returns n zeroed bytes mapped outside the Go heap (anonymous,
// private, read-write), or nil when n is 0 or the system refuses.
func Map(n int) []byte {
	if n <= 0 {
		return nil
	}
	mem := mapMemory(n)
	if mem != nil {
		mapped.Add(int64(len(mem)))
	}
	return mem
}

// Unmap returns mem, which Map returned, to the system at once. nil is a
// no-op.
func Unmap(mem []byte) {
	if mem == nil {
		return
	}
	mapped.Add(-int64(len(mem)))
	unmapMemory(mem)
}
