package clienttest

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// Hostile input against one real server process: every row of the
// catalogue sends bytes on a fresh connection and asserts the exact reply
// and whether the server keeps the connection open; a control connection
// opened first is served after every row. Then a client pipelines a
// million commands and never reads. At the end the server's memory is back
// near where it started and it answers PING at once.

// badRow is one entry of the catalogue.
type badRow struct {
	name string
	send string // bytes written on a fresh connection
	want string // every byte the server answers
	open bool   // the connection stays open (checked with a PING), else it is closed
}

// badEnc encodes a command as a RESP multibulk.
func badEnc(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// badRSS is the process's resident memory in bytes (VmRSS).
func badRSS(t testing.TB, pid int) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("reading the server's memory: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(rest), "kB")), 10, 64)
			if err != nil {
				t.Fatalf("VmRSS line %q: %v", line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", pid)
	return 0
}

const (
	badArity    = "-ERR wrong number of arguments for '%s' command\r\n"
	badSyntax   = "-ERR syntax error\r\n"
	badNotInt   = "-ERR value is not an integer or out of range\r\n"
	badNotFloat = "-ERR value is not a valid float\r\n"
	badCap      = "-ERR capacity must be an integer >= 1\r\n"
	badRate     = "-ERR rate must be a finite number > 0\r\n"
	badCost     = "-ERR cost must be an integer >= 0\r\n"
	badTooLong  = "-ERR capacity/rate too large: a full refill would take longer than 2^60 ns (about 36 years)\r\n"
	badWindow   = "-ERR window must be an integer >= 1 (milliseconds)\r\n"
	badWinLong  = "-ERR window is above the maximum of 2^60 ns (about 36 years)\r\n"
	badLimit    = "-ERR limit must be an integer >= 1\r\n"
	badBulk     = "-ERR Protocol error: invalid bulk length\r\n"
	badMulti    = "-ERR Protocol error: invalid multibulk length\r\n"
	badInline   = "-ERR Protocol error: too big inline request\r\n"
	badFresh    = "*4\r\n:1\r\n:9\r\n:0\r\n:1000000\r\n" // RL.ALLOW <new key> 10 0.001
	badMaxInt   = "9223372036854775807"
	badOverInt  = "9223372036854775808"
	badKeyLimit = 16 << 10 // --max-key-len's default
)

// badCatalogue is every row, in order. Rows that create keys use distinct
// ones, so the replies do not depend on each other.
func badCatalogue() []badRow {
	arity := func(name string, args ...string) badRow {
		return badRow{"arity " + strings.Join(args, " "), badEnc(args...), fmt.Sprintf(badArity, name), true}
	}
	e := func(name, want string, args ...string) badRow {
		return badRow{name, badEnc(args...), want, true}
	}
	rows := []badRow{
		// Wrong arity.
		arity("rl.allow", "RL.ALLOW"),
		arity("rl.allow", "RL.ALLOW", "k", "10"),
		arity("rl.peek", "RL.PEEK", "k", "10"),
		arity("cl.throttle", "CL.THROTTLE", "k", "1", "1"),
		arity("gcra", "GCRA", "k", "1", "1"),
		arity("gcra", "GCRA", "k", "1", "1", "1", "TOKENS", "1", "x"),
		arity("rl.fixed", "RL.FIXED", "k", "1"),
		arity("rl.sliding", "RL.SLIDING", "k", "1"),
		arity("rl.log", "RL.LOG", "k", "1"),
		arity("rl.shape", "RL.SHAPE", "k", "1"),
		arity("rl.reset", "RL.RESET"),
		arity("del", "DEL"),
		arity("exists", "EXISTS"),
		arity("pttl", "PTTL", "a", "b"),
		arity("echo", "ECHO"),
		arity("ping", "PING", "a", "b"),
		e("extra argument", badSyntax, "RL.ALLOW", "k", "10", "1", "1", "x"),
		e("extra window argument", badSyntax, "RL.FIXED", "k", "10", "1000", "1", "x"),
		e("GCRA unknown option", badSyntax, "GCRA", "k", "1", "1", "1", "FOO", "1"),
		e("GCRA TOKENS without value", "-ERR Missing TOKENS value\r\n", "GCRA", "k", "1", "1", "1", "TOKENS"),

		// Non-numbers.
		e("capacity abc", badNotInt, "RL.ALLOW", "k", "abc", "1"),
		e("capacity 1.5", badNotInt, "RL.ALLOW", "k", "1.5", "1"),
		e("capacity empty", badNotInt, "RL.ALLOW", "k", "", "1"),
		e("capacity +5", badNotInt, "RL.ALLOW", "k", "+5", "1"),
		e("rate abc", badNotFloat, "RL.ALLOW", "k", "10", "abc"),
		e("rate 1,5", badNotFloat, "RL.ALLOW", "k", "10", "1,5"),
		e("cost abc", badNotInt, "RL.ALLOW", "k", "10", "1", "abc"),
		e("window abc", badNotInt, "RL.FIXED", "k", "10", "abc"),
		e("limit abc", badNotInt, "RL.SLIDING", "k", "abc", "1000"),
		e("burst x", badNotInt, "CL.THROTTLE", "k", "x", "1", "1"),
		e("GCRA period abc", badNotFloat, "GCRA", "k", "1", "1", "abc"),

		// Capacity: zero, negative, NaN, infinities, overflow.
		e("capacity 0", badCap, "RL.ALLOW", "k", "0", "1"),
		e("capacity -1", badCap, "RL.ALLOW", "k", "-1", "1"),
		e("capacity nan", badNotInt, "RL.ALLOW", "k", "nan", "1"),
		e("capacity inf", badNotInt, "RL.ALLOW", "k", "inf", "1"),
		e("capacity -inf", badNotInt, "RL.ALLOW", "k", "-inf", "1"),
		e("capacity 2^63", badNotInt, "RL.ALLOW", "k", badOverInt, "1"),
		e("capacity 10^20", badNotInt, "RL.ALLOW", "k", "99999999999999999999", "1"),
		e("capacity 2^63-1", badTooLong, "RL.ALLOW", "k", badMaxInt, "1"),
		e("shape capacity 0", badCap, "RL.SHAPE", "k", "0", "1"),

		// Rate.
		e("rate 0", badRate, "RL.ALLOW", "k", "10", "0"),
		e("rate -1", badRate, "RL.ALLOW", "k", "10", "-1"),
		e("rate -0", badRate, "RL.ALLOW", "k", "10", "-0"),
		e("rate nan", badNotFloat, "RL.ALLOW", "k", "10", "nan"),
		e("rate NaN", badNotFloat, "RL.ALLOW", "k", "10", "NaN"),
		e("rate inf", badRate, "RL.ALLOW", "k", "10", "inf"),
		e("rate -inf", badRate, "RL.ALLOW", "k", "10", "-inf"),
		e("rate 1e400", badRate, "RL.ALLOW", "k", "10", "1e400"),
		e("rate 1e-400", badRate, "RL.ALLOW", "k", "10", "1e-400"),
		e("rate 1e-300", badTooLong, "RL.ALLOW", "k", "10", "1e-300"),
		e("shape rate nan", badNotFloat, "RL.SHAPE", "k", "10", "nan"),
		e("throttle count 0", "-ERR zero rates are not supported\r\n", "CL.THROTTLE", "k", "1", "0", "1"),
		e("throttle period -1", badRate, "CL.THROTTLE", "k", "1", "1", "-1"),
		e("throttle period 2^63-1", badTooLong, "CL.THROTTLE", "k", "1", "1", badMaxInt),
		e("throttle burst -1", "-ERR value is out of range, must be positive\r\n", "CL.THROTTLE", "k", "-1", "1", "1"),
		e("GCRA count 0", "-ERR value is out of range, value must between 1 and 9223372036854775807\r\n", "GCRA", "k", "1", "0", "1"),
		e("GCRA period 0", "-ERR period must be > 0 and < 1e12\r\n", "GCRA", "k", "1", "1", "0"),
		e("GCRA period inf", "-ERR period must be > 0 and < 1e12\r\n", "GCRA", "k", "1", "1", "inf"),
		e("GCRA period nan", badNotFloat, "GCRA", "k", "1", "1", "nan"),

		// Cost.
		e("cost 0 is a peek", "*4\r\n:1\r\n:10\r\n:0\r\n:0\r\n", "RL.ALLOW", "cost0", "10", "0.001", "0"),
		e("cost -1", badCost, "RL.ALLOW", "k", "10", "1", "-1"),
		e("cost nan", badNotInt, "RL.ALLOW", "k", "10", "1", "nan"),
		e("cost inf", badNotInt, "RL.ALLOW", "k", "10", "1", "inf"),
		e("cost 2^63", badNotInt, "RL.ALLOW", "k", "10", "1", badOverInt),
		e("cost far above capacity", "*4\r\n:0\r\n:10\r\n:-1\r\n:0\r\n", "RL.ALLOW", "costbig", "10", "0.001", "1000000"),
		e("cost 2^63-1", "*4\r\n:0\r\n:10\r\n:-1\r\n:0\r\n", "RL.ALLOW", "costmax", "10", "0.001", badMaxInt),
		e("window cost above limit", "*4\r\n:0\r\n:10\r\n:-1\r\n:0\r\n", "RL.FIXED", "costfix", "10", "1000", "11"),
		e("throttle quantity -1", badCost, "CL.THROTTLE", "k", "1", "1", "1", "-1"),
		e("GCRA tokens 0", "-ERR value is out of range, value must between 1 and 9223372036854775807\r\n", "GCRA", "k", "1", "1", "1", "TOKENS", "0"),

		// Window and limit.
		e("window 0", badWindow, "RL.FIXED", "k", "10", "0"),
		e("window -1", badWindow, "RL.SLIDING", "k", "10", "-1"),
		e("window nan", badNotInt, "RL.LOG", "k", "10", "nan"),
		e("window inf", badNotInt, "RL.FIXED", "k", "10", "inf"),
		e("window above 2^60 ns", badWinLong, "RL.FIXED", "k", "10", "1152921504607"),
		e("window 2^63-1", badWinLong, "RL.SLIDING", "k", "10", badMaxInt),
		e("window 2^63", badNotInt, "RL.LOG", "k", "10", badOverInt),
		e("limit 0", badLimit, "RL.FIXED", "k", "0", "1000"),
		e("limit -1", badLimit, "RL.SLIDING", "k", "-1", "1000"),
		e("limit above 2^60", "-ERR limit is above the maximum of 2^60\r\n", "RL.FIXED", "k", "1152921504606846977", "1000"),
		e("log limit above 100000", "-ERR limit is above RL.LOG's maximum of 100000 entries per key\r\n", "RL.LOG", "k", "100001", "1000"),

		// Keys: empty, binary (they work, and are not confused with one
		// another), over-long.
		{"empty key", badEnc("RL.ALLOW", "", "10", "0.001") + badEnc("EXISTS", "") + badEnc("TYPE", "") + badEnc("DEL", "") + badEnc("EXISTS", ""),
			badFresh + ":1\r\n+rl-gcra\r\n:1\r\n:0\r\n", true},
		{"keys with NUL, CR, LF and 0xFF",
			badEnc("RL.ALLOW", "a\x00b", "10", "0.001") + badEnc("EXISTS", "a") + badEnc("EXISTS", "a\x00") +
				badEnc("RL.ALLOW", "a\r\nb", "10", "0.001") + badEnc("RL.ALLOW", "\r", "10", "0.001") + badEnc("RL.ALLOW", "\n", "10", "0.001") +
				badEnc("RL.ALLOW", "\xff\xfe\x00", "10", "0.001") + badEnc("EXISTS", "a\x00b", "a\r\nb", "\r", "\n", "\xff\xfe\x00", "\xff") +
				badEnc("TYPE", "\xff\xfe\x00") + badEnc("RL.ALLOW", "a", "10", "0.001"),
			badFresh + ":0\r\n:0\r\n" + badFresh + badFresh + badFresh + badFresh + ":5\r\n+rl-gcra\r\n" + badFresh, true},
		{"key at the length limit", badEnc("RL.ALLOW", strings.Repeat("k", badKeyLimit), "10", "0.001"), badFresh, true},
		{"key over the length limit", badEnc("RL.ALLOW", strings.Repeat("k", badKeyLimit+1), "10", "0.001") + badEnc("DEL", "x", strings.Repeat("k", badKeyLimit+1)),
			strings.Repeat(fmt.Sprintf("-ERR key is too long: %d bytes, the limit is %d (max-key-len)\r\n", badKeyLimit+1, badKeyLimit), 2), true},
	}

	// Framing: argument counts, bulk lengths, negative lengths.
	// (100,000 arguments are within the default max-args, 1,048,576:
	// TestManyArgs runs them.)
	rows = append(rows,
		badRow{"1,048,577 arguments", "*1048577\r\n", badMulti, false},
		badRow{"bulk length 2^40", "*1\r\n$1099511627776\r\n", badBulk, false},
		badRow{"bulk length 2^63-1", "*1\r\n$9223372036854775807\r\n", badBulk, false},
		badRow{"bulk length 2^63", "*1\r\n$9223372036854775808\r\n", badBulk, false},
		badRow{"bulk length above 8 MiB", "*2\r\n$4\r\nECHO\r\n$8388609\r\n", badBulk, false},
		badRow{"count 2^63-1", "*9223372036854775807\r\n", badMulti, false},
		badRow{"bulk length -1", "*1\r\n$-1\r\n", badBulk, false},
		badRow{"bulk length -5 after a good argument", "*2\r\n$4\r\nECHO\r\n$-5\r\n", badBulk, false},
		badRow{"count -1 is an empty frame", "*-1\r\n*0\r\nPING\r\n", "+PONG\r\n", true},
		badRow{"count -2^63 is an empty frame", "*-9223372036854775808\r\nPING\r\n", "+PONG\r\n", true},
		badRow{"count below -2^63", "*-9223372036854775809\r\n", badMulti, false},
		badRow{"commands before a bad frame are answered", "PING\r\n" + badEnc("ECHO", "x") + "*1\r\n$-1\r\n", "+PONG\r\n$1\r\nx\r\n" + badBulk, false},
		badRow{"body longer than its length", "*1\r\n$1\r\nab\r\n", badBulk, false},
		badRow{"not a bulk", "*1\r\nx", "-ERR Protocol error: expected '$', got 'x'\r\n", false},
		badRow{"CR instead of a bulk", "*1\r\n\r\n", "-ERR Protocol error: expected '$', got ' '\r\n", false},
		badRow{"unbalanced quotes", "ECHO \"abc\r\n", "-ERR Protocol error: unbalanced quotes in request\r\n", false},
	)

	// Random binary garbage, from a fixed seed so every run sends the same
	// bytes: lines without separators or quotes (each an unknown command,
	// answered with its name as Redis quotes it), a line over the inline
	// limit, and a multibulk header of garbage.
	r := rand.New(rand.NewPCG(7, 7))
	garbage := func(n int, skip string) []byte {
		b := make([]byte, 0, n)
		for len(b) < n {
			if c := byte(r.Uint32()); !strings.ContainsRune(skip, rune(c)) && (len(b) > 0 || c != '*') {
				b = append(b, c)
			}
		}
		return b
	}
	var lines, replies strings.Builder
	for range 20 {
		l := garbage(1+r.IntN(100), "\x00\r\n\t \"'")
		lines.Write(l)
		lines.WriteString("\r\n")
		replies.WriteString("-ERR unknown command '" + string(l) + "', with args beginning with: \r\n")
	}
	head := garbage(1, "0123456789-\r\n")
	rows = append(rows,
		badRow{"random binary lines", lines.String(), replies.String(), true},
		badRow{"random binary over the inline limit", string(garbage(70<<10, "\n")), badInline, false},
		badRow{"random multibulk header", "*" + string(head) + string(garbage(100, "")), badMulti, false},
	)
	return rows
}

// badRun sends a row on a fresh connection and checks the reply and the
// connection's state.
func badRun(t *testing.T, s *server, row badRow) {
	t.Helper()
	c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
	if err != nil {
		t.Fatalf("%s: dial: %v", row.name, err)
	}
	defer c.Close()
	// The server may close before reading everything: write errors are
	// expected, and a long write must not hold up the read.
	werr := make(chan error, 1)
	go func() {
		c.SetWriteDeadline(time.Now().Add(ioTimeout))
		_, err := io.WriteString(c, row.send)
		werr <- err
	}()
	r := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(ioTimeout))
	got := make([]byte, len(row.want))
	if n, err := io.ReadFull(r, got); err != nil || string(got) != row.want {
		t.Errorf("%s: read %q (%v), want %q", row.name, badCut(got[:n]), err, badCut([]byte(row.want)))
		return
	}
	if row.open {
		if err := <-werr; err != nil {
			t.Errorf("%s: write: %v", row.name, err)
			return
		}
		io.WriteString(c, "PING\r\n")
		line, err := r.ReadString('\n')
		if line != "+PONG\r\n" {
			t.Errorf("%s: connection not usable after the reply: %q, %v", row.name, line, err)
		}
		return
	}
	b, err := r.ReadByte()
	switch {
	case err == nil:
		rest, _ := r.Peek(r.Buffered())
		t.Errorf("%s: read %q more, want the connection closed", row.name, badCut(append([]byte{b}, rest...)))
	case !errors.Is(err, io.EOF) && !errors.Is(err, syscall.ECONNRESET):
		t.Errorf("%s: %v, want the connection closed", row.name, err)
	}
}

func badCut(b []byte) []byte {
	if len(b) > 200 {
		return append(b[:200:200], "..."...)
	}
	return b
}

func TestBadInputCatalogue(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--partial-command-timeout", "500ms"}})
	pid := badPID(s)
	control := s.raw(t)
	control.do(badEnc("RL.ALLOW", "control", "10", "0.001"), badFresh)
	baseline := badRSS(t, pid)

	for _, row := range badCatalogue() {
		badRun(t, s, row)
		control.do("PING\r\n", "+PONG\r\n")
	}

	// An unterminated frame: nothing is answered, and the connection is
	// closed once --partial-command-timeout has passed.
	u := s.raw(t)
	u.send("*2\r\n$4\r\nECHO\r\n$5\r\nhel")
	sent := time.Now()
	u.expectEOF()
	if d := time.Since(sent); d < 400*time.Millisecond || d > 10*time.Second {
		t.Errorf("unterminated frame: closed after %v, want about 500ms", d)
	}
	control.do("PING\r\n", "+PONG\r\n")

	badNeverReads(t, s, control, baseline)

	// Nothing left behind: the keys the rows created are the only state,
	// memory is back near where it started, PING is answered at once.
	// Refused and denied calls created nothing.
	control.do(badEnc("EXISTS", "control", "cost0", "costbig", "costmax", "costfix", "k"), ":1\r\n")
	slack := int64(32 << 20)
	if raceEnabled {
		slack *= 2 // the race detector's shadow memory
	}
	deadline := time.Now().Add(20 * time.Second)
	rss := badRSS(t, pid)
	for rss > baseline+slack && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
		rss = badRSS(t, pid)
	}
	t.Logf("server RSS: %.1f MiB at the start, %.1f MiB after the catalogue", float64(baseline)/(1<<20), float64(rss)/(1<<20))
	if rss > baseline+slack {
		t.Errorf("server RSS %.1f MiB after the catalogue, %.1f MiB at the start", float64(rss)/(1<<20), float64(baseline)/(1<<20))
	}
	start := time.Now()
	control.do("PING\r\n", "+PONG\r\n")
	if d := time.Since(start); d > time.Second {
		t.Errorf("PING after the catalogue took %v", d)
	}
}

// badNeverReads: a client pipelines a million RL.ALLOW commands and never
// reads a reply. The server stops reading from it once its replies fill
// the socket (it may also close it); either way its memory stays bounded,
// and other clients are served meanwhile.
func badNeverReads(t *testing.T, s *server, control *rawConn, baseline int64) {
	t.Helper()
	const total = 1_000_000
	cmd := badEnc("RL.ALLOW", "hog", "1000000", "1000")
	chunk := []byte(strings.Repeat(cmd, 10_000))
	hog, err := net.DialTimeout("tcp", s.addr, ioTimeout)
	if err != nil {
		t.Fatal(err)
	}
	var written atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 0; n < total; n += 10_000 {
			k, err := hog.Write(chunk)
			written.Add(int64(k))
			if err != nil {
				return // closed by the server, or by the test
			}
		}
	}()
	// Wait until everything is written or the writes stall (the server
	// has stopped reading), whichever comes first.
	last, still := int64(-1), 0
	for written.Load() < int64(total*len(cmd)) && still < 10 {
		time.Sleep(100 * time.Millisecond)
		if w := written.Load(); w == last {
			still++
		} else {
			last, still = w, 0
		}
	}
	rss := badRSS(t, badPID(s))
	t.Logf("client that never reads: %d of %d commands written; server RSS %.1f MiB (%.1f MiB at the start)",
		written.Load()/int64(len(cmd)), total, float64(rss)/(1<<20), float64(baseline)/(1<<20))
	if rss > baseline+128<<20 {
		t.Errorf("server RSS grew from %.1f to %.1f MiB for one client that never reads", float64(baseline)/(1<<20), float64(rss)/(1<<20))
	}
	// Others are served meanwhile.
	start := time.Now()
	control.do(badEnc("RL.ALLOW", "other", "10", "0.001"), badFresh)
	if d := time.Since(start); d > time.Second {
		t.Errorf("another client waited %v while one never reads", d)
	}
	hog.Close()
	wg.Wait()
	// The hog's decisions were applied as far as it got.
	control.do(badEnc("EXISTS", "hog"), ":1\r\n")
}

