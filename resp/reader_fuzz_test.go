package resp

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/tidwall/redcon"
)

// FuzzConnReader fuzzes rlserver's own RESP reader (reader.go), alone and
// behind the guard, with every stream split into chunks in several ways:
//
//   - Unguarded, any byte stream: the reader never panics (reader.go promises
//     bounds checks of its own), and the commands it returns, and the error
//     that ends the stream, do not depend on how the stream was split. This
//     runs with a roomy query buffer and with a tiny one, so growth and
//     ErrQueryBuffer are covered too.
//   - Guarded, with fixed limits and with live ones (lazy): of the bytes
//     before the first frame the reference model (guard_model_test.go)
//     refuses, the reader returns exactly one command per complete frame
//     (none for *0, *-1 and blank inline lines), it writes the model's
//     error line in both modes, the stream ends with
//     io.EOF, and each multibulk command is what redcon.Parse makes of that
//     frame alone. Plain inline lines (no quotes, no tabs) must also agree
//     with redcon, whose quoting rules differ from Redis's and so are not
//     compared.
//
// testdata keeps a crasher it found by review: a bulk length near 2^63
// overflowed parseMultibulk's bounds check (fixed in 1d21c87).
func FuzzConnReader(f *testing.F) {
	for _, s := range connFuzzSeeds {
		f.Add([]byte(s), uint64(len(s)))
	}
	f.Fuzz(func(t *testing.T, in []byte, seed uint64) {
		r := rand.New(rand.NewPCG(seed, 11))
		splits := connFuzzSplits(in, r)

		// Unguarded.
		for _, maxQuery := range []int{1 << 20, readChunk + 1 + int(seed%4096)} {
			want, wantErr := connFuzzRead(maxQuery, splits[0])
			for _, chunks := range splits[1:] {
				got, err := connFuzzRead(maxQuery, chunks)
				if !slices.Equal(got, want) || !sameErr(err, wantErr) {
					t.Fatalf("maxQuery %d, %d chunks: %q, %v\nwhole stream: %q, %v", maxQuery, len(chunks), got, err, want, wantErr)
				}
			}
		}

		// Guarded.
		lim := connFuzzLimits
		v := newGuardValidator(lim)
		passed, bad := v.feed(slices.Clone(in))
		if bad == guardOK {
			passed = len(in)
		}
		want := connFuzzReference(t, in[:passed])
		var wantWrote string
		if bad != guardOK {
			wantWrote = string(guardErrLine(bad, v.got))
		}
		for _, chunks := range splits {
			// Behind a guard with fixed limits, and behind one following
			// live limits: the same commands as the reference model
			// (guard_model_test.go) passes, the same error line, then
			// io.EOF.
			for _, lazy := range []bool{false, true} {
				got, wrote, err := connFuzzReadGuarded(lim, lazy, chunks)
				if err != io.EOF {
					t.Fatalf("lazy %v, %d chunks: stream ended with %v, want io.EOF", lazy, len(chunks), err)
				}
				if !slices.Equal(got, want) {
					t.Fatalf("lazy %v, %d chunks of %q:\ngot  %q\nwant %q", lazy, len(chunks), in, got, want)
				}
				if wrote != wantWrote {
					t.Fatalf("lazy %v, %d chunks of %q: wrote %q, want %q", lazy, len(chunks), in, wrote, wantWrote)
				}
			}
		}
	})
}

// connFuzzLimits are small, so that fuzzed streams reach every limit.
var connFuzzLimits = GuardLimits{MaxBulkLen: 64, MaxArgs: 8, MaxInlineLen: 64}

