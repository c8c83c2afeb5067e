package kv_test

import (
	"strconv"
	"testing"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

// TestOutOfRangeArgs pins the replies to numbers at and past the ends of
// their ranges: Redis's texts, and Redis 7.2's where Redis 7.0 let the
// value overflow (LPOS RANK -2^63, huge timeouts).
func TestOutOfRangeArgs(t *testing.T) {
	hzRun(t, "ranges", []hzStep{
		{"SET str hello", hzOK, ""},
		// Regression: off+len overflowed the bound check and SETRANGE
		// panicked the shard's goroutine.
		{"SETRANGE str 9223372036854775807 x", hzE(kv.ErrTooLong), ""},
		{"SETRANGE str 9223372036854775800 xyzxyzxyzxyz", hzE(kv.ErrTooLong), ""},
		{"SETRANGE str " + strconv.Itoa(values.MaxValueLen-1) + " x", hzI(values.MaxValueLen), ""},
		{"SETRANGE str " + strconv.Itoa(values.MaxValueLen) + " x", hzE(kv.ErrTooLong), ""},
		// SETRANGE leaves a raw string even when it reads as an integer,
		// and an empty value changes nothing, as in Redis.
		{"SET n 1234", hzOK, ""},
		{"SETRANGE n 0 ''", hzI(4), ""},
		{"OBJECT ENCODING n", hzB("int"), ""},
		{"SETRANGE n 0 2", hzI(4), ""},
		{"OBJECT ENCODING n", hzB("raw"), ""},
		{"GET n", hzB("2234"), ""},
		{"INCR n", hzI(2235), ""},
		{"RPUSH l a b a", hzI(3), ""},
		{"LPOS l a RANK -9223372036854775808", hzE(kv.ErrLongRange), ""},
		{"LPOS l a RANK -9223372036854775807", hzNil, hzNil3},
		{"LPOS l a RANK -1", hzI(2), ""},
		{"BLPOP l inf", hzE(kv.ErrTimeoutRange), ""},
		{"BLPOP l 1e400", hzE(kv.ErrTimeoutRange), ""},
		{"BLPOP l 9223372036854775807", hzE(kv.ErrTimeoutRange), ""},
		{"BLPOP l 9223372036854775", hzE(kv.ErrTimeoutRange), ""}, // past LLONG_MAX ms from now
		{"BLPOP l -inf", hzE(kv.ErrTimeoutNegative), ""},
		{"BLPOP l -0.001", hzA(hzB("l"), hzB("a")), ""}, // rounds up to 0
		{"BLPOP l -1.001", hzE(kv.ErrTimeoutNegative), ""},
		{"BLPOP l nan", hzE(kv.ErrTimeoutFloat), ""},
		{"BLPOP l ' 1'", hzE(kv.ErrTimeoutFloat), ""},
		{"BLPOP l 0x10", hzA(hzB("l"), hzB("b")), ""},
		{"BZPOPMIN z 1e400", hzE(kv.ErrTimeoutRange), ""},
		{"BLMPOP inf 1 l LEFT", hzE(kv.ErrTimeoutRange), ""},
	})
}
