package clienttest

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// The limiter commands end to end: RL.ALLOW, RL.PEEK and the keyspace
// commands, their argument errors, unknown commands, case and inline input.

func TestAllowBurstOfExactlyCapacity(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		key := "burst" + string(rune('0'+proto))
		for n := int64(1); n <= 5; n++ {
			wantDecision(t, c, allowedAt(5, n), "RL.ALLOW", key, 5, slowRate)
		}
		for range 3 {
			wantDecision(t, c, deniedFull(5), "RL.ALLOW", key, 5, slowRate)
			wantDecision(t, c, deniedFull(5), "RL.ALLOW", key, 5, slowRate, 1)
		}
		// A fresh bucket's first reply is exact: reset is cost periods.
		wantDecision(t, c, decision{1, 9, exactly(0), exactly(periodMs)}, "RL.ALLOW", key+"x", 10, slowRate)
		wantDecision(t, c, decision{1, 7, exactly(0), exactly(3 * periodMs)}, "RL.ALLOW", key+"y", 10, slowRate, 3)
	}
}

func TestAllowCost(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)

	// cost == capacity empties a fresh bucket in one call.
	wantDecision(t, c, decision{1, 0, exactly(0), exactly(5 * periodMs)}, "RL.ALLOW", "whole", 5, slowRate, 5)
	wantDecision(t, c, deniedFull(5), "RL.ALLOW", "whole", 5, slowRate)

	// cost > capacity can never succeed: retry -1, nothing written.
	wantDecision(t, c, decision{0, 5, exactly(-1), exactly(0)}, "RL.ALLOW", "never", 5, slowRate, 6)
	wantInt(t, c, 0, "EXISTS", "never")
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "never", 5, slowRate)
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "never", 5, slowRate)
	wantDecision(t, c, decision{0, 3, exactly(-1), aged(2 * periodMs)}, "RL.ALLOW", "never", 5, slowRate, 6)
	wantDecision(t, c, decision{0, 3, exactly(-1), aged(2 * periodMs)}, "RL.ALLOW", "never", 5, slowRate, 1000000)
	// ...and cost == capacity + 1 is the first such cost; the state is untouched.
	wantDecision(t, c, decision{1, 2, exactly(0), aged(3 * periodMs)}, "RL.ALLOW", "never", 5, slowRate)

	// A cost larger than what is left is denied until enough refills.
	wantDecision(t, c, decision{1, 7, exactly(0), exactly(3 * periodMs)}, "RL.ALLOW", "partial", 10, slowRate, 3)
	wantDecision(t, c, decision{0, 7, aged(periodMs), aged(3 * periodMs)}, "RL.ALLOW", "partial", 10, slowRate, 8)
	wantDecision(t, c, decision{1, 0, exactly(0), aged(10 * periodMs)}, "RL.ALLOW", "partial", 10, slowRate, 7)

	// cost 0 is a read-only peek: it never creates a key...
	wantDecision(t, c, decision{1, 5, exactly(0), exactly(0)}, "RL.ALLOW", "peek0", 5, slowRate, 0)
	wantInt(t, c, 0, "EXISTS", "peek0")
	wantInt(t, c, 3, "DBSIZE") // whole, never, partial
	wantReply(t, c, "none", "TYPE", "peek0")
	wantInt(t, c, -2, "PTTL", "peek0")
	// ...and never writes one.
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "peek0", 5, slowRate)
	for range 3 {
		wantDecision(t, c, decision{1, 4, exactly(0), aged(periodMs)}, "RL.ALLOW", "peek0", 5, slowRate, 0)
	}
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "peek0", 5, slowRate)
	// On an empty bucket cost 0 is still allowed: it takes nothing.
	wantDecision(t, c, decision{1, 0, exactly(0), aged(10 * periodMs)}, "RL.ALLOW", "partial", 10, slowRate, 0)
}

