package main

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// childAttr makes the kernel kill a child if compare dies without cleaning
// up (SIGKILL, a crash), so no server outlives the run.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processCPU is the CPU time (user + system) process pid has used, from
// /proc/pid/stat, in clock ticks of 10 ms (USER_HZ is 100 on Linux).
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// fields 14 and 15 are the 12th and 13th after its closing one.
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return time.Duration(utime+stime) * 10 * time.Millisecond, true
}
