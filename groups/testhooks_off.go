//go:build !rlserver_testhooks

package groups

// Planted slot-move bugs exist only in test builds (testhooks_on.go).

func plantedNoFreeze() bool    { return false }
func plantedNoCopy() bool      { return false }
func plantedCommitFirst() bool { return false }

func plantedEarlyRemove() bool { return false }
