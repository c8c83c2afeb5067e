//go:build rlserver_testhooks

package groups

import "os"

// Planted slot-move bugs, for the tests that show the linearizability
// checker catches a broken move: RLSERVER_TEST_MOVE_BUG names one.
//
//	nofreeze     the source keeps answering for the range after the target committed
//	nocopy       the target commits without the source's state
//	commitfirst  the target commits before the source froze and was copied

var moveBug = os.Getenv("RLSERVER_TEST_MOVE_BUG")

func plantedNoFreeze() bool    { return moveBug == "nofreeze" }
func plantedNoCopy() bool      { return moveBug == "nocopy" }
func plantedCommitFirst() bool { return moveBug == "commitfirst" }

// plantedEarlyRemove is a planted placement bug, for the test that shows
// the checks catch it (RLSERVER_TEST_PLACEMENT_BUG=earlyremove): the meta
// group's leader drops the replica a learner replaces as soon as it
// records the learner, before the learner is a voter.
func plantedEarlyRemove() bool { return os.Getenv("RLSERVER_TEST_PLACEMENT_BUG") == "earlyremove" }
