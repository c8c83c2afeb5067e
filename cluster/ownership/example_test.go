package ownership_test

import (
	"fmt"

	"github.com/rlserver/rlserver/cluster/ownership"
	"github.com/rlserver/rlserver/slots"
)

// The meta group's first entry splits the slots over three groups; a
// move then points a range at another group once its target committed.
func ExampleDirectory_Apply() {
	peers := []ownership.Peer{{ID: "a", Addr: "10.0.0.1:7000"}}
	d := ownership.EmptyDirectory()
	d, _, _ = d.Apply(ownership.InitOp(3, peers), 1)
	fmt.Println(ownership.Runs(d.Slots))

	d, id, _ := d.Apply(ownership.MoveBeginOp(0, 99, 2), 2)
	d, _, _ = d.Apply(ownership.MoveCommittedOp(id), 3)
	fmt.Println(d.Slots[slots.OfString("user:42")], d.Slots[0], d.Slots[99], d.Slots[100], d.Epoch)
	// Output:
	// [{0 5461 1} {5462 10922 2} {10923 16383 3}]
	// 3 2 2 1 3
}