func TestPeek(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)

	// On a missing key RL.PEEK answers what RL.ALLOW would, and creates nothing.
	for range 3 {
		wantDecision(t, c, decision{1, 4, exactly(0), exactly(periodMs)}, "RL.PEEK", "p", 5, slowRate)
		wantDecision(t, c, decision{1, 2, exactly(0), exactly(3 * periodMs)}, "RL.PEEK", "p", 5, slowRate, 3)
		wantDecision(t, c, decision{0, 5, exactly(-1), exactly(0)}, "RL.PEEK", "p", 5, slowRate, 6)
		wantDecision(t, c, decision{1, 5, exactly(0), exactly(0)}, "RL.PEEK", "p", 5, slowRate, 0)
	}
	wantInt(t, c, 0, "EXISTS", "p")
	wantInt(t, c, 0, "DBSIZE")

	// On a live key it never takes tokens.
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "p", 5, slowRate)
	for range 3 {
		wantDecision(t, c, allowedAt(5, 2), "RL.PEEK", "p", 5, slowRate)
		wantDecision(t, c, decision{1, 0, exactly(0), aged(5 * periodMs)}, "RL.PEEK", "p", 5, slowRate, 4)
		wantDecision(t, c, decision{0, 4, aged(periodMs), aged(periodMs)}, "RL.PEEK", "p", 5, slowRate, 5)
	}
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "p", 5, slowRate)
	for n := int64(3); n <= 5; n++ {
		wantDecision(t, c, allowedAt(5, n), "RL.ALLOW", "p", 5, slowRate)
	}
	wantDecision(t, c, deniedFull(5), "RL.PEEK", "p", 5, slowRate)
	wantDecision(t, c, decision{1, 0, exactly(0), aged(5 * periodMs)}, "RL.PEEK", "p", 5, slowRate, 0)
	wantInt(t, c, 1, "DBSIZE")
}

func TestReconfigureKeepsState(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "k", 5, slowRate)
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "k", 5, slowRate)
	// A larger capacity at the same rate: the two tokens taken stay taken.
	wantDecision(t, c, allowedAt(10, 3), "RL.ALLOW", "k", 10, slowRate)
	// Twice the rate (500 s a token, tolerance 2500 s) against the stored
	// 3000 s backlog: denied, the call fits again in 1000 s.
	wantDecision(t, c, decision{0, 0, aged(periodMs), aged(3 * periodMs)}, "RL.ALLOW", "k", 5, "0.002")
	wantDecision(t, c, allowedAt(10, 4), "RL.ALLOW", "k", 10, slowRate)
}

func TestKeyspaceCommands(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)

	for _, k := range []string{"a", "b", "c", "d", "e"} {
		wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", k, 5, slowRate)
	}
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "a", 5, slowRate)
	wantInt(t, c, 5, "DBSIZE")

	// EXISTS counts every argument, duplicates included.
	wantInt(t, c, 1, "EXISTS", "a")
	wantInt(t, c, 0, "EXISTS", "zz")
	wantInt(t, c, 3, "EXISTS", "a", "a", "a")
	wantInt(t, c, 4, "EXISTS", "a", "zz", "b", "a", "c")

	// TYPE, PTTL, TTL.
	wantReply(t, c, "rl-gcra", "TYPE", "a")
	wantReply(t, c, "none", "TYPE", "zz")
	wantInt(t, c, -2, "PTTL", "zz")
	wantInt(t, c, -2, "TTL", "zz")
	if got, want := doInt(t, c, "PTTL", "a"), aged(2*periodMs); !want.has(got) {
		t.Errorf("PTTL a = %d, want %v", got, want)
	}
	if got, want := doInt(t, c, "TTL", "a"), (span{2000 - slackMs/1000, 2000}); !want.has(got) {
		t.Errorf("TTL a = %d, want %v", got, want)
	}
	if got, want := doInt(t, c, "PTTL", "b"), aged(periodMs); !want.has(got) {
		t.Errorf("PTTL b = %d, want %v", got, want)
	}

	// DEL, UNLINK and RL.RESET reply the number removed.
	wantInt(t, c, 1, "DEL", "a")
	wantInt(t, c, 0, "DEL", "a")
	wantInt(t, c, 1, "UNLINK", "b", "zz")
	wantInt(t, c, 1, "RL.RESET", "c", "c")
	wantInt(t, c, 0, "RL.RESET", "a", "b", "c", "zz")
	wantInt(t, c, 2, "DBSIZE")
	wantInt(t, c, 0, "EXISTS", "a", "b", "c")
	wantInt(t, c, -2, "PTTL", "a")
	wantReply(t, c, "none", "TYPE", "b")
	// A removed bucket starts full again.
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "a", 5, slowRate)
	wantInt(t, c, 3, "DBSIZE")

	// FLUSHALL, FLUSHALL SYNC|ASYNC and FLUSHDB empty the server.
	wantReply(t, c, "OK", "FLUSHALL")
	wantInt(t, c, 0, "DBSIZE")
	wantInt(t, c, 0, "EXISTS", "a", "d", "e")
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "a", 5, slowRate)
	wantReply(t, c, "OK", "FLUSHALL", "ASYNC")
	wantInt(t, c, 0, "DBSIZE")
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "a", 5, slowRate)
	wantReply(t, c, "OK", "flushall", "sync")
	wantInt(t, c, 0, "DBSIZE")
	wantDecision(t, c, allowedAt(5, 1), "RL.ALLOW", "a", 5, slowRate)
	wantReply(t, c, "OK", "FLUSHDB")
	wantInt(t, c, 0, "DBSIZE")
	wantErr(t, c, "ERR syntax error", "FLUSHALL", "now")
}