var connFuzzSeeds = []string{
	"",
	"*1\r\n$4\r\nPING\r\n",
	"*3\r\n$8\r\nRL.ALLOW\r\n$1\r\nk\r\n$2\r\n10\r\n*0\r\n*-1\r\nPING\r\n",
	"*2\r\n$4\r\nECHO\r\n$0\r\n\r\n",
	"*2\r\n$4\r\nECHO\r\n$4\r\na\r\nb\r\n",
	"PING\r\n  \t \r\necho  hello\tworld\n\n",
	`set "a b" 'c d'` + "\r\n" + `echo "\x41\n\t\"q\\"` + "\r\n",
	"echo \"abc\r\nPING\r\n",
	"echo 'it\\'s'\r\necho \"a\"b\r\n",
	"*1\r\n$1",
	"*1\r\n$1\r\na",
	"*2\r\nx",
	"*1\r\n$-1\r\n",
	"*01\r\n$1\r\na\r\n",
	"*1\r\n$01\r\na\r\n",
	"*100000\r\n",
	"*1\r\n$1099511627776\r\n",
	"*-9223372036854775808\r\n*1\r\n$1\r\na\r\n",
	"*1\r\n$3\r\nabcde\r\n",
	"$5\r\nhello\r\n",
	"\x00\xff\r\n*\r\n",
	"*1\r\n$64\r\n0123456789012345678901234567890123456789012345678901234567890123\r\n",
	// Complete frames just past each limit (connFuzzLimits), after a good
	// one: the lazy reader must hand them to the guard, not accept them.
	"*1\r\n$1\r\na\r\n*1\r\n$65\r\n01234567890123456789012345678901234567890123456789012345678901234\r\n",
	"*1\r\n$1\r\na\r\n*9\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
	"*1\r\n$1\r\na\r\n*1\r\n$00\r\n\r\n",
	"*1\r\n$1\r\na\r\n*1\r\n$1\r\nab\r\n",
	"*1\r\n$1\r\na\r\n*1\r\n$1\r\na\n\r*1\r\n$1\r\na\r\n",
	"*1\r\n$1\r\na\r\n*1\r\n:1\r\na\r\n",
	"*1\r\n$1\r\na\r\n*8\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n$1\r\na\r\n",
}

// connFuzzSplits cuts in as one chunk, one byte per chunk, and a few random
// ways.
func connFuzzSplits(in []byte, r *rand.Rand) [][][]byte {
	splits := [][][]byte{{in}}
	var ones [][]byte
	for i := range in {
		ones = append(ones, in[i:i+1])
	}
	splits = append(splits, ones)
	for range 4 {
		var s [][]byte
		for rest := in; len(rest) > 0; {
			k := 1 + r.IntN(min(len(rest), 1+r.IntN(24)))
			s = append(s, rest[:k])
			rest = rest[k:]
		}
		splits = append(splits, s)
	}
	return splits
}

// connFuzzConn is a net.Conn that serves reads from chunks, one chunk (or
// what fits of it) per Read, then io.EOF. Writes (the guard's error line)
// are kept.
type connFuzzConn struct {
	net.Conn
	chunks [][]byte
	wrote  bytes.Buffer
}

func (c *connFuzzConn) Read(p []byte) (int, error) {
	if len(c.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, c.chunks[0])
	if c.chunks[0] = c.chunks[0][n:]; len(c.chunks[0]) == 0 {
		c.chunks = c.chunks[1:]
	}
	return n, nil
}

