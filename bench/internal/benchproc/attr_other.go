//go:build !linux

package benchproc

import "syscall"

// childAttr is Linux-only (Pdeathsig); elsewhere StopAll is the only
// cleanup.
func childAttr() *syscall.SysProcAttr { return nil }
