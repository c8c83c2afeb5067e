//go:build !linux

package main

import "syscall"

// childAttr is Linux-only (Pdeathsig); elsewhere stopAll is the only cleanup.
func childAttr() *syscall.SysProcAttr { return nil }
