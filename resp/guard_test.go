package resp

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tidwall/redcon"
)

const (
	guardWantMultibulk = "-ERR Protocol error: invalid multibulk length\r\n"
	guardWantBulk      = "-ERR Protocol error: invalid bulk length\r\n"
	guardWantInline    = "-ERR Protocol error: too big inline request\r\n"
)

// guardTestLimits are small so every limit is easy to reach.
var guardTestLimits = GuardLimits{MaxBulkLen: 16, MaxArgs: 4, MaxInlineLen: 8}

// guardCase is one stream for the validator. For a bad stream, frame is the
// offset where the offending frame starts and at the offset of the byte that
// reveals the violation; for a good one, complete says the stream ends on a
// frame boundary.
type guardCase struct {
	name     string
	in       string
	err      string // wanted error line, "" for none
	frame    int
	at       int
	complete bool
}

var guardCases = []guardCase{
	{name: "one command", in: "*1\r\n$4\r\nPING\r\n", complete: true},
	{name: "limits exactly", in: "*4\r\n$0\r\n\r\n$16\r\n0123456789abcdef\r\n$1\r\na\r\n$10\r\n\r\n\r\n\r\n\r\n\r\n\r\n", complete: true},
	{name: "binary body", in: "*2\r\n$3\r\n*\r\n\r\n$4\r\n$$\n\r\r\n", complete: true},
	{name: "pipeline", in: "*1\r\n$1\r\na\r\n*2\r\n$1\r\nb\r\n$2\r\ncd\r\n", complete: true},
	{name: "zero count passes", in: "*0\r\n*1\r\n$1\r\na\r\n", complete: true},
	{name: "negative count passes", in: "*-1\r\n", complete: true},
	{name: "min int64 count passes", in: "*-9223372036854775808\r\n", complete: true},
	{name: "inline", in: "PING\r\nSET a b\n", complete: true},
	{name: "empty inline lines", in: "\r\n\n\n", complete: true},
	{name: "inline exactly the limit", in: "1234567\r\n12345678\n", complete: true},
	{name: "dollar starts an inline", in: "$5\r\n", complete: true},
	{name: "inline then multibulk", in: "PING\n*1\r\n$1\r\na\r\n", complete: true},
	{name: "incomplete header", in: "*1\r\n$1"},
	{name: "incomplete body", in: "*2\r\n$3\r\nab"},
	{name: "incomplete body end", in: "*1\r\n$3\r\nabc\r"},
	{name: "incomplete inline", in: "PING"},

	{name: "bulk max int64", in: "*1\r\n$9223372036854775807\r\n", err: guardWantBulk, at: 6},
	{name: "bulk 2^40", in: "*1\r\n$1099511627776\r\n", err: guardWantBulk, at: 7},
	{name: "bulk above limit", in: "*1\r\n$17\r\n", err: guardWantBulk, at: 6},
	{name: "bulk negative", in: "*1\r\n$-1\r\n", err: guardWantBulk, at: 5},
	{name: "bulk minus zero", in: "*1\r\n$-0\r\n", err: guardWantBulk, at: 5},
	{name: "bulk plus sign", in: "*1\r\n$+1\r\n", err: guardWantBulk, at: 5},
	{name: "bulk leading zero", in: "*1\r\n$01\r\n", err: guardWantBulk, at: 6},
	{name: "bulk 22 digits", in: "*1\r\n$0000000000000000000001\r\n", err: guardWantBulk, at: 6},
	{name: "bulk no digits", in: "*1\r\n$\r\n", err: guardWantBulk, at: 5},
	{name: "bulk letter", in: "*1\r\n$1x\r\n", err: guardWantBulk, at: 6},
	{name: "bulk header without CR", in: "*1\r\n$1\n", err: guardWantBulk, at: 6},
	{name: "bulk header CR CR", in: "*1\r\n$1\r\r\n", err: guardWantBulk, at: 7},
	{name: "bulk header CR digit", in: "*1\r\n$1\r1\r\n", err: guardWantBulk, at: 7},
	{name: "body too long", in: "*1\r\n$1\r\nab\r\n", err: guardWantBulk, at: 9},
	{name: "body end without LF", in: "*1\r\n$1\r\na\rx", err: guardWantBulk, at: 10},
	{name: "second body too long", in: "*2\r\n$1\r\na\r\n$1\r\nbc", err: guardWantBulk, at: 16},

	{name: "count above limit", in: "*5\r\n", err: guardWantMultibulk, at: 1},
	{name: "count 100000", in: "*100000\r\n", err: guardWantMultibulk, at: 2},
	{name: "count max int64", in: "*9223372036854775807\r\n", err: guardWantMultibulk, at: 1},
	{name: "count below min int64", in: "*-9223372036854775809\r\n", err: guardWantMultibulk, at: 20},
	{name: "count 21 digits negative", in: "*-10000000000000000000\r\n", err: guardWantMultibulk, at: 21},
	{name: "count minus zero", in: "*-0\r\n", err: guardWantMultibulk, at: 2},
	{name: "count plus sign", in: "*+1\r\n", err: guardWantMultibulk, at: 1},
	{name: "count leading zero", in: "*01\r\n", err: guardWantMultibulk, at: 2},
	{name: "count empty", in: "*\r\n", err: guardWantMultibulk, at: 1},
	{name: "count minus only", in: "*-\r\n", err: guardWantMultibulk, at: 2},
	{name: "count double minus", in: "*--1\r\n", err: guardWantMultibulk, at: 2},
	{name: "count letter", in: "*1x\r\n", err: guardWantMultibulk, at: 2},
	{name: "count without CR", in: "*1\n", err: guardWantMultibulk, at: 2},

	{name: "not a bulk", in: "*2\r\nx", err: "-ERR Protocol error: expected '$', got 'x'\r\n", at: 4},
	{name: "star instead of bulk", in: "*2\r\n$1\r\na\r\n*", err: "-ERR Protocol error: expected '$', got '*'\r\n", at: 11},
	{name: "CR instead of bulk", in: "*1\r\n\r\n", err: "-ERR Protocol error: expected '$', got ' '\r\n", at: 4},
	{name: "LF instead of bulk", in: "*1\r\n\n", err: "-ERR Protocol error: expected '$', got ' '\r\n", at: 4},

	{name: "inline one too long", in: "123456789", err: guardWantInline, at: 8},
	{name: "inline too long with LF", in: "123456789\n", err: guardWantInline, at: 8},
	{name: "inline CR counts", in: "12345678\r\n", err: guardWantInline, at: 8},

	{name: "after a command", in: "*1\r\n$4\r\nPING\r\n*1\r\n$-1\r\n", err: guardWantBulk, frame: 14, at: 19},
	{name: "after an inline", in: "PING\r\n*9\r\n", err: guardWantMultibulk, frame: 6, at: 7},
	{name: "inline after commands", in: "*1\r\n$4\r\nPING\r\nPING\n123456789", err: guardWantInline, frame: 19, at: 27},
	{name: "after zero count", in: "*0\r\n*1\r\nx", err: "-ERR Protocol error: expected '$', got 'x'\r\n", frame: 4, at: 8},
}

