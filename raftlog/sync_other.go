//go:build !linux

package raftlog

import "os"

// fdatasync is fsync where Linux's fdatasync is not at hand.
func fdatasync(f *os.File) error { return f.Sync() }
