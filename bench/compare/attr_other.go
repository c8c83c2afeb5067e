//go:build !linux

package main

import (
	"syscall"
	"time"
)

// childAttr is Linux-only (Pdeathsig); elsewhere stopAll is the only cleanup.
func childAttr() *syscall.SysProcAttr { return nil }

// processCPU needs /proc; elsewhere the CPU columns show only the client.
func processCPU(pid int) (time.Duration, bool) { return 0, false }
