package entry_test

import (
	"encoding/binary"
	"fmt"

	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// A leader writes one batch entry stamped with its clock; every replica
// decodes the same requests from it.
func ExampleDecode() {
	r, _ := engine.TokenBucket([]byte("user:42"), 10, 1, 1) // RL.ALLOW user:42 10 1 1
	b := entry.AppendHeader(nil, entry.Batch, 1_700_000_000e9)
	b = binary.AppendUvarint(b, 1)
	b = entry.AppendRequests(b, []engine.Request{r}, nil)

	e, err := entry.Decode(b)
	if err != nil {
		panic(err) // the state machine halts on an entry that does not decode
	}
	fmt.Println(e.Type == entry.Batch, e.NowNanos, len(e.Reqs), string(e.Reqs[0].Key), e.Reqs[0].Cost)
	// Output: true 1700000000000000000 1 user:42 1
}