// guardRun feeds chunks to a fresh validator until a violation and returns
// the bytes it let through, the error line and whether it ended on a frame
// boundary.
func guardRun(lim GuardLimits, chunks [][]byte) (delivered int, line string, atFrame bool) {
	v := newGuardValidator(lim)
	for _, c := range chunks {
		n, bad := v.feed(c)
		delivered += n
		if bad != guardOK {
			return delivered, string(guardErrLine(bad, v.got)), false
		}
		if n != len(c) {
			panic("feed passed part of a chunk without a violation")
		}
	}
	return delivered, "", v.state == gsFrame
}

// guardReaderRun runs a Reader over chunks behind a GuardConn with lim
// (before AUTH if preAuth) and returns the commands it parsed, rendered,
// and what it wrote to the client. Before AUTH it checks that every batch
// holds one command.
func guardReaderRun(lim GuardLimits, preAuth bool, chunks [][]byte) ([]string, string) {
	fake := connFuzzSource(chunks)
	g := NewGuardConn(fake, lim)
	if preAuth {
		g.Restrict(lim)
	}
	rd := NewReader(g, 1<<20)
	var out []string
	for {
		cmds, err := rd.ReadCommands()
		if err != nil {
			return out, fake.wrote.String()
		}
		if preAuth && len(cmds) != 1 {
			panic(fmt.Sprintf("before AUTH: a batch of %d commands", len(cmds)))
		}
		for _, args := range cmds {
			out = append(out, connFuzzRender(args))
		}
	}
}

