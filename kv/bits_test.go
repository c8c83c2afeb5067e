package kv_test

import (
	"math/rand/v2"
	"strings"
	"testing"
)

// TestBitsSpecsMatchRedis compares the specs of SETBIT, GETBIT,
// BITCOUNT, BITPOS and LCS with redis-server's COMMAND INFO.
func TestBitsSpecsMatchRedis(t *testing.T) {
	saved := lsCommands
	defer func() { lsCommands = saved }()
	lsCommands = []string{"setbit", "getbit", "bitcount", "bitpos", "lcs"}
	TestListSetSpecsMatchRedis(t)
}

// TestBitsRedisRandom compares SETBIT, GETBIT, BITCOUNT, BITPOS and LCS,
// their errors and the strings they leave, with a real redis-server in
// RESP2 and RESP3, over random sequences on short strings (so that ranges
// and masks reach both ends), integer strings and keys of other types.
func TestBitsRedisRandom(t *testing.T) {
	r := startRedis(t)
	rng := rand.New(rand.NewPCG(35, 7))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	keys := []string{"b1", "b2", "i1", "h1", "nokey"}
	offs := []string{"0", "1", "7", "8", "9", "15", "16", "23", "31", "40", "63", "-1", "x", "4294967296", "68719476736", "1.5"}
	idx := []string{"0", "1", "-1", "2", "-2", "3", "-3", "5", "7", "8", "-8", "9", "15", "-9", "16", "-100", "100", "x"}
	text := []string{"foobar", "'ohmytext'", "'mynewtext'", "12345", "''", "ab", "aaa", "\xff\xf0\x00", "\x00\x00\xff"}
	gen := func() string {
		k := pick(keys...)
		switch rng.IntN(14) {
		case 0, 1, 2:
			return "SETBIT " + pick("b1", "b2", "i1", "h1") + " " + pick(offs...) + " " + pick("0", "1", "1", "2", "-1", "x")
		case 3, 4:
			return "GETBIT " + k + " " + pick(offs...)
		case 5, 6:
			return "BITCOUNT " + k + pick("", " "+pick(idx...)+" "+pick(idx...), " "+pick(idx...)+" "+pick(idx...)+" "+pick("BIT", "BYTE", "bit", "x"), " 1", " 1 2 BIT x")
		case 7, 8, 9:
			return "BITPOS " + k + " " + pick("0", "1", "1", "0", "2", "x") + pick("", " "+pick(idx...), " "+pick(idx...)+" "+pick(idx...), " "+pick(idx...)+" "+pick(idx...)+" "+pick("BIT", "BYTE", "x"), " 1 2 BIT x")
		case 10:
			return "SET " + pick("b1", "b2", "i1") + " " + pick(text...)
		case 11:
			return "HSET h1 f v"
		case 12:
			return "LCS " + pick("b1", "b2", "i1", "nokey", "h1") + " " + pick("b1", "b2", "i1", "nokey") +
				pick("", " LEN", " IDX", " IDX WITHMATCHLEN", " IDX MINMATCHLEN "+pick("0", "1", "2", "4", "-1", "x"), " LEN IDX", " x", " MINMATCHLEN", " IDX MINMATCHLEN 2 WITHMATCHLEN")
		}
		return "GET " + pick("b1", "b2", "i1")
	}
	compareRandom(t, r, 4000, gen, nil)
}

// TestLCSRedisLonger runs LCS on longer random strings against
// redis-server.
func TestLCSRedisLonger(t *testing.T) {
	r := startRedis(t)
	c, err := r.dial(false)
	if err != nil {
		t.Fatal(err)
	}
	defer c.close()
	h := newHZEnv(t)
	rng := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		var b strings.Builder
		for range n {
			b.WriteByte("ACGT"[rng.IntN(4)])
		}
		return b.String()
	}
	for i := range 30 {
		a, b := word(rng.IntN(300)), word(rng.IntN(300))
		for _, args := range [][]string{
			{"SET", "x", a}, {"SET", "y", b},
			{"LCS", "x", "y"}, {"LCS", "x", "y", "LEN"},
			{"LCS", "x", "y", "IDX", "MINMATCHLEN", "3", "WITHMATCHLEN"},
		} {
			bs := make([][]byte, len(args))
			for j, s := range args {
				bs[j] = []byte(s)
			}
			want, err := c.do(bs)
			if err != nil {
				t.Fatal(err)
			}
			if got := h.doArgs(false, bs); got != want {
				t.Fatalf("round %d %v:\n got %q\nwant %q", i, args, got, want)
			}
		}
	}
}