func TestKeysAreBinarySafe(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	keys := []string{"", " ", "a\x00b", "a\r\nb", "\xff\xfe", strings.Repeat("k", 10000)}
	for _, k := range keys {
		wantDecision(t, c, allowedAt(2, 1), "RL.ALLOW", k, 2, slowRate)
	}
	for _, k := range keys {
		wantDecision(t, c, allowedAt(2, 2), "RL.ALLOW", k, 2, slowRate)
		wantInt(t, c, 1, "EXISTS", k)
	}
	wantInt(t, c, 0, "EXISTS", "a")
	wantInt(t, c, int64(len(keys)), "DBSIZE")
}

func TestArgumentErrors(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	const (
		notInt    = "ERR value is not an integer or out of range"
		notFloat  = "ERR value is not a valid float"
		syntax    = "ERR syntax error"
		badCap    = "ERR capacity must be an integer >= 1"
		badRate   = "ERR rate must be a finite number > 0"
		badCost   = "ERR cost must be an integer >= 0"
		tooLong   = "ERR capacity/rate too large: a full refill would take longer than 2^60 ns (about 36 years)"
		huge      = "99999999999999999999"
		maxInt64  = "9223372036854775807"
		overInt64 = "9223372036854775808"
	)
	arity := func(name string) string { return "ERR wrong number of arguments for '" + name + "' command" }
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"RL.ALLOW"}, arity("rl.allow")},
		{[]any{"RL.ALLOW", "k"}, arity("rl.allow")},
		{[]any{"RL.ALLOW", "k", 1}, arity("rl.allow")},
		{[]any{"rl.allow", "k", 1}, arity("rl.allow")},
		{[]any{"RL.PEEK", "k", 1}, arity("rl.peek")},
		{[]any{"RL.RESET"}, arity("rl.reset")},
		{[]any{"DEL"}, arity("del")},
		{[]any{"UNLINK"}, arity("unlink")},
		{[]any{"EXISTS"}, arity("exists")},
		{[]any{"PTTL"}, arity("pttl")},
		{[]any{"PTTL", "a", "b"}, arity("pttl")},
		{[]any{"TTL", "a", "b"}, arity("ttl")},
		{[]any{"TYPE"}, arity("type")},
		{[]any{"TYPE", "a", "b"}, arity("type")},
		{[]any{"DBSIZE", "x"}, arity("dbsize")},
		{[]any{"PING", "a", "b"}, arity("ping")},
		{[]any{"ECHO"}, arity("echo")},

		// Extra arguments.
		{[]any{"RL.ALLOW", "k", 1, 1, 1, "x"}, syntax},
		{[]any{"RL.ALLOW", "k", 1, 1, 1, 1}, syntax},
		{[]any{"RL.PEEK", "k", 1, 1, 1, "x"}, syntax},
		{[]any{"RL.ALLOW", "k", "x", "x", "x", "x"}, syntax},

		// Capacity: an integer >= 1 that fits with the rate.
		{[]any{"RL.ALLOW", "k", "abc", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "1.5", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "10.0", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "1e3", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "+5", 1}, notInt},
		{[]any{"RL.ALLOW", "k", " 5", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "5 ", 1}, notInt},
		{[]any{"RL.ALLOW", "k", huge, 1}, notInt},
		{[]any{"RL.ALLOW", "k", overInt64, 1}, notInt},
		{[]any{"RL.ALLOW", "k", "abc", "abc"}, notInt},
		{[]any{"RL.ALLOW", "k", "nan", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "inf", 1}, notInt},
		{[]any{"RL.ALLOW", "k", "0", 1}, badCap},
		{[]any{"RL.ALLOW", "k", "-1", 1}, badCap},
		{[]any{"RL.ALLOW", "k", "-" + maxInt64, 1}, badCap},
		{[]any{"RL.PEEK", "k", "0", 1}, badCap},
		{[]any{"RL.ALLOW", "k", maxInt64, 1}, tooLong},
		{[]any{"RL.ALLOW", "k", "2000000", slowRate}, tooLong},
		{[]any{"RL.ALLOW", "k", "2", "1e-9"}, tooLong},
		{[]any{"RL.PEEK", "k", maxInt64, 1}, tooLong},

		// Rate: a finite decimal > 0 whose period fits.
		{[]any{"RL.ALLOW", "k", 1, "abc"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, ""}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, "1,5"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, "1.5x"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, " 1"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, "nan"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, "NaN"}, notFloat},
		{[]any{"RL.PEEK", "k", 1, "abc"}, notFloat},
		{[]any{"RL.ALLOW", "k", 1, "0"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "0.0"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "-0"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "-1"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "-0.001"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "inf"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "+Inf"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "-inf"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "Infinity"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "1e400"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "1e-400"}, badRate},
		{[]any{"RL.ALLOW", "k", 1, "1e-300"}, tooLong},
		{[]any{"RL.PEEK", "k", 1, "0"}, badRate},

		// Cost: an integer >= 0.
		{[]any{"RL.ALLOW", "k", 1, 1, "abc"}, notInt},
		{[]any{"RL.ALLOW", "k", 1, 1, "1.0"}, notInt},
		{[]any{"RL.ALLOW", "k", 1, 1, ""}, notInt},
		{[]any{"RL.ALLOW", "k", 1, 1, huge}, notInt},
		{[]any{"RL.ALLOW", "k", 1, 1, "-1"}, badCost},
		{[]any{"RL.ALLOW", "k", 1, 1, "-" + maxInt64}, badCost},
		{[]any{"RL.PEEK", "k", 1, 1, "-1"}, badCost},

		// Other commands' arguments.
		{[]any{"SELECT", "1"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "-1"}, "ERR DB index is out of range"},
		{[]any{"SELECT", "x"}, notInt},
		{[]any{"FLUSHALL", "x"}, syntax},
		{[]any{"FLUSHALL", "SYNC", "ASYNC"}, syntax},
	}
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		for _, tc := range cases {
			wantErr(t, c, tc.want, tc.args...)
		}
		// None of them touched the keyspace.
		wantInt(t, c, 0, "DBSIZE")
	}

	// The limits themselves are accepted.
	c := newGoRedis(t, s, nil)
	wantDecision(t, c, decision{1, 999999, exactly(0), exactly(periodMs)}, "RL.ALLOW", "big", "1000000", slowRate)
	wantDecision(t, c, decision{1, 0, exactly(0), exactly(1_000_000_000_000)}, "RL.ALLOW", "slowest", 1, "1e-9")
	wantDecision(t, c, decision{1, 0, exactly(0), exactly(1)}, "RL.ALLOW", "fastest", 1, "1e300")
	wantDecision(t, c, decision{0, 1, exactly(-1), exactly(0)}, "RL.ALLOW", "maxcost", 1, 1, maxInt64)
	wantDecision(t, c, decision{1, 0, exactly(0), exactly(1000)}, "RL.ALLOW", "hex", 1, "0x1p0")
}

