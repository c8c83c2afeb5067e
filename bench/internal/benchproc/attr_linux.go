package benchproc

import "syscall"

// childAttr makes the kernel kill a child if the benchmark dies without
// stopping it (SIGKILL, a crash), so no server outlives the run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
