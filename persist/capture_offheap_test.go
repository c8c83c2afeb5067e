package persist

import (
	"fmt"
	"slices"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/internal/offheap"
)

// TestCaptureOffHeap: a large capture lives outside the Go heap, keeps its
// records through growth, and release returns every byte at once.
func TestCaptureOffHeap(t *testing.T) {
	base := offheap.Mapped()
	c := newCapture(sizes{})
	const n = 20_000
	for i := n - 1; i >= 0; i-- {
		c.add(engine.Record{Key: fmt.Sprintf("user:%08d", i), Kind: engine.KindGCRA, Fields: []int64{int64(i)}})
	}
	probe := offheap.Map(1)
	offheap.Unmap(probe)
	if probe != nil && offheap.Mapped() == base {
		t.Fatal("a capture of 20,000 records is on the heap")
	}
	c.sort()
	for i := range n {
		r := c.record(i)
		if r.Key != fmt.Sprintf("user:%08d", i) || !slices.Equal(r.Fields, []int64{int64(i)}) {
			t.Fatalf("record %d = %+v", i, r)
		}
	}
	c.release()
	c.release()
	if got := offheap.Mapped(); got != base {
		t.Fatalf("%d bytes still mapped after release", got-base)
	}
	var nilc *capture
	nilc.release()
}
