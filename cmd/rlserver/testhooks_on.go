//go:build rlserver_testhooks

package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/persist"
	"github.com/rlserver/rlserver/raftlog"
)

// crashBeforeRename, when RLSERVER_TEST_CRASH_BEFORE_RENAME is "1", makes
// the process kill itself (SIGKILL) during its first save, after the new
// snapshot is written and synced to its temporary file and before the
// rename, as a crash mid-save would. Only the rlserver_testhooks build
// tag (the end-to-end tests' binary) compiles it in.
func crashBeforeRename(store *persist.Store) {
	if os.Getenv("RLSERVER_TEST_CRASH_BEFORE_RENAME") == "1" {
		store.BeforeRename = func(string) { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	}
}

// logCrashHooks, when RLSERVER_TEST_CRASH_LOG is "<step>:<n>[:<role>]",
// make the process kill itself (SIGKILL) during its n-th Raft log write
// (counting only the writes made while it leads, or follows, when role
// is "leader" or "follower"), at step:
//
//   - torn: the batch written, then its second half lost (zeroed, as if
//     those pages never reached the disk), before the sync;
//   - unsynced: the batch written, then lost whole (the file cut back to
//     where it started), before the sync;
//   - late: as unsynced, but 50 ms after the sync began, as on a slow
//     disk: a leader's batch (appended, its sync deferred) has reached the
//     followers by then, and may have been committed;
//   - synced: after the sync, before the write is acknowledged.
//
// Before a sync the batch is acknowledged to nobody, so losing it must
// lose no acknowledged decision; after one, it must survive the restart.
func logCrashHooks() raftlog.Hooks {
	v := os.Getenv("RLSERVER_TEST_CRASH_LOG")
	if v == "" {
		return raftlog.Hooks{}
	}
	parts := strings.Split(v, ":")
	var n int
	var err error
	if len(parts) >= 2 {
		n, err = strconv.Atoi(parts[1])
	}
	role := ""
	if len(parts) == 3 {
		role = parts[2]
	}
	if len(parts) < 2 || len(parts) > 3 || err != nil || n < 1 || (role != "" && role != "leader" && role != "follower") {
		fatal(fmt.Errorf("RLSERVER_TEST_CRASH_LOG=%q: want <step>:<n>[:leader|:follower]", v))
	}
	var writes atomic.Int64
	die := func() { syscall.Kill(os.Getpid(), syscall.SIGKILL) }
	nth := func() bool {
		if role != "" {
			leading := logLeading.Load()
			if leading == nil || (*leading)() != (role == "leader") {
				return false
			}
		}
		return writes.Add(1) == int64(n)
	}
	switch parts[0] {
	case "torn":
		return raftlog.Hooks{BeforeSync: func(f *os.File, start, end int64) {
			if nth() {
				mid := start + (end-start)/2
				f.WriteAt(make([]byte, end-mid), mid)
				f.Sync()
				die()
			}
		}}
	case "unsynced", "late":
		var wait time.Duration
		if parts[0] == "late" {
			wait = 50 * time.Millisecond
		}
		return raftlog.Hooks{BeforeSync: func(f *os.File, start, end int64) {
			if nth() {
				time.Sleep(wait)
				f.Truncate(start)
				f.Sync()
				die()
			}
		}}
	case "synced":
		return raftlog.Hooks{AfterSync: func(f *os.File, start, end int64) {
			if nth() {
				die()
			}
		}}
	}
	fatal(fmt.Errorf("RLSERVER_TEST_CRASH_LOG=%q: the step is torn, unsynced, late or synced", v))
	return raftlog.Hooks{}
}

// logLeading reports whether the node leads, for logCrashHooks' roles.
var logLeading atomic.Pointer[func() bool]

// watchLogRole gives logCrashHooks what its roles count by: whether the
// node leads (a sharded process: whether it leads any group, since one
// log write holds every group's records).
func watchLogRole(leading func() bool) {
	logLeading.Store(&leading)
}