// TestSortSpecsMatchRedis compares the specs of SORT and SORT_RO with
// redis-server's COMMAND INFO.
func TestSortSpecsMatchRedis(t *testing.T) {
	saved := lsCommands
	defer func() { lsCommands = saved }()
	lsCommands = []string{"sort", "sort_ro"}
	TestListSetSpecsMatchRedis(t)
}

// TestSortRedisRandom compares SORT and SORT_RO (ASC/DESC, ALPHA, LIMIT,
// STORE, BY with a constant, GET #) on lists, sets and sorted sets with
// a real redis-server, in RESP2 and RESP3, and the lists STORE leaves.
// (A set is sorted without BY nosort, or stored, or an intset: a hashed
// set's own order is not Redis's.)
func TestSortRedisRandom(t *testing.T) {
	r := startRedis(t)
	rng := rand.New(rand.NewPCG(35, 9))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	elems := []string{"1", "2", "10", "-3", "2.5", "1e2", "0x10", "a", "b", "B", "ab", "3"}
	nums := []string{"1", "2", "10", "-3", "2.5", "1e2", "0", "7", "3"}
	lim := []string{"0", "1", "2", "-1", "5", "100", "-5", "x"}
	opts := func() string {
		var b strings.Builder
		for range rng.IntN(4) {
			b.WriteString(pick(" ASC", " DESC", " ALPHA", " LIMIT "+pick(lim...)+" "+pick(lim...), " GET #", " BY nosort", " BY w_*", " GET o_*", " x", " LIMIT 1"))
		}
		return b.String()
	}
	gen := func() string {
		switch rng.IntN(12) {
		case 0, 1:
			return "RPUSH " + pick("l1", "ln") + " " + pick(nums...) + " " + pick(elems...)
		case 2:
			return "SADD s1 " + pick(nums...) + " " + pick(elems...)
		case 3:
			return "SADD si " + pick("1", "5", "-2", "30", "7")
		case 4:
			return "ZADD z1 " + pick("1", "2", "0") + " " + pick(elems...)
		case 5, 6, 7:
			return pick("SORT ", "SORT_RO ") + pick("l1", "ln", "z1", "si", "nokey", "h1") + opts()
		case 8:
			return "SORT " + pick("s1", "l1", "z1") + pick("", " ALPHA", " DESC ALPHA") + pick(" LIMIT 0 3", " LIMIT 1 2", "")
		case 9:
			return "SORT " + pick("l1", "ln", "s1", "si", "z1", "nokey") + opts() + " STORE " + pick("dst", "l1", "h1")
		case 10:
			return "HSET h1 f v"
		}
		return "LRANGE " + pick("dst", "l1") + " 0 -1"
	}
	// Patterns read other keys: Redis serves them, rlserver refuses them
	// (or meets another error first), so they are run here only.
	h := newHZEnv(t)
	plain := func() string {
		for {
			line := gen()
			if !strings.Contains(line, "w_*") && !strings.Contains(line, "o_*") {
				return line
			}
			if got := h.doArgs(false, hzArgs(t, line)); !strings.HasPrefix(got, "-") {
				t.Errorf("%s: %q, want an error", line, got)
			}
		}
	}
	compareRandom(t, r, 4000, plain, nil)
}

// TestBitopSpecMatchesRedis compares BITOP's spec with redis-server's
// COMMAND INFO.
func TestBitopSpecMatchesRedis(t *testing.T) {
	saved := lsCommands
	defer func() { lsCommands = saved }()
	lsCommands = []string{"bitop"}
	TestListSetSpecsMatchRedis(t)
}

// TestBitopRedisRandom compares BITOP (every operation, missing and
// integer sources, sources of another type, a destination of another
// type, NOT's single-key rule, bad operations) and the strings it leaves
// with a real redis-server in RESP2 and RESP3.
func TestBitopRedisRandom(t *testing.T) {
	r := startRedis(t)
	rng := rand.New(rand.NewPCG(35, 8))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	keys := []string{"b1", "b2", "i1", "h1", "nokey", "d"}
	text := []string{"foobar", "abcdef", "12345", "''", "ab", "\xff\xf0\x00", "\x00\x00\xff\x0f"}
	gen := func() string {
		switch rng.IntN(8) {
		case 0, 1, 2, 3:
			line := "BITOP " + pick("AND", "or", "XOR", "not", "NOT", "nand", "") + " " + pick("d", "b1", "h1", "i1")
			for range 1 + rng.IntN(3) {
				line += " " + pick(keys...)
			}
			return line
		case 4:
			return "SET " + pick("b1", "b2", "i1", "d") + " " + pick(text...)
		case 5:
			return "HSET " + pick("h1", "d") + " f v"
		case 6:
			return "TYPE " + pick(keys...)
		}
		return "GET " + pick("b1", "b2", "i1", "d")
	}
	compareRandom(t, r, 3000, gen, nil)
}
