package kv_test

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/kv"
	"github.com/rlserver/rlserver/values"
)

// zsetOpsSeqs are fixed sequences of the sorted-set algebra and
// ZRANGESTORE whose every reply must match a real redis-server byte for
// byte, in RESP2 and RESP3: errors in Redis's order, the edge cases of
// numkeys, weights and AGGREGATE, and NaN sums (inf + -inf is 0).
var zsetOpsSeqs = [][]string{
	// numkeys and the options each command takes.
	{"ZADD a 1 x 2 y", "ZADD b 3 y 4 z", "ZUNION 0 a", "ZUNION -1 a", "ZUNION x a", "ZUNION 3 a b", "ZUNION 2 a",
		"ZINTER 0 a", "ZDIFF 0 a", "ZINTERCARD 0 a", "ZINTERCARD 3 a b", "ZINTERCARD x a", "ZUNIONSTORE d 0 a",
		"ZINTERSTORE d 0 a", "ZDIFFSTORE d 0 a", "ZUNIONSTORE d 3 a b", "ZUNIONSTORE d x a", "ZUNION 9223372036854775808 a",
		"ZUNION 2 a b WEIGHTS 1", "ZUNION 2 a b WEIGHTS 1 2 3", "ZUNION 2 a b WEIGHTS 1 x", "ZUNION 2 a b WEIGHTS 1 nan",
		"ZUNION 2 a b WEIGHTS 1 ''", "ZUNION 2 a b WEIGHTS 1 ' 2'", "ZUNION 2 a b WEIGHTS 2 3 WITHSCORES",
		"ZUNION 2 a b AGGREGATE", "ZUNION 2 a b AGGREGATE avg", "ZUNION 2 a b AGGREGATE min WITHSCORES",
		"ZUNION 2 a b AGGREGATE MAX withscores", "ZUNION 2 a b aggregate sum WEIGHTS 1 -1 WITHSCORES WITHSCORES",
		"ZUNION 2 a b LIMIT 1", "ZUNIONSTORE d 2 a b WITHSCORES", "ZDIFF 2 a b WEIGHTS 1 2", "ZDIFF 2 a b AGGREGATE MIN",
		"ZDIFF 2 a b WITHSCORES", "ZDIFFSTORE d 2 a b WITHSCORES", "ZINTERCARD 2 a b WITHSCORES",
		"ZINTERCARD 2 a b WEIGHTS 1 1", "ZINTERCARD 2 a b LIMIT", "ZINTERCARD 2 a b LIMIT -1", "ZINTERCARD 2 a b LIMIT x",
		"ZINTERCARD 2 a b LIMIT 0", "ZINTERCARD 2 a b LIMIT 1 LIMIT 5", "ZINTER 2 a b LIMIT 1", "ZINTER 2 a b WITHSCORES",
		"ZUNION 1 a WEIGHTS inf WITHSCORES", "ZUNION 1 a WEIGHTS -inf WITHSCORES", "ZUNION 1 a WEIGHTS 1e400",
		"ZUNION 1 a WEIGHTS 0x10 WITHSCORES"},
	// Wrong types come before option errors; missing keys are empty.
	{"ZADD a 1 x", "SET s v", "HSET h f v", "RPUSH l e", "ZUNION 2 a s", "ZUNION 2 a s WEIGHTS x", "ZUNION 2 nokey h",
		"ZINTER 2 l a", "ZDIFF 2 a l", "ZINTERCARD 2 a s", "ZUNIONSTORE d 2 a s", "ZUNIONSTORE s 1 a", "TYPE s",
		"ZUNION 2 nokey nokey2 WITHSCORES", "ZINTER 2 a nokey", "ZDIFF 2 nokey a", "ZINTERCARD 2 a nokey",
		"ZUNIONSTORE h 1 nokey", "EXISTS h", "ZUNIONSTORE d 1 a", "ZINTERSTORE d 2 a nokey", "EXISTS d",
		"ZRANGESTORE d s 0 -1", "ZRANGESTORE d nokey 0 -1", "ZRANGESTORE l a 0 -1", "TYPE l"},
	// Sets are inputs whose members score 1.
	{"SADD s1 x y 3 1", "SADD s2 y z", "ZADD z 5 y 0.5 x 2 w", "ZUNION 3 s1 s2 z WITHSCORES", "ZINTER 2 s1 z WITHSCORES",
		"ZINTER 3 s1 s2 z WEIGHTS 2 3 4 WITHSCORES", "ZDIFF 2 s1 z WITHSCORES", "ZDIFF 2 z s1 WITHSCORES",
		"ZUNIONSTORE d 2 s1 s2", "ZRANGE d 0 -1 WITHSCORES", "ZINTERCARD 2 s1 z", "ZINTERCARD 3 s1 s2 z LIMIT 1",
		"ZUNION 1 s1", "ZDIFFSTORE s1 2 s1 s2", "TYPE s1", "ZRANGE s1 0 -1 WITHSCORES"},
	// AGGREGATE and weights, inf and -inf, NaN results.
	{"ZADD a 1 x 2 y inf i -inf n 0 z", "ZADD b 3 y inf n -inf i 5 z", "ZUNION 2 a b WITHSCORES", "ZINTER 2 a b WITHSCORES",
		"ZUNION 2 a b AGGREGATE MIN WITHSCORES", "ZUNION 2 a b AGGREGATE MAX WITHSCORES", "ZINTER 2 a b AGGREGATE MIN WITHSCORES",
		"ZINTER 2 a b AGGREGATE MAX WITHSCORES", "ZUNION 2 a b WEIGHTS 0 1 WITHSCORES", "ZINTER 2 a b WEIGHTS 1 0 WITHSCORES",
		"ZINTER 2 a b WEIGHTS 1 0 AGGREGATE MIN WITHSCORES", "ZINTER 2 a b WEIGHTS 1 0 AGGREGATE MAX WITHSCORES",
		"ZINTER 3 a b a WEIGHTS 1 0 1 WITHSCORES", "ZINTER 3 a a a WEIGHTS inf -inf 1 WITHSCORES",
		"ZUNION 3 a a a WEIGHTS inf -inf inf WITHSCORES", "ZUNION 2 a b WEIGHTS -1 -1 WITHSCORES",
		"ZUNIONSTORE d 2 a b WEIGHTS -1 0", "ZRANGE d 0 -1 WITHSCORES", "ZINTERSTORE d 2 a b AGGREGATE MAX", "ZRANGE d 0 -1 WITHSCORES",
		"ZUNION 2 a b WEIGHTS 0.1 0.2 WITHSCORES", "ZADD c 0.1 x 0.2 y 0.7 z", "ZUNION 3 c a c WEIGHTS 0.3 0.1 0.7 WITHSCORES",
		"ZINTER 3 c c c WEIGHTS 0.1 0.2 0.3 WITHSCORES"},
	// The destination is replaced (type and TTL) or deleted; it may be an input.
	{"ZADD a 1 x 2 y", "SET d str", "EXPIRE d 100", "ZUNIONSTORE d 1 a", "TTL d", "TYPE d", "ZINTERSTORE d 2 a nokey",
		"EXISTS d", "ZUNIONSTORE a 2 a a", "ZRANGE a 0 -1 WITHSCORES", "ZINTERSTORE a 2 a a WEIGHTS 1 2",
		"ZRANGE a 0 -1 WITHSCORES", "ZDIFFSTORE a 2 a a", "EXISTS a", "ZADD a 1 x 2 y 3 z", "ZDIFFSTORE d 1 a", "ZRANGE d 0 -1 WITHSCORES"},
	// ZRANGESTORE by rank, score and lex, REV and LIMIT.
	{"ZADD z 1 a 2 b 3 c 4 d 5 e", "ZRANGESTORE d z 0 -1", "ZRANGE d 0 -1 WITHSCORES", "ZRANGESTORE d z 1 2 REV",
		"ZRANGE d 0 -1 WITHSCORES", "ZRANGESTORE d z (1 4 BYSCORE LIMIT 1 2", "ZRANGE d 0 -1 WITHSCORES",
		"ZRANGESTORE d z +inf -inf BYSCORE REV LIMIT 0 3", "ZRANGE d 0 -1 WITHSCORES", "ZRANGESTORE d z 5 10", "EXISTS d",
		"ZRANGESTORE d z 0 -1 WITHSCORES", "ZRANGESTORE d z 0 -1 LIMIT 0 1", "ZRANGESTORE d z x 1", "ZRANGESTORE d z x 1 BYSCORE",
		"ZRANGESTORE d z a b BYLEX", "ZRANGESTORE d z 0 -1 BYLEX", "ZADD y 0 a 0 b 0 c 0 d", "ZRANGESTORE d y [b + BYLEX",
		"ZRANGE d 0 -1 WITHSCORES", "ZRANGESTORE d y + - BYLEX REV LIMIT 1 2", "ZRANGE d 0 -1", "ZRANGESTORE z z 0 1",
		"ZRANGE z 0 -1 WITHSCORES", "ZRANGESTORE d z 0 -1 BYSCORE BYLEX", "ZRANGESTORE d z 0 -1 REV REV"},
	// The count ranges of the random picks (replies that are not random:
	// errors, empty, the whole one-member value).
	{"SADD s a", "ZADD z 1 a", "HSET h a 1", "SRANDMEMBER s -9223372036854775808", "ZRANDMEMBER z -9223372036854775808",
		"HRANDFIELD h -9223372036854775808", "SRANDMEMBER nokey -9223372036854775808", "ZRANDMEMBER nokey -9223372036854775808",
		"HRANDFIELD nokey -9223372036854775808", "ZRANDMEMBER z x WITH", "HRANDFIELD h x WITH", "ZRANDMEMBER z -9223372036854775808 WITH",
		"ZRANDMEMBER z 1 WITH", "ZRANDMEMBER z 4611686018427387904 WITHSCORES", "HRANDFIELD h 4611686018427387904 WITHVALUES",
		"ZRANDMEMBER z -4611686018427387904 WITHSCORES", "HRANDFIELD nokey -4611686018427387904 WITHVALUES",
		"ZRANDMEMBER z 4611686018427387903 WITHSCORES", "HRANDFIELD h 4611686018427387903 withvalues", "ZRANDMEMBER z 9223372036854775807",
		"SRANDMEMBER s 9223372036854775807", "SRANDMEMBER nokey -99999999999", "ZRANDMEMBER nokey -99999999999",
		"HRANDFIELD nokey -99999999999 WITHVALUES", "SRANDMEMBER s x", "SRANDMEMBER s 1 2"},
	// Arity errors (the server's check).
	{"ZUNION 1", "ZINTER 1", "ZDIFF 1", "ZINTERCARD 1", "ZUNIONSTORE d 1", "ZINTERSTORE d 1", "ZDIFFSTORE d 1",
		"ZRANGESTORE d z 0"},
}

