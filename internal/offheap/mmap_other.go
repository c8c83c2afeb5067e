//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package offheap

// mapMemory reports that this system has no anonymous mmap here: callers
// keep their arrays on the Go heap.
func mapMemory(int) []byte { return nil }

func unmapMemory([]byte) {}
