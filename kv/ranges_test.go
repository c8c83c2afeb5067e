package kv_test

import (
	"testing"

	"github.com/rlserver/rlserver/kv"
)

// TestOutOfRangeArgs pins the replies to numbers at and past the ends of
// their ranges.
func TestOutOfRangeArgs(t *testing.T) {
	hzRun(t, "ranges", []hzStep{
		{"SET str hello", hzOK, ""},
		// Regression: off+len overflowed the bound check and SETRANGE
		// panicked the shard's goroutine.
		{"SETRANGE str 9223372036854775807 x", hzE(kv.ErrTooLong), ""},
		{"SETRANGE str 9223372036854775800 xyzxyzxyzxyz", hzE(kv.ErrTooLong), ""},
		{"SETRANGE str 65535 x", hzI(65536), ""},
		{"SETRANGE str 65536 x", hzE(kv.ErrTooLong), ""},
	})
}