// TestZSetOpsRedisCompat runs zsetOpsSeqs on a real redis-server and on
// the engine, in RESP2 and RESP3.
func TestZSetOpsRedisCompat(t *testing.T) {
	r := startRedis(t)
	for _, resp3 := range []bool{false, true} {
		c, err := r.dial(resp3)
		if err != nil {
			t.Fatal(err)
		}
		defer c.close()
		for si, seq := range zsetOpsSeqs {
			if _, err := c.do([][]byte{[]byte("FLUSHALL")}); err != nil {
				t.Fatal(err)
			}
			h := newHZEnv(t)
			for _, line := range seq {
				args := hzArgs(t, line)
				want, err := c.do(args)
				if err != nil {
					t.Fatalf("redis %s: %v", line, err)
				}
				if _, ok := kv.Lookup(args[0]); !ok {
					continue // the server's own outside MULTI
				}
				if got := h.doArgs(resp3, args); got != want {
					t.Errorf("seq %d resp3=%v %s:\n got %q\nwant %q", si, resp3, line, got, want)
				}
			}
		}
	}
}

// TestZSetOpsRedisRandom sends the same random sorted-set algebra and
// ZRANGESTORE commands to a real redis-server and to the engine, in RESP2
// and RESP3, and compares every reply; each store is read back.
func TestZSetOpsRedisRandom(t *testing.T) {
	r := startRedis(t)
	rng := rand.New(rand.NewPCG(35, 3))
	pick := func(xs ...string) string { return xs[rng.IntN(len(xs))] }
	members := []string{"a", "b", "c", "d", "e", "1", "2", "ab"}
	scores := []string{"0", "1", "2", "-1", "0.1", "0.2", "0.3", "2.5", "-0.7", "1e3", "inf", "-inf", "3", "0.1"}
	weights := []string{"1", "0", "-1", "2", "0.5", "0.1", "0.3", "inf", "-inf", "-0.2", "x"}
	keys := []string{"z1", "z2", "z3", "s1", "s2", "nokey", "h1"}
	lex := []string{"-", "+", "[a", "(b", "[c", "(e", "[1"}
	opts := func(n int, op string) string {
		s := ""
		for range rng.IntN(3) {
			switch rng.IntN(5) {
			case 0, 1:
				if op == "ZDIFF" && rng.IntN(4) != 0 {
					continue
				}
				k := n
				if rng.IntN(8) == 0 {
					k = n - 1 + 2*rng.IntN(2) // a count that differs
				}
				s += " WEIGHTS"
				for range k {
					s += " " + pick(weights...)
				}
			case 2, 3:
				s += " AGGREGATE " + pick("SUM", "MIN", "MAX", "sum", "avg")
			case 4:
				s += " " + pick("WITHSCORES", "LIMIT 1", "WITHSCORES")
			}
		}
		return s
	}
	numkeys := func(n int) string {
		if rng.IntN(10) == 0 {
			return pick("0", "-1", "x", strconv.Itoa(n+1), strconv.Itoa(n-1))
		}
		return strconv.Itoa(n)
	}
	gen := func() string {
		switch rng.IntN(14) {
		case 0, 1, 2:
			return "ZADD " + pick("z1", "z2", "z3") + " " + pick(scores...) + " " + pick(members...) + " " + pick(scores...) + " " + pick(members...)
		case 3:
			return "SADD " + pick("s1", "s2") + " " + pick(members...) + " " + pick(members...)
		case 4:
			return "ZREM " + pick("z1", "z2", "z3") + " " + pick(members...)
		case 5, 6, 7:
			op := pick("ZUNION", "ZINTER", "ZDIFF")
			n := 1 + rng.IntN(3)
			s := op + " " + numkeys(n)
			for range n {
				s += " " + pick(keys...)
			}
			return s + opts(n, op) + pick("", " WITHSCORES", " WITHSCORES")
		case 8, 9:
			op := pick("ZUNIONSTORE", "ZINTERSTORE", "ZDIFFSTORE")
			n := 1 + rng.IntN(3)
			s := op + " " + pick("d1", "d2", "z3", "s2", "h1") + " " + numkeys(n)
			for range n {
				s += " " + pick(keys...)
			}
			return s + opts(n, op[:5])
		case 10:
			n := 1 + rng.IntN(3)
			s := "ZINTERCARD " + numkeys(n)
			for range n {
				s += " " + pick(keys...)
			}
			return s + pick("", "", " LIMIT 1", " LIMIT 0", " LIMIT 2", " LIMIT -1", " WITHSCORES")
		case 11:
			s := "ZRANGESTORE " + pick("d1", "d2", "z3") + " " + pick("z1", "z2", "s1", "nokey") + " "
			switch rng.IntN(3) {
			case 0:
				s += pick("0", "1", "-1", "-2", "5") + " " + pick("0", "1", "-1", "3", "10")
			case 1:
				s += pick("-inf", "0", "(1", "2", "+inf") + " " + pick("-inf", "0", "(1", "2", "+inf") + " BYSCORE"
			case 2:
				s += pick(lex...) + " " + pick(lex...) + " BYLEX"
			}
			return s + pick("", "", " REV", " LIMIT 1 2", " REV LIMIT 0 1", " LIMIT 0 -1")
		}
		return "ZRANGE " + pick("d1", "d2", "z3", "z1") + " 0 -1 WITHSCORES"
	}
	// Each pass (RESP2, then RESP3) starts with a hash among the keys.
	const rounds = 3000
	i := 0
	withHash := func() string {
		defer func() { i++ }()
		if i%(rounds+1) == 0 {
			return "HSET h1 a 1"
		}
		return gen()
	}
	compareRandom(t, r, rounds+1, withHash, nil)
}

