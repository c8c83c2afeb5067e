package main

import "syscall"

// childAttr makes the kernel kill a child if compare dies without cleaning
// up (SIGKILL, a crash), so no server outlives the run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