func TestUnknownCommand(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	a50 := strings.Repeat("a", 50)
	cases := []struct {
		args []any
		want string
	}{
		{[]any{"x", "a"}, "ERR unknown command 'x', with args beginning with: 'a' "},
		{[]any{"FOO"}, "ERR unknown command 'FOO', with args beginning with: "},
		{[]any{"Foo", "a", "b c", ""}, "ERR unknown command 'Foo', with args beginning with: 'a' 'b c' '' "},
		{[]any{"RL.ALLOWX", "k", 1, 1}, "ERR unknown command 'RL.ALLOWX', with args beginning with: 'k' '1' '1' "},
		{[]any{"XADD", "k"}, "ERR unknown command 'XADD', with args beginning with: 'k' "},
		// Redis's limits: the name up to 128 bytes, the argument list up to
		// about 128 bytes, newlines as spaces.
		{[]any{"x", a50, a50, a50, a50}, "ERR unknown command 'x', with args beginning with: '" + a50 + "' '" + a50 + "' '" + strings.Repeat("a", 22) + "' "},
		{[]any{strings.Repeat("Y", 200), "b"}, "ERR unknown command '" + strings.Repeat("Y", 128) + "', with args beginning with: 'b' "},
		{[]any{"x\ny", "a\rb", "c\td"}, "ERR unknown command 'x y', with args beginning with: 'a b' 'c\td' "},
	}
	for _, tc := range cases {
		wantErr(t, c, tc.want, tc.args...)
	}
	// The connection is still fine.
	wantReply(t, c, "PONG", "PING")
}