// guardSplits cuts in in one chunk, in one-byte chunks and in n random ways.
func guardSplits(in []byte, r *rand.Rand, n int) [][][]byte {
	splits := [][][]byte{{in}}
	var ones [][]byte
	for i := range in {
		ones = append(ones, in[i:i+1])
	}
	splits = append(splits, ones)
	for range n {
		var s [][]byte
		for rest := in; len(rest) > 0; {
			k := 1 + r.IntN(min(len(rest), 1+r.IntN(12)))
			s = append(s, rest[:k])
			rest = rest[k:]
		}
		splits = append(splits, s)
	}
	return splits
}

// guardChunkStart is the offset of the chunk that holds offset at.
func guardChunkStart(chunks [][]byte, at int) int {
	off := 0
	for _, c := range chunks {
		if at < off+len(c) {
			return off
		}
		off += len(c)
	}
	return off
}

func TestGuardValidator(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, tc := range guardCases {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			for _, chunks := range guardSplits(in, r, 50) {
				n, line, atFrame := guardRun(guardTestLimits, chunks)
				if line != tc.err {
					t.Fatalf("%d chunks: error %q, want %q", len(chunks), line, tc.err)
				}
				// The Reader agrees: the commands of the frames before
				// the offending one, then the same error line.
				cmds, wrote := guardReaderRun(guardTestLimits, false, chunks)
				prefix := in
				if tc.err != "" {
					prefix = in[:tc.frame]
				}
				wantCmds, _ := guardReaderRun(guardTestLimits, false, [][]byte{prefix})
				if wrote != tc.err || !slices.Equal(cmds, wantCmds) {
					t.Fatalf("reader, %d chunks: %q, wrote %q; want %q, %q", len(chunks), cmds, wrote, wantCmds, tc.err)
				}
				if tc.err == "" {
					if n != len(in) || atFrame != tc.complete {
						t.Fatalf("%d chunks: passed %d of %d bytes, at frame start %v, want %v",
							len(chunks), n, len(in), atFrame, tc.complete)
					}
					continue
				}
				// The bytes before the offending frame pass, and so do the
				// chunks before the one where the violation shows.
				if want := max(tc.frame, guardChunkStart(chunks, tc.at)); n != want {
					t.Fatalf("%d chunks %q: passed %d bytes, want %d", len(chunks), chunks, n, want)
				}
			}
			// The Reader finds the violation at the byte that shows it.
			if tc.err != "" {
				if _, wrote := guardReaderRun(guardTestLimits, false, [][]byte{in[:tc.at+1]}); wrote != tc.err {
					t.Fatalf("reader, %q: wrote %q, want %q", in[:tc.at+1], wrote, tc.err)
				}
				if _, wrote := guardReaderRun(guardTestLimits, false, [][]byte{in[:tc.at]}); wrote != "" {
					t.Fatalf("reader, %q: wrote %q, want nothing yet", in[:tc.at], wrote)
				}
			}
		})
	}
}

func TestGuardLimitsNormalized(t *testing.T) {
	if got, want := (GuardLimits{}).Normalized(), DefaultGuardLimits(); got != want {
		t.Errorf("zero limits: %+v, want %+v", got, want)
	}
	huge := GuardLimits{MaxBulkLen: 1 << 62, MaxArgs: 1 << 62, MaxInlineLen: 7, MaxQueryBuffer: 1 << 62}
	if got, want := huge.Normalized(), (GuardLimits{MaxBulkLen: 1 << 40, MaxArgs: 1 << 40, MaxInlineLen: 7, MaxQueryBuffer: 1 << 40}); got != want {
		t.Errorf("huge limits: %+v, want %+v", got, want)
	}
	for _, in := range []string{"*1\r\n$1099511627777\r\n", "*1099511627777\r\n"} {
		if _, line, _ := guardRun(huge, [][]byte{[]byte(in)}); line == "" {
			t.Errorf("%q passed with limits %+v", in, huge)
		}
	}
}

