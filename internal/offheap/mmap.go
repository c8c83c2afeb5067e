//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package offheap

import "syscall"

// mapMemory maps n zeroed bytes of anonymous private memory, or returns
// nil if the system refuses (the caller falls back to the Go heap).
func mapMemory(n int) []byte {
	mem, err := syscall.Mmap(-1, 0, n, syscall.PROT_READ|syscall.PROT_WRITE, syscall.MAP_ANON|syscall.MAP_PRIVATE)
	if err != nil {
		return nil
	}
	return mem
}

// unmapMemory unmaps memory mapMemory returned. A failure means the
// mapping is not what mapMemory made: a bug, and using the memory further
// could corrupt state.
func unmapMemory(mem []byte) {
	if err := syscall.Munmap(mem); err != nil {
		panic("offheap: munmap: " + err.Error())
	}
}