func (c *connFuzzConn) Write(p []byte) (int, error) { return c.wrote.Write(p) }
func (c *connFuzzConn) RemoteAddr() net.Addr        { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// connFuzzRead runs the reader over chunks, unguarded, and returns every
// command it parsed, rendered, and the error that ended the stream.
func connFuzzRead(maxQuery int, chunks [][]byte) ([]string, error) {
	fake := connFuzzSource(chunks)
	return connFuzzDrain(NewReader(fake, maxQuery))
}

// connFuzzReadGuarded runs the reader over chunks behind a guard with
// lim, following live limits that hold lim (lazy) or fixed ones, and returns
// the commands it parsed, what the guard wrote to the client and the error
// that ended the stream.
func connFuzzReadGuarded(lim GuardLimits, lazy bool, chunks [][]byte) ([]string, string, error) {
	fake := connFuzzSource(chunks)
	g := NewGuardConn(fake, lim)
	if lazy {
		var live atomic.Pointer[GuardLimits]
		live.Store(&lim)
		g.Follow(&live)
	}
	out, err := connFuzzDrain(NewReader(g, 1<<20))
	return out, fake.wrote.String(), err
}

// connFuzzSource is a connection that reads chunks, one per Read at most.
// The reader must not rely on the chunks staying unchanged, nor change
// them: they are copied.
func connFuzzSource(chunks [][]byte) *connFuzzConn {
	fake := &connFuzzConn{}
	for _, c := range chunks {
		if len(c) > 0 { // a socket never reads 0 bytes without an error
			fake.chunks = append(fake.chunks, slices.Clone(c))
		}
	}
	return fake
}

// connFuzzDrain reads pipelines until an error and returns the commands,
// rendered, and the error.
func connFuzzDrain(c *Reader) ([]string, error) {
	var out []string
	for range 1 << 20 {
		cmds, err := c.ReadCommands()
		if err != nil {
			return out, err
		}
		for _, args := range cmds {
			out = append(out, connFuzzRender(args))
		}
	}
	return out, errors.New("reader never ends")
}

func connFuzzRender(args [][]byte) string {
	if len(args) == 1 && len(args[0]) > 0 && &args[0][0] == &unbalancedQuotes[0] {
		return "<unbalanced quotes>"
	}
	b := []byte{}
	for i, a := range args {
		if i > 0 {
			b = append(b, ' ')
		}
		b = strconv.AppendQuote(b, string(a))
	}
	return string(b)
}

func sameErr(a, b error) bool {
	return a == b || (a != nil && b != nil && a.Error() == b.Error())
}

// connFuzzReference splits a stream the guard passed into frames (it is
// well-framed, so a simple splitter does) and returns the commands the
// reader must produce for its complete frames. Commands whose parse redcon
// cannot confirm (inline lines with quotes or tabs) are taken from the
// reader itself, run on that one frame.
func connFuzzReference(t *testing.T, b []byte) []string {
	var out []string
	for len(b) > 0 {
		n, ok := connFuzzFrameLen(b)
		if !ok {
			break // the stream ends inside this frame
		}
		frame := b[:n]
		b = b[n:]
		if frame[0] == '*' {
			count, _ := strconv.Atoi(string(frame[1:bytes.IndexByte(frame, '\r')]))
			if count <= 0 {
				continue // an empty frame: skipped, as Redis does
			}
			cmd, err := redcon.Parse(frame)
			if err != nil {
				t.Fatalf("the guard passed %q, which redcon refuses: %v", frame, err)
			}
			out = append(out, connFuzzRender(cmd.Args))
			continue
		}
		line := bytes.TrimSuffix(frame[:len(frame)-1], []byte("\r"))
		if len(bytes.Trim(line, " \t")) == 0 {
			continue // a blank line is no command
		}
		if bytes.ContainsAny(line, "\"'\t") {
			got, _ := connFuzzRead(1<<20, [][]byte{frame})
			if len(got) != 1 {
				t.Fatalf("inline line %q alone: %q, want one command", frame, got)
			}
			out = append(out, got[0])
			continue
		}
		cmd, err := redcon.Parse(frame)
		if err != nil {
			t.Fatalf("redcon refuses the plain inline line %q: %v", frame, err)
		}
		out = append(out, connFuzzRender(cmd.Args))
	}
	return out
}

// connFuzzFrameLen is the length of the frame at the start of a stream the
// guard accepted, and false when the stream ends before the frame does.
func connFuzzFrameLen(b []byte) (int, bool) {
	if b[0] != '*' {
		nl := bytes.IndexByte(b, '\n')
		return nl + 1, nl >= 0
	}
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		return 0, false
	}
	count, err := strconv.ParseInt(string(b[1:nl-1]), 10, 64)
	if err != nil {
		panic(fmt.Sprintf("guard passed a bad count line %q", b[:nl+1]))
	}
	i := nl + 1
	for range max(count, 0) {
		nl := bytes.IndexByte(b[i:], '\n')
		if nl < 0 {
			return 0, false
		}
		size, err := strconv.Atoi(string(b[i+1 : i+nl-1]))
		if err != nil {
			panic(fmt.Sprintf("guard passed a bad bulk line %q", b[i:i+nl+1]))
		}
		i += nl + 1 + size + 2
		if i > len(b) {
			return 0, false
		}
	}
	return i, true
}
