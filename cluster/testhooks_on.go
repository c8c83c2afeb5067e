//go:build rlserver_testhooks

package cluster

import "os"

// plantedEarlyRemove is a planted placement bug, for the test that shows
// the checks catch it (RLSERVER_TEST_PLACEMENT_BUG=earlyremove): a
// group's leader removes an old replica before the new one is a voter.
func plantedEarlyRemove() bool { return os.Getenv("RLSERVER_TEST_PLACEMENT_BUG") == "earlyremove" }
