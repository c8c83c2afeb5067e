//go:build !rlserver_testhooks

package cluster

// plantedEarlyRemove: the planted bug exists only in test builds
// (testhooks_on.go).
func plantedEarlyRemove() bool { return false }