func TestCommandNamesAreCaseInsensitive(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	n := int64(0)
	for _, name := range []string{"RL.ALLOW", "rl.allow", "Rl.AlLoW", "rL.aLLOW"} {
		n++
		wantDecision(t, c, allowedAt(10, n), name, "k", 10, slowRate)
	}
	for _, name := range []string{"RL.PEEK", "rl.peek", "Rl.Peek"} {
		wantDecision(t, c, allowedAt(10, n+1), name, "k", 10, slowRate)
	}
	for _, name := range []string{"PING", "ping", "PiNg"} {
		wantReply(t, c, "PONG", name)
	}
	for _, name := range []string{"exists", "EXISTS", "eXiStS"} {
		wantInt(t, c, 1, name, "k")
	}
	wantReply(t, c, "rl-gcra", "type", "k")
	wantReply(t, c, "OK", "client", "setname", "n1")
	wantReply(t, c, "n1", "CLIENT", "GETNAME")
	wantReply(t, c, "OK", "Client", "SetName", "n2")
	wantReply(t, c, "n2", "client", "getname")
	wantReply(t, c, int64(1), "rl.reset", "k")
	wantReply(t, c, "OK", "flushall", "Async")
	wantErr(t, c, "ERR wrong number of arguments for 'rl.allow' command", "rL.AlLoW", "k")
}

func TestInlineCommands(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	rc.do("PING\r\n", "+PONG\r\n")
	rc.do("PING\n", "+PONG\r\n")
	rc.do("ping hello\r\n", "$5\r\nhello\r\n")
	rc.do("RL.ALLOW inl 3 0.001\r\n", "*4\r\n:1\r\n:2\r\n:0\r\n:1000000\r\n")
	rc.do("rl.allow inl2 3 0.001 2\r\n", "*4\r\n:1\r\n:1\r\n:0\r\n:2000000\r\n")
	rc.do("RL.ALLOW never 3 0.001 4\r\n", "*4\r\n:0\r\n:3\r\n:-1\r\n:0\r\n")
	rc.do("EXISTS inl inl never\r\n", ":2\r\n")
	rc.do("TYPE inl\r\n", "+rl-gcra\r\n")
	rc.do("ECHO \"hello world\"\r\n", "$11\r\nhello world\r\n")
	rc.do("RL.ALLOW inl 3\r\n", "-ERR wrong number of arguments for 'rl.allow' command\r\n")
	rc.do("RL.ALLOW inl x 1\r\n", "-ERR value is not an integer or out of range\r\n")
	rc.do("NOSUCH a b\r\n", "-ERR unknown command 'NOSUCH', with args beginning with: 'a' 'b' \r\n")
	// Empty lines are skipped; inline and multibulk mix in one write, and
	// the replies come back in order.
	rc.do("\r\n\r\nPING\r\n*2\r\n$6\r\nEXISTS\r\n$3\r\ninl\r\nDBSIZE\r\n  PING  \r\n",
		"+PONG\r\n:1\r\n:2\r\n+PONG\r\n")
	rc.do("DEL inl inl2\r\nDBSIZE\r\nQUIT\r\n", ":2\r\n:0\r\n+OK\r\n")
	rc.expectEOF()
}