// TestZSetOpsSpecsMatchRedis compares the specs of the sorted-set algebra
// and ZRANGESTORE with redis-server's COMMAND INFO.
func TestZSetOpsSpecsMatchRedis(t *testing.T) {
	saved := lsCommands
	defer func() { lsCommands = saved }()
	lsCommands = []string{"zunion", "zinter", "zdiff", "zunionstore", "zinterstore", "zdiffstore", "zintercard", "zrangestore"}
	TestListSetSpecsMatchRedis(t)
}

// TestZSetOpsEdges pins the algebra's edge cases without a redis-server:
// numkeys, weights counts, wrong types (a limiter key among them),
// missing keys, NaN sums, the destination's replacement and the bounds.
func TestZSetOpsEdges(t *testing.T) {
	hzRun(t, "algebra", []hzStep{
		{"ZADD a 1 x inf y", hzI(2), ""},
		{"ZADD b -inf y 2 z", hzI(2), ""},
		{"SADD s x z", hzI(2), ""},
		{"ZUNION 0 a", hzE("ERR at least 1 input key is needed for 'zunion' command"), ""},
		{"ZINTERSTORE d 0 a", hzE("ERR at least 1 input key is needed for 'zinterstore' command"), ""},
		{"ZINTERCARD 0 a", hzE("ERR at least 1 input key is needed for 'zintercard' command"), ""},
		{"ZUNION 3 a b", hzE(kv.ErrSyntax), ""},
		{"ZUNION x a", hzE(kv.ErrNotInteger), ""},
		{"ZUNION 2 a b WEIGHTS 1", hzE(kv.ErrSyntax), ""},
		{"ZUNION 2 a b WEIGHTS 1 2 3", hzE(kv.ErrSyntax), ""},
		{"ZUNION 2 a b WEIGHTS 1 nan", hzE(kv.ErrWeightFloat), ""},
		{"ZDIFF 2 a b WEIGHTS 1 1", hzE(kv.ErrSyntax), ""},
		{"ZUNIONSTORE d 2 a b WITHSCORES", hzE(kv.ErrSyntax), ""},
		{"ZINTERCARD 2 a b LIMIT -1", hzE(kv.ErrLimitNegative), ""},
		// inf + -inf is NaN: Redis's convention makes it 0.
		{"ZUNION 2 a b WITHSCORES", hzBs("y", "0", "x", "1", "z", "2"),
			hzA(hzA(hzB("y"), hzD3("0")), hzA(hzB("x"), hzD3("1")), hzA(hzB("z"), hzD3("2")))},
		{"ZINTER 2 a b AGGREGATE MAX WITHSCORES", hzBs("y", "inf"), hzA(hzA(hzB("y"), hzD3("inf")))},
		// 0 * inf is NaN: 0.
		{"ZUNION 1 a WEIGHTS 0 WITHSCORES", hzBs("x", "0", "y", "0"), hzA(hzA(hzB("x"), hzD3("0")), hzA(hzB("y"), hzD3("0")))},
		// A set's members score 1.
		{"ZINTER 2 s a WITHSCORES", hzBs("x", "2"), hzA(hzA(hzB("x"), hzD3("2")))},
		{"ZDIFF 2 s a WITHSCORES", hzBs("z", "1"), hzA(hzA(hzB("z"), hzD3("1")))},
		{"ZINTERCARD 2 s nokey", hzI(0), ""},
		{"ZUNION 2 nokey nokey2", hzEmpty, ""},
		{"SET str v", hzOK, ""},
		{"ZUNION 2 a str", hzWrong, ""},
		{"ZUNION 2 str a WEIGHTS x", hzWrong, ""},
		{"ZRANGESTORE d s 0 -1", hzWrong, ""},
		// A store replaces any kind; an empty result deletes.
		{"ZUNIONSTORE str 2 a s", hzI(3), ""},
		{"ZRANGE str 0 -1 WITHSCORES", hzBs("z", "1", "x", "2", "y", "inf"),
			hzA(hzA(hzB("z"), hzD3("1")), hzA(hzB("x"), hzD3("2")), hzA(hzB("y"), hzD3("inf")))},
		{"ZINTERSTORE str 2 a nokey", hzI(0), ""},
		{"ZCARD str", hzI(0), ""},
		{"ZRANGESTORE a a 0 0", hzI(1), ""},
		{"ZRANGE a 0 -1", hzBs("x"), ""},
		{"ZRANGESTORE a nokey 0 -1", hzI(0), ""},
		{"ZCARD a", hzI(0), ""},
	})
	h := newHZEnv(t)
	h.limiter("lim")
	h.do(false, "ZADD a 1 x")
	for _, line := range []string{"ZUNION 2 a lim", "ZINTERCARD 1 lim", "ZDIFFSTORE d 2 lim a", "ZRANGESTORE d lim 0 -1"} {
		h.wantWrongType(false, line)
	}
	// A store does not replace limiter state, as SET does not.
	h.do(false, "SADD s x")
	for _, line := range []string{"ZUNIONSTORE lim 1 a", "ZRANGESTORE lim a 0 -1", "SUNIONSTORE lim s", "SINTERSTORE lim s"} {
		h.wantWrongType(false, line)
	}
	if got := h.do(false, "TYPE lim"); got == "+zset\r\n" || got == "+set\r\n" || got == "+none\r\n" {
		t.Errorf("TYPE lim after the stores: %q", got)
	}
}

