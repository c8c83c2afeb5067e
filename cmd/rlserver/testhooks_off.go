//go:build !rlserver_testhooks

package main

import (
	"github.com/rlserver/rlserver/persist"
	"github.com/rlserver/rlserver/raftlog"
)

// crashBeforeRename does nothing: the crash-mid-save hook exists only in
// the rlserver_testhooks build (testhooks_on.go).
func crashBeforeRename(*persist.Store) {}

// logCrashHooks are none: the crash-mid-log-write hooks exist only in the
// rlserver_testhooks build (testhooks_on.go).
func logCrashHooks() raftlog.Hooks { return raftlog.Hooks{} }

// watchLogRole does nothing without the rlserver_testhooks build.
func watchLogRole(func() bool) {}
