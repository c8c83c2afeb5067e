//go:build !rlserver_testhooks

package main

import "github.com/rlserver/rlserver/persist"

// crashBeforeRename does nothing: the crash-mid-save hook exists only in
// the rlserver_testhooks build (testhooks_on.go).
func crashBeforeRename(*persist.Store) {}