func badPID(s *server) int { return s.cmd.Process.Pid }

// TestMaxClients: with --maxclients 3, the fourth connection gets Redis's
// error and is closed; once a client leaves, a new one is served.
func TestMaxClients(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--maxclients", "3"}})
	// The start-up probe's connection may still hold a slot for a moment:
	// wait until this connection is the only one.
	first := s.raw(t)
	if !pollFor(10*time.Second, func() bool {
		first.send("INFO clients\r\n")
		return strings.Contains(first.read().str, "connected_clients:1\r\n")
	}) {
		t.Fatal("the start-up probe's connection never went away")
	}
	conns := []*rawConn{first}
	for range 2 {
		c := s.raw(t)
		c.do("PING\r\n", "+PONG\r\n")
		conns = append(conns, c)
	}
	extra := s.raw(t)
	extra.expect("-ERR max number of clients reached\r\n")
	extra.expectEOF()
	// The refused connection took no slot: the three are still served.
	for _, c := range conns {
		c.do("PING\r\n", "+PONG\r\n")
	}
	// A slot frees when a client leaves (the server notices the close
	// asynchronously: poll).
	conns[0].c.Close()
	if !pollFor(10*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(ioTimeout))
		io.WriteString(c, "PING\r\n")
		line, _ := bufio.NewReader(c).ReadString('\n')
		return line == "+PONG\r\n"
	}) {
		t.Fatal("no connection served after a client left")
	}
}