// FuzzGuard checks that the verdict does not depend on how the stream is
// split, and that nothing the guard lets through makes redcon panic.
func FuzzGuard(f *testing.F) {
	for _, tc := range guardCases {
		f.Add([]byte(tc.in), uint64(len(tc.in)))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		splits := guardSplits(in, rand.New(rand.NewPCG(seed, 3)), 8)
		// One chunk passes exactly the bytes before the offending frame;
		// one-byte chunks pass exactly the bytes before the violation.
		frame, line, _ := guardRun(guardTestLimits, splits[0])
		at, lineBytes, _ := guardRun(guardTestLimits, splits[1])
		if line != lineBytes {
			t.Fatalf("one chunk: %q, byte by byte: %q", line, lineBytes)
		}
		for _, chunks := range splits[2:] {
			n, l, _ := guardRun(guardTestLimits, chunks)
			want := len(in)
			if line != "" {
				want = max(frame, guardChunkStart(chunks, at))
			}
			if l != line || n != want {
				t.Fatalf("split %q: %d bytes, %q; want %d bytes, %q", chunks, n, l, want, line)
			}
		}
		rd := redcon.NewReader(bytes.NewReader(in[:frame]))
		for {
			if _, err := rd.ReadCommands(); err != nil {
				break
			}
		}
	})
}

// guardFakeConn is a net.Conn whose reads are scripted.
type guardFakeConn struct {
	net.Conn
	reads []string
	wrote bytes.Buffer
}

func (c *guardFakeConn) Read(p []byte) (int, error) {
	if len(c.reads) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.reads[0])
	c.reads = c.reads[1:]
	return n, nil
}

func (c *guardFakeConn) Write(p []byte) (int, error) { return c.wrote.Write(p) }

// TestGuardReaderStops: the commands before a bad frame are returned
// (empty reads skipped), then the error line is written once and every
// later call reports io.EOF.
func TestGuardReaderStops(t *testing.T) {
	fake := &guardFakeConn{reads: []string{
		"", "*1\r\n$1\r\na\r\n*1", "", "", "\r\n$1\r\nb\r\n*1\r\n$x", "\r\n",
	}}
	rd := NewReader(NewGuardConn(fake, guardTestLimits), 1<<20)
	want := []struct {
		cmd string
		err error
	}{
		{`"a"`, nil},
		{`"b"`, nil}, // only the frames before the bad one
		{"", io.EOF},
		{"", io.EOF},
	}
	for i, w := range want {
		cmds, err := rd.ReadCommands()
		got := ""
		if len(cmds) > 0 {
			got = connFuzzRender(cmds[0])
		}
		if len(cmds) > 1 || got != w.cmd || err != w.err {
			t.Fatalf("read %d: %d commands (%s), %v; want %s, %v", i, len(cmds), got, err, w.cmd, w.err)
		}
	}
	if got := fake.wrote.String(); got != guardWantBulk {
		t.Errorf("wrote %q, want %q once", got, guardWantBulk)
	}

	// A violation in a frame begun in an earlier read is reported at once.
	fake = &guardFakeConn{reads: []string{"*1\r\n", "$-1\r\n"}}
	rd = NewReader(NewGuardConn(fake, guardTestLimits), 1<<20)
	if cmds, err := rd.ReadCommands(); len(cmds) != 0 || err != io.EOF {
		t.Fatalf("read: %d commands, %v; want none, EOF", len(cmds), err)
	}
	if got := fake.wrote.String(); got != guardWantBulk {
		t.Errorf("wrote %q, want %q", got, guardWantBulk)
	}
}

// startGuardServer serves Reader and Writer behind GuardListener on a
// loopback port. It answers each command with its first argument as a
// bulk string.
func startGuardServer(t *testing.T, lim GuardLimits) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gl := GuardListener(ln, lim)
	go func() {
		for {
			nc, err := gl.Accept()
			if err != nil {
				return
			}
			go func() {
				defer nc.Close()
				rd, w := NewReader(nc, int(lim.Normalized().MaxQueryBuffer)), NewWriter(nc)
				for {
					cmds, err := rd.ReadCommands()
					if err != nil {
						return
					}
					for _, args := range cmds {
						w.WriteBulk(args[0])
					}
					if w.Flush() != nil {
						return
					}
				}
			}()
		}
	}()
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

func guardDial(t *testing.T, addr string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	if err := c.SetDeadline(time.Now().Add(30 * time.Second)); err != nil {
		t.Fatal(err)
	}
	return c
}

