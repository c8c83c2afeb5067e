package main

import (
	"os"
	"strings"
	"syscall"
)

// sysmonSetting keeps the Go runtime's monitor thread (sysmon) out of its
// deep sleep. When every P is idle, sysmon sleeps until the next syscall
// wakes it, and a syscall wake resets it to polling every 20 µs for the
// next millisecond and more. A Raft node goes idle between log entries and
// makes a syscall as soon as the next one arrives, so it paid that polling
// (a timer interrupt and two context switches each, about 50 per entry)
// for every entry: 15-18% of a follower's CPU and 11% of the leader's,
// measured with perf. With schedtrace set, sysmon never deep-sleeps; its
// poll interval then only grows while it finds nothing to do, up to 10 ms.
// golang/go#18236 tracks the hard-coded tick.
//
// The value is the largest schedtrace takes: a scheduler trace line every
// 24.8 days of uptime (one at start on a host up longer than that), and a
// detailed one when the process dies of a fatal error.
const sysmonSetting = "schedtrace=2147483647"

// keepSysmonAwake re-executes the server with sysmonSetting added to
// GODEBUG, which the runtime reads only at start. It returns (and the
// server runs as it is) when GODEBUG already names schedtrace, which is
// also how an operator turns this off (GODEBUG=schedtrace=0), or when the
// exec fails.
func keepSysmonAwake() {
	godebug := os.Getenv("GODEBUG")
	if strings.Contains(godebug, "schedtrace=") {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	if godebug != "" {
		godebug += ","
	}
	env := []string{"GODEBUG=" + godebug + sysmonSetting}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GODEBUG=") { // the runtime reads the first
			env = append(env, kv)
		}
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}
