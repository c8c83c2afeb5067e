package engine

import (
	"testing"
	"unsafe"
)

// TestRequestSize: a Request is one cache line plus the data command;
// Tiers and Scaled live in the padding after ReadOnly, so groups and
// policies cost plain batches no memory traffic.
func TestRequestSize(t *testing.T) {
	if n := unsafe.Sizeof(Request{}); n != 80 {
		t.Errorf("Request is %d bytes, want 80", n)
	}
}