// guardExchange sends in on a new connection and returns everything the
// server writes until it closes the connection.
func guardExchange(t *testing.T, addr string, in string) string {
	t.Helper()
	c := guardDial(t, addr)
	// The server may close before reading everything: write errors are
	// expected, and the write must not block the read.
	go c.Write([]byte(in))
	out, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("after %q: %v", out, err)
	}
	return string(out)
}

// guardExpect writes in on c and reads exactly want back.
func guardExpect(t *testing.T, c net.Conn, in, want string) {
	t.Helper()
	if _, err := c.Write([]byte(in)); err != nil {
		t.Fatal(err)
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %q: %v", got, err)
	}
	if string(got) != want {
		t.Fatalf("got %q, want %q", got, want)
	}
}

// TestGuardRedconBulkOverflowPanic pins the redcon v1.6.4 bug where these 26
// bytes overflow i+size+2 and panic the whole server: the Reader refuses
// them and the server lives on.
func TestGuardRedconBulkOverflowPanic(t *testing.T) {
	addr := startGuardServer(t, DefaultGuardLimits())
	if got := guardExchange(t, addr, "*1\r\n$9223372036854775807\r\n"); got != guardWantBulk {
		t.Fatalf("got %q, want %q then close", got, guardWantBulk)
	}
	guardExpect(t, guardDial(t, addr), "*1\r\n$4\r\nPING\r\n", "$4\r\nPING\r\n")
}

func TestGuardServerRejects(t *testing.T) {
	addr := startGuardServer(t, DefaultGuardLimits())
	for _, tc := range []struct {
		name, in, want string
	}{
		{"bulk 2^40", "*1\r\n$1099511627776\r\n", guardWantBulk},
		{"bulk above 8 MiB", "*1\r\n$8388609\r\n", guardWantBulk},
		{"negative bulk", "*1\r\n$-1\r\n", guardWantBulk},
		{"count above 2^20", "*1048577\r\n", guardWantMultibulk},
		{"count max int64", "*9223372036854775807\r\n", guardWantMultibulk},
		{"not a bulk", "*2\r\nx", "-ERR Protocol error: expected '$', got 'x'\r\n"},
		{"inline 70 KiB", strings.Repeat("a", 70<<10) + "\r\n", guardWantInline},
		{"valid then bad", "*1\r\n$4\r\nPING\r\n*1\r\n$-1\r\n", "$4\r\nPING\r\n" + guardWantBulk},
		{"inline then bad", "ECHO x\r\n*2\r\n$1\r\nax", "$4\r\nECHO\r\n" + guardWantBulk},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := guardExchange(t, addr, tc.in); got != tc.want {
				if len(got) > 100 {
					got = got[:100] + "..."
				}
				t.Fatalf("got %q, want %q then close", got, tc.want)
			}
		})
	}
}

// TestGuardServerSplitFrame sends a bad frame in two writes, after a valid
// command: the command is answered, then the error comes.
func TestGuardServerSplitFrame(t *testing.T) {
	addr := startGuardServer(t, DefaultGuardLimits())
	c := guardDial(t, addr)
	guardExpect(t, c, "*1\r\n$4\r\nPING\r\n*2\r\n$", "$4\r\nPING\r\n")
	guardExpect(t, c, "99999999\r\n", guardWantBulk)
	if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		t.Fatalf("after the error: %d, %v; want EOF", n, err)
	}
}

func TestGuardServerInlineAtLimit(t *testing.T) {
	addr := startGuardServer(t, DefaultGuardLimits())
	arg := strings.Repeat("x", 64<<10-1) // with the '\r': 64 KiB before '\n'
	guardExpect(t, guardDial(t, addr), arg+"\r\n", "$"+strconv.Itoa(len(arg))+"\r\n"+arg+"\r\n")
}

