// Package sysmon keeps the Go runtime's monitor thread out of its deep
// sleep, for the server and for the benchmarks' no-work server alike.
package sysmon

import (
	"os"
	"strings"
	"syscall"
)

// Setting keeps the Go runtime's monitor thread (sysmon) out of its
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
const Setting = "schedtrace=2147483647"

// KeepAwake re-executes the program with Setting added to GODEBUG,
// which the runtime reads only at start; the process keeps its id, its
// arguments and the rest of its environment. It returns (and the program
// runs as it is) when GODEBUG already names schedtrace, which is also how
// an operator turns this off (GODEBUG=schedtrace=0), or when the exec
// fails.
func KeepAwake() {
	env, ok := withSetting(os.Environ())
	if !ok {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(exe, os.Args, env) // returns only on failure
}

// withSetting is environ with Setting added to its GODEBUG (the first, the
// one the runtime reads; any later ones are dropped), or false when that
// GODEBUG names schedtrace already.
func withSetting(environ []string) ([]string, bool) {
	godebug, found := "", false
	env := make([]string, 1, len(environ)+1)
	for _, kv := range environ {
		v, ok := strings.CutPrefix(kv, "GODEBUG=")
		if !ok {
			env = append(env, kv)
		} else if !found {
			godebug, found = v, true
		}
	}
	for _, setting := range strings.Split(godebug, ",") {
		if strings.HasPrefix(setting, "schedtrace=") {
			return nil, false
		}
	}
	if godebug != "" {
		godebug += ","
	}
	env[0] = "GODEBUG=" + godebug + Setting
	return env, true
}
