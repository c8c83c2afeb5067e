package kv_test

import (
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

func TestHashCommands(t *testing.T) {
	wrongArgs := func(name string) string { return hzE("ERR wrong number of arguments for '" + name + "' command") }
	tables := map[string][]hzStep{
		"set and get": {
			{"HSET h a 1", hzI(1), ""},
			{"HSET h a 2 b 3 c 4", hzI(2), ""},
			{"HSET h a 2 a 5", hzI(0), ""},
			{"HGET h a", hzB("5"), ""},
			{"HGET h zz", hzNil, hzNil3},
			{"HGET nokey a", hzNil, hzNil3},
			{"HMGET h a zz c", hzA(hzB("5"), hzNil, hzB("4")), hzA(hzB("5"), hzNil3, hzB("4"))},
			{"HMGET nokey a", hzA(hzNil), hzA(hzNil3)},
			{"HLEN h", hzI(3), ""},
			{"HLEN nokey", hzI(0), ""},
			{"HSET h", wrongArgs("hset"), ""},
			{"HSET h a", wrongArgs("hset"), ""},
			{"HSET h a 1 b", wrongArgs("hset"), ""},
			{"HMSET h a 1 b", wrongArgs("hmset"), ""},
			{"HMSET h a 7 d 8", hzOK, ""},
			{"HGETALL h", hzBs("a", "7", "b", "3", "c", "4", "d", "8"),
				"%4\r\n" + hzB("a") + hzB("7") + hzB("b") + hzB("3") + hzB("c") + hzB("4") + hzB("d") + hzB("8")},
			{"HKEYS h", hzBs("a", "b", "c", "d"), ""},
			{"HVALS h", hzBs("7", "3", "4", "8"), ""},
			{"HGETALL nokey", hzEmpty, "%0\r\n"},
			{"HKEYS nokey", hzEmpty, ""},
			{"HVALS nokey", hzEmpty, ""},
			{"HEXISTS h a", hzI(1), ""},
			{"HEXISTS h zz", hzI(0), ""},
			{"HEXISTS nokey a", hzI(0), ""},
			{"HSTRLEN h a", hzI(1), ""},
			{"HSET h long abcdefgh '' ''", hzI(2), ""},
			{"HSTRLEN h long", hzI(8), ""},
			{"HSTRLEN h ''", hzI(0), ""},
			{"HGET h ''", hzB(""), ""},
			{"HSTRLEN nokey a", hzI(0), ""},
		},
		"setnx": {
			{"HSETNX h a 1", hzI(1), ""},
			{"HSETNX h a 2", hzI(0), ""},
			{"HGET h a", hzB("1"), ""},
			{"HSETNX h b 2", hzI(1), ""},
			{"HGETALL h", hzBs("a", "1", "b", "2"), "%2\r\n" + hzB("a") + hzB("1") + hzB("b") + hzB("2")},
		},
		"del keeps order, deletes an empty hash": {
			{"HSET h a 1 b 2 c 3", hzI(3), ""},
			{"HDEL h b zz", hzI(1), ""},
			{"HSET h b 9 d 4", hzI(2), ""},
			{"HKEYS h", hzBs("a", "c", "b", "d"), ""},
			{"HDEL h zz", hzI(0), ""},
			{"HDEL nokey a", hzI(0), ""},
			{"HDEL h a b c d a", hzI(4), ""},
			{"HLEN h", hzI(0), ""},
			{"ZADD h 1 a", hzI(1), ""}, // the key is gone: no WRONGTYPE
		},
		"hincrby": {
			{"HINCRBY h n 5", hzI(5), ""},
			{"HINCRBY h n -7", hzI(-2), ""},
			{"HGET h n", hzB("-2"), ""},
			{"HINCRBY h n x", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n 1.5", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n +1", hzE(kv.ErrNotInteger), ""},
			{"HINCRBY h n 9223372036854775808", hzE(kv.ErrNotInteger), ""},
			{"HSET h s abc sp ' 1' z -0", hzI(3), ""},
			{"HINCRBY h s 1", hzE(kv.ErrHashNotInt), ""},
			{"HINCRBY h sp 1", hzE(kv.ErrHashNotInt), ""},
			{"HINCRBY h z 1", hzE(kv.ErrHashNotInt), ""},
			{"HSET h big 9223372036854775807 small -9223372036854775808", hzI(2), ""},
			{"HINCRBY h big 1", hzE(kv.ErrOverflow), ""},
			{"HINCRBY h big 0", hzI(9223372036854775807), ""},
			{"HINCRBY h small -1", hzE(kv.ErrOverflow), ""},
			{"HINCRBY h small 1", hzI(-9223372036854775807), ""},
			{"HINCRBY nokey n 1", hzI(1), ""},
		},
		"hincrbyfloat": {
			{"HINCRBYFLOAT h f 0.1", hzB("0.1"), ""},
			{"HINCRBYFLOAT h f 0.2", hzB("0.3"), ""},
			{"HINCRBYFLOAT h f -0.3", hzB("0"), ""},
			{"HINCRBYFLOAT h f 1.5e-10", hzB("0.00000000015"), ""},
			{"HINCRBYFLOAT h g 10", hzB("10"), ""},
			{"HINCRBYFLOAT h g -12.5", hzB("-2.5"), ""},
			{"HINCRBYFLOAT h x 0x10", hzB("16"), ""},
			{"HINCRBYFLOAT h u 123456789012345678", hzB("123456789012345678"), ""},
			{"HINCRBYFLOAT h u 0.1", hzB("123456789012345678.1015625"), ""}, // 64-bit significand,
			{"HINCRBYFLOAT h t 0.000003814697265625", hzB("0.00000381469726562"), ""},
			{"HINCRBYFLOAT h w -1e-20", hzB("0"), ""},
			{"HINCRBYFLOAT h x abc", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x ' 1'", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x ''", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x nan", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x 1e5000", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x 1e-5000", hzE(kv.ErrNotFloat), ""},
			{"HINCRBYFLOAT h x inf", hzE(kv.ErrIncrNaNOrInf), ""},
			{"HINCRBYFLOAT h x -Infinity", hzE(kv.ErrIncrNaNOrInf), ""},
			{"HSET h s abc i 5 inf inf", hzI(3), ""},
			{"HINCRBYFLOAT h s 1", hzE(kv.ErrHashNotFloat), ""},
			{"HINCRBYFLOAT h i 1.25", hzB("6.25"), ""},
			{"HINCRBYFLOAT h inf 1", hzE(kv.ErrNaN), ""},
			// Redis stores the 4,000-digit result; rlserver's hash
			// values are bounded (values.MaxElementLen).
			{"HINCRBYFLOAT h huge 1e4000", hzE(kv.ErrElementLong), ""},
			{"HINCRBYFLOAT h huge 1.2e4932", hzE(kv.ErrNotFloat), ""}, // above LDBL_MAX
			{"HSET h m 1.1e4932", hzI(1), ""},
			{"HINCRBYFLOAT h m 1e4932", hzE(kv.ErrNaN), ""},
		},
		"token bucket in a hash": {
			{"HMGET tb tokens ts", hzA(hzNil, hzNil), hzA(hzNil3, hzNil3)},
			{"HSET tb tokens 9 ts 1700000000000", hzI(2), ""},
			{"HMGET tb tokens ts", hzBs("9", "1700000000000"), ""},
			{"HSET tb tokens 8.5 ts 1700000000100", hzI(0), ""},
			{"HMGET tb tokens ts", hzBs("8.5", "1700000000100"), ""},
			{"HINCRBYFLOAT tb tokens -1.5", hzB("7"), ""},
			{"HINCRBY tb ts 250", hzI(1700000000350), ""},
			{"HGETALL tb", hzBs("tokens", "7", "ts", "1700000000350"),
				"%2\r\n" + hzB("tokens") + hzB("7") + hzB("ts") + hzB("1700000000350")},
		},
		"wrongtype with a string and a sorted set": {
			{"SET s x", hzOK, ""},
			{"ZADD z 1 a", hzI(1), ""},
			{"HGET s a", hzWrong, ""}, {"HGET z a", hzWrong, ""},
			{"HMGET s a", hzWrong, ""}, {"HSET z a 1", hzWrong, ""},
			{"HSET s a 1", hzWrong, ""}, {"HMSET s a 1", hzWrong, ""},
			{"HSETNX s a 1", hzWrong, ""}, {"HDEL s a", hzWrong, ""},
			{"HGETALL s", hzWrong, ""}, {"HKEYS z", hzWrong, ""}, {"HVALS z", hzWrong, ""},
			{"HEXISTS s a", hzWrong, ""}, {"HLEN z", hzWrong, ""}, {"HSTRLEN s a", hzWrong, ""},
			{"HINCRBY s a 1", hzWrong, ""}, {"HINCRBY s a x", hzE(kv.ErrNotInteger), ""},
			{"HINCRBYFLOAT z a 1", hzWrong, ""}, {"HINCRBYFLOAT z a x", hzE(kv.ErrNotFloat), ""},
			{"HSET s a", wrongArgs("hset"), ""},
		},
	}
	hzRunTables(t, tables)
}

// TestHashLimiterWrongType: every hash command on a limiter key is
// WRONGTYPE, and the limiter's state is left alone.
func TestHashLimiterWrongType(t *testing.T) {
	for _, resp3 := range []bool{false, true} {
		h := newHZEnv(t)
		h.limiter("lim")
		for _, line := range []string{"HGET lim a", "HMGET lim a", "HSET lim a 1", "HMSET lim a 1", "HSETNX lim a 1",
			"HDEL lim a", "HGETALL lim", "HKEYS lim", "HVALS lim", "HEXISTS lim a", "HLEN lim", "HSTRLEN lim a",
			"HINCRBY lim a 1", "HINCRBYFLOAT lim a 1"} {
			h.wantWrongType(resp3, line)
		}
	}
}

// TestHashLimits: a field or value over values.MaxElementLen, or a field
// beyond values.MaxElements, is refused and nothing changes, even for the
// pairs of the same command that fit.
func TestHashLimits(t *testing.T) {
	h := newHZEnv(t)
	long := strings.Repeat("x", values.MaxElementLen+1)
	fits := strings.Repeat("y", values.MaxElementLen)
	tooLong, tooMany := hzE(kv.ErrElementLong), hzE(kv.ErrTooMany)
	do := func(want string, args ...string) {
		t.Helper()
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		if got := h.doArgs(false, b); got != want {
			if len(got) > 80 {
				got = got[:80]
			}
			t.Errorf("%.40q: got %q want %.80q", args, got, want)
		}
	}
	do(tooLong, "HSET", "h", "a", "1", "b", long)
	do(tooLong, "HSET", "h", long, "1")
	do(hzI(0), "HLEN", "h") // not created
	do(hzI(1), "HSET", "h", "a", fits)
	do(tooLong, "HSET", "h", "a", "2", "c", long)
	do(hzB(fits), "HGET", "h", "a")
	do(hzI(1), "HLEN", "h")
	do(tooLong, "HMSET", "h", "a", long)
	do(tooLong, "HSETNX", "h", "n", long)
	do(hzI(0), "HEXISTS", "h", "n")
	do(tooLong, "HINCRBY", "h2", long, "1")
	do(tooLong, "HINCRBYFLOAT", "h2", long, "1")
	do(hzI(0), "HLEN", "h2")

	// MaxElements in one command: refused whole.
	args := []string{"HSET", "big"}
	for i := range values.MaxElements + 1 {
		args = append(args, "f"+strconv.Itoa(i), "v")
	}
	do(tooMany, args...)
	do(hzI(0), "HLEN", "big")
	// Duplicates count once.
	dup := append([]string{}, args[:2*values.MaxElements+2]...)
	dup = append(dup, "f0", "w")
	do(hzI(values.MaxElements), dup...)
	do(hzI(values.MaxElements), "HLEN", "big")
	do(tooMany, "HSET", "big", "f0", "x", "new", "x")
	do(tooMany, "HSETNX", "big", "new", "x")
	do(tooMany, "HINCRBY", "big", "new", "1")
	do(tooMany, "HINCRBYFLOAT", "big", "new", "1")
	do(hzB("w"), "HGET", "big", "f0")
	do(hzI(0), "HSET", "big", "f0", "x", "f1", "0") // existing fields still change
	do(hzI(1), "HINCRBY", "big", "f1", "1")
	do(hzI(1), "HDEL", "big", "f3")
	do(hzI(1), "HSET", "big", "new", "x")
	do(hzI(values.MaxElements), "HLEN", "big")
}
