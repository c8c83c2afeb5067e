package cluster

import (
	"encoding/binary"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"github.com/rlserver/rlserver/cluster/entry"
	"github.com/rlserver/rlserver/engine"
)

// TestFSMKeepsResultsOnlyWhenAwaited: a batch entry's results are the
// response only while a batcher waits for them (its data array is
// awaited); any other entry, every one on a follower, is applied alike
// and its results go back to the pool.
func TestFSMKeepsResultsOnlyWhenAwaited(t *testing.T) {
	eng := engine.New(1)
	defer eng.Close()
	f := newFSM(eng)
	var waiting []byte
	f.awaited = func(data []byte) bool { return len(data) > 0 && len(waiting) > 0 && &data[0] == &waiting[0] }
	entry := func(key string) []byte {
		req := engine.Request{Op: engine.OpGCRA, Key: []byte(key), Interval: int64(time.Second), Limit: 2, Cost: 1}
		buf := entry.AppendHeader(nil, entry.Batch, time.Now().UnixNano())
		buf = binary.AppendUvarint(buf, 1)
		return entry.AppendRequest(buf, &req, nil)
	}
	a := entry("a")
	waiting = a
	got := f.Apply(&raft.Log{Index: 1, Type: raft.LogCommand, Data: a})
	br, ok := got.(*batchResult)
	if !ok || len(br.res) != 1 || !br.res[0].Allowed || br.res[0].Remaining != 1 {
		t.Fatalf("awaited entry: response %#v, want one allowed result with 1 remaining", got)
	}
	// The same entry's bytes in another array (as a follower decodes it).
	b := append([]byte(nil), a...)
	if got := f.Apply(&raft.Log{Index: 2, Type: raft.LogCommand, Data: b}); got != nil {
		t.Fatalf("entry nobody waits for: response %#v, want nil", got)
	}
	waiting = entry("a")
	got = f.Apply(&raft.Log{Index: 3, Type: raft.LogCommand, Data: waiting})
	if br, ok := got.(*batchResult); !ok || len(br.res) != 1 || br.res[0].Allowed {
		t.Fatalf("third call on a bucket of 2 (the unawaited one applied too): %#v, want denied", got)
	}
}