// TestGuardServerPipeline sends 10,000 valid commands in one stream, with
// bulks and argument counts at the limits, and checks every reply.
func TestGuardServerPipeline(t *testing.T) {
	lim := DefaultGuardLimits()
	lim.MaxBulkLen = 1 << 20 // ten bulks at the limit: 10 MB of stream, not 80
	addr := startGuardServer(t, lim)
	r := rand.New(rand.NewPCG(7, 7))
	big := bytes.Repeat([]byte{'\r', '\n', '*', '$'}, int(lim.MaxBulkLen)/4)
	var in, want []byte
	for i := range 10000 {
		var first []byte
		switch {
		case i%1000 == 999:
			first = big // exactly MaxBulkLen
		default:
			first = big[:r.IntN(300)]
		}
		nargs := 1 + r.IntN(4)
		if i == 5000 {
			nargs = int(lim.MaxArgs)
		}
		in = append(in, '*')
		in = strconv.AppendInt(in, int64(nargs), 10)
		in = append(in, "\r\n"...)
		for j := range nargs {
			a := first
			if j > 0 {
				a = big[:r.IntN(20)]
			}
			in = append(in, '$')
			in = strconv.AppendInt(in, int64(len(a)), 10)
			in = append(in, "\r\n"...)
			in = append(in, a...)
			in = append(in, "\r\n"...)
		}
		want = append(want, '$')
		want = strconv.AppendInt(want, int64(len(first)), 10)
		want = append(want, "\r\n"...)
		want = append(want, first...)
		want = append(want, "\r\n"...)
	}
	c := guardDial(t, addr)
	werr := make(chan error, 1)
	go func() {
		_, err := c.Write(in)
		werr <- err
	}()
	got := make([]byte, len(want))
	if n, err := io.ReadFull(c, got); err != nil {
		t.Fatalf("read %d of %d reply bytes: %v", n, len(want), err)
	}
	if err := <-werr; err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		i := 0
		for got[i] == want[i] {
			i++
		}
		t.Fatalf("replies differ at byte %d of %d", i, len(want))
	}
	guardExpect(t, c, "*1\r\n$4\r\nPING\r\n", "$4\r\nPING\r\n")
}

// guardLoopConn is a net.Conn whose every Read returns the same pipeline.
type guardLoopConn struct {
	net.Conn
	data []byte
}

func (c *guardLoopConn) Read(p []byte) (int, error) { return copy(p, c.data), nil }

func BenchmarkGuard(b *testing.B) {
	cmd := "*5\r\n$8\r\nRL.ALLOW\r\n$10\r\nkey:123456\r\n$3\r\n100\r\n$2\r\n10\r\n$1\r\n1\r\n"
	pipe := []byte(strings.Repeat(cmd, 32))
	b.Run("parse", func(b *testing.B) {
		rd := NewReader(NewGuardConn(&guardLoopConn{data: pipe}, DefaultGuardLimits()), 1<<20)
		rd.buf = make([]byte, 4096)
		b.SetBytes(int64(len(pipe)))
		b.ReportAllocs()
		for b.Loop() {
			rd.start, rd.end = 0, copy(rd.buf, pipe)
			if cmds := rd.parse(); len(cmds) != 32 {
				b.Fatal(len(cmds), rd.bad)
			}
		}
	})
}

// FuzzGuardPreAuth drives a Reader of a connection restricted to the
// limits before AUTH, which returns one command at a time: however the
// stream is split, it returns the commands of every frame before the
// offending one (as the reference model finds it), nothing after, and
// writes the error line the model finds (in its "unauthenticated" wording
// for a count or length over the limit).
func FuzzGuardPreAuth(f *testing.F) {
	for _, tc := range guardCases {
		f.Add([]byte(tc.in), uint64(len(tc.in)))
	}
	f.Add([]byte("*1\r\n$4\r\nPING\r\n*2\r\n$4\r\nAUTH\r\n$2\r\npw\r\n*3\r\n$3\r\nGET\r\n"), uint64(7))
	lim := GuardLimits{MaxBulkLen: 16, MaxArgs: 3, MaxInlineLen: 12}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 5))
		v := newGuardValidator(lim)
		v.preAuth = true
		frame, line := 0, ""
		for frame < len(in) {
			n, bad := v.feed(in[frame:])
			if bad != guardOK {
				frame += n
				line = string(guardErrLine(bad, v.got))
				break
			}
			frame += n
		}
		want, _ := guardReaderRun(lim, true, [][]byte{in[:frame]})
		for _, chunks := range guardSplits(in, r, 4) {
			got, wrote := guardReaderRun(lim, true, chunks)
			if !slices.Equal(got, want) || wrote != line {
				t.Fatalf("split %q: %q, wrote %q; want %q, %q", chunks, got, wrote, want, line)
			}
		}
	})
}