// TestIdleConnectionsMemory holds 10,000 idle connections (each has sent
// one PING and read the answer) against a real process and reports the
// resident memory they cost. Each connection has a 16 KiB read buffer, a
// goroutine and its client state; the bound asserted is generous.
func TestIdleConnectionsMemory(t *testing.T) {
	const n = 10_000
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	if lim.Cur < 2*n {
		lim.Cur = min(lim.Max, 2*n+1000)
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil || lim.Cur < n+500 {
			t.Fatalf("file limit %d (hard %d) is too low for %d connections: %v", lim.Cur, lim.Max, n, err)
		}
	}
	s := start(t, opts{args: []string{"--maxclients", strconv.Itoa(n + 100)}})
	control := s.raw(t)
	control.do("PING\r\n", "+PONG\r\n")
	heap := func() int64 {
		control.send("INFO memory\r\n")
		v := control.read()
		for _, l := range strings.Split(v.str, "\r\n") {
			if x, ok := strings.CutPrefix(l, "used_memory:"); ok {
				n, _ := strconv.ParseInt(x, 10, 64)
				return n
			}
		}
		t.Fatalf("no used_memory in INFO memory: %q", v.str)
		return 0
	}
	before, heapBefore := badRSS(t, badPID(s)), heap()

	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	began := time.Now()
	for len(conns) < n {
		c, err := net.DialTimeout("tcp", s.addr, ioTimeout)
		if err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, "PING\r\n"); err != nil {
			t.Fatalf("connection %d: %v", len(conns), err)
		}
	}
	buf := make([]byte, 7)
	for i, c := range conns {
		c.SetReadDeadline(time.Now().Add(ioTimeout))
		if _, err := io.ReadFull(c, buf); err != nil || string(buf) != "+PONG\r\n" {
			t.Fatalf("connection %d: %q, %v", i, buf, err)
		}
	}
	opened := time.Since(began)
	// All served, all idle now: let the server settle, then measure.
	time.Sleep(200 * time.Millisecond)
	after, heapAfter := badRSS(t, badPID(s)), heap()
	perConn := float64(after-before) / n
	t.Logf("%d idle connections (opened and answered in %v): server RSS %.1f -> %.1f MiB, %.1f KiB per connection; Go heap %.1f -> %.1f MiB, %.1f KiB per connection (race detector: %v)",
		n, opened.Round(time.Millisecond), float64(before)/(1<<20), float64(after)/(1<<20), perConn/1024,
		float64(heapBefore)/(1<<20), float64(heapAfter)/(1<<20), float64(heapAfter-heapBefore)/n/1024, raceEnabled)
	limit := 64.0 * 1024
	if raceEnabled {
		limit *= 4 // the race detector's shadow memory and larger stacks
	}
	if perConn > limit {
		t.Errorf("%.1f KiB of RSS per idle connection, want under %.0f KiB", perConn/1024, limit/1024)
	}
	// Still serving.
	control.do("PING\r\n", "+PONG\r\n")
	if _, err := io.WriteString(conns[n-1], "PING\r\n"); err != nil {
		t.Fatal(err)
	}
	conns[n-1].SetReadDeadline(time.Now().Add(ioTimeout))
	if _, err := io.ReadFull(conns[n-1], buf); err != nil || string(buf) != "+PONG\r\n" {
		t.Fatalf("last connection: %q, %v", buf, err)
	}
}

// TestBugEmptyCommandNameCrashesServer pins a crash: a command that is a
// single empty argument (`*1\r\n$0\r\n\r\n`, or the inline line `""`,
// which redis-cli sends for `redis-cli ""`) made Server.handle index the
// empty argument's first byte while looking for the unbalanced-quotes
// marker, and the panic ended the process, before any authentication.
// Redis answers it as an unknown command and keeps the connection.
func TestBugEmptyCommandNameCrashesServer(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--requirepass", "pw"}, authPass: "pw"})
	for _, send := range []string{"*1\r\n$0\r\n\r\n", "\"\"\r\n", "''\r\n"} {
		c := s.raw(t)
		c.do(send, "-ERR unknown command '', with args beginning with: \r\n")
		c.do("PING\r\n", "-NOAUTH Authentication required.\r\n")
	}
}
