// Package sysmon keeps the Go runtime's monitor thread out of its deep
// sleep, for the server and for the benchmarks' no-work server alike.
package sysmon

import (
	"os"
	"os/exec"
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
// detailed one (a line per P, M and goroutine) on stderr before the
// message and stacks of an unrecovered panic or fatal error. Both are in
// docs/operations.md.
const Setting = "schedtrace=2147483647"

// KeepAwake re-executes the program with Setting added to GODEBUG,
// which the runtime reads only at start; the process keeps its id, its
// arguments, the rest of its environment and its name (see startedAs). It
// returns (and the program runs as it is) when GODEBUG already names
// schedtrace, which is also how an operator turns this off
// (GODEBUG=schedtrace=0), or when the exec fails.
func KeepAwake() {
	env, ok := withSetting(os.Environ())
	if !ok {
		return
	}
	exe, err := os.Executable()
	if err != nil {
		return
	}
	_ = syscall.Exec(startedAs(os.Args[0], exe), os.Args, env) // returns only on failure
}

// startedAs is the path to execute again: argv0 (looked up in PATH when it
// has no slash, as a shell does) when it names the running executable exe,
// else exe. The kernel names a process (/proc/<pid>/comm: what ps shows
// and pgrep matches) after the file name it was executed through, and
// os.Executable resolves symlinks: executing exe would rename a server
// started through a symlink to the symlink's target.
func startedAs(argv0, exe string) string {
	path := argv0
	if !strings.Contains(path, "/") {
		var err error
		if path, err = exec.LookPath(path); err != nil {
			return exe
		}
	}
	a, errA := os.Stat(path)
	b, errB := os.Stat(exe)
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		return exe
	}
	return path
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