// TestZSetOpsBound: a union past the sorted-set bound is refused and the
// destination keeps its value.
func TestZSetOpsBound(t *testing.T) {
	h := newHZEnv(t)
	for _, key := range []string{"a", "b"} {
		args := [][]byte{[]byte("ZADD"), []byte(key)}
		for i := range values.MaxElements {
			args = append(args, []byte("1"), []byte(key+strconv.Itoa(i)))
		}
		if got := h.doArgs(false, args); got != hzI(values.MaxElements) {
			t.Fatalf("ZADD %s: %q", key, got)
		}
	}
	hzRun1(t, h, []hzStep{
		{"ZADD d 1 x", hzI(1), ""},
		{"ZUNIONSTORE d 2 a b", hzE(kv.ErrTooMany), ""},
		{"ZRANGE d 0 -1", hzBs("x"), ""},
		{"ZINTERSTORE d 2 a b", hzI(0), ""},
		{"ZUNIONSTORE d 1 a", hzI(values.MaxElements), ""},
		{"ZINTERCARD 2 a d LIMIT 7", hzI(7), ""},
	})
}

// TestZSetOpsPaths: the algebra and ZRANGESTORE run alike on the engine,
// on a script's Overlay (whose effects then apply), and decoded from
// their Raft log encoding on a replica.
func TestZSetOpsPaths(t *testing.T) {
	const sec = int64(1e9)
	now := int64(1_700_000_000) * sec
	setup := []string{"ZADD {t}a 1 x 2 y 3 z", "ZADD {t}b 5 y 0.5 w", "SADD {t}s x w q", "SET {t}d old"}
	cmds := []string{"ZUNIONSTORE {t}d 3 {t}a {t}b {t}s WEIGHTS 1 2 3", "ZINTERSTORE {t}i 2 {t}a {t}s AGGREGATE MAX",
		"ZDIFFSTORE {t}f 2 {t}a {t}b", "ZRANGESTORE {t}r {t}a +inf (1 BYSCORE REV", "ZINTERCARD 2 {t}a {t}b",
		"ZUNION 2 {t}d {t}r WITHSCORES", "ZRANGESTORE {t}a {t}a 0 0"}
	check := []string{"ZRANGE {t}d 0 -1 WITHSCORES", "ZRANGE {t}i 0 -1 WITHSCORES", "ZRANGE {t}f 0 -1 WITHSCORES",
		"ZRANGE {t}r 0 -1 WITHSCORES", "ZRANGE {t}a 0 -1 WITHSCORES"}
	direct := engine.New(2)
	defer direct.Close()
	doLines(t, direct, now, setup...)
	want := doLines(t, direct, now+sec, cmds...)

	// A script's run on an Overlay, then its effects.
	e := engine.New(3)
	defer e.Close()
	doLines(t, e, now, setup...)
	o := kv.NewOverlay(now+sec, overlayFetch(t, e, now+sec))
	got := runOn(t, o, cmds)
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("%s on the overlay: %q, on the engine %q", cmds[i], got[i], want[i])
		}
	}
	res := make([]engine.Result, 1)
	if err := e.Do(context.Background(), now+2*sec, []engine.Request{o.Effects(false).Request()}, res); err != nil {
		t.Fatal(err)
	}

	// A replica applying the commands from their log encoding.
	replica := engine.New(4)
	defer replica.Close()
	doLines(t, replica, now, setup...)
	for i, l := range cmds {
		args := strings.Fields(l)
		spec, _ := kv.Lookup([]byte(args[0]))
		b := make([][]byte, len(args))
		for j, a := range args {
			b[j] = []byte(a)
		}
		cmd, err := kv.Decode(kv.Append(nil, kv.New(spec, b, false)))
		if err != nil {
			t.Fatal(err)
		}
		req := engine.CommandRequest(cmd, !spec.Write())
		if err := replica.Do(context.Background(), now+sec, []engine.Request{req}, res); err != nil {
			t.Fatal(err)
		}
		if res[0].Reply != want[i] {
			t.Errorf("%s on the replica: %q, want %q", l, res[0].Reply, want[i])
		}
	}
	a := doLines(t, direct, now+2*sec, check...)
	for name, eng := range map[string]*engine.Engine{"overlay's effects": e, "replica": replica} {
		b := doLines(t, eng, now+2*sec, check...)
		for i := range check {
			if a[i] != b[i] {
				t.Errorf("%s after the %s: %q, want %q", check[i], name, b[i], a[i])
			}
		}
	}
}
