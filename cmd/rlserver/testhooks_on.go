//go:build rlserver_testhooks

package main

import (
	"os"
	"syscall"

	"github.com/rlserver/rlserver/persist"
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
