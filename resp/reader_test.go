package resp

import (
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// fakeNetConn serves reads from a list of chunks, one per Read.
type fakeNetConn struct {
	net.Conn
	chunks []string
}

func (f *fakeNetConn) Read(p []byte) (int, error) {
	if len(f.chunks) == 0 {
		return 0, io.EOF
	}
	n := copy(p, f.chunks[0])
	f.chunks[0] = f.chunks[0][n:]
	if f.chunks[0] == "" {
		f.chunks = f.chunks[1:]
	}
	return n, nil
}

func (f *fakeNetConn) RemoteAddr() net.Addr { return &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)} }

// readAll parses every command the chunks hold, rendered as space-joined
// quoted arguments.
func readAll(t *testing.T, maxQuery int, chunks ...string) ([]string, error) {
	t.Helper()
	c := NewReader(&fakeNetConn{chunks: chunks}, maxQuery)
	var got []string
	for {
		cmds, err := c.ReadCommands()
		if err != nil {
			return got, err
		}
		for _, args := range cmds {
			parts := make([]string, len(args))
			for i, a := range args {
				parts[i] = fmt.Sprintf("%q", a)
			}
			got = append(got, strings.Join(parts, " "))
		}
	}
}

func TestConnParsesPipelinesAcrossReads(t *testing.T) {
	stream := encode("RL.ALLOW", "k", "10", "1") + "*0\r\n*-1\r\n" + encode("PING") +
		"\r\n" + "ping  hello\r\n" + encode("ECHO", "") + encode("SET", "a\r\nb", strings.Repeat("x", 40000))
	want := []string{`"RL.ALLOW" "k" "10" "1"`, `"PING"`, `"ping" "hello"`, `"ECHO" ""`,
		fmt.Sprintf(`"SET" "a\r\nb" %q`, strings.Repeat("x", 40000))}
	for _, split := range []int{1, 2, 3, 7, 100, len(stream)} {
		var chunks []string
		for s := stream; s != ""; {
			n := min(split, len(s))
			chunks = append(chunks, s[:n])
			s = s[n:]
		}
		got, err := readAll(t, 1<<20, chunks...)
		if err != io.EOF {
			t.Fatalf("split %d: err %v", split, err)
		}
		if strings.Join(got, "\n") != strings.Join(want, "\n") {
			t.Fatalf("split %d:\ngot  %v\nwant %v", split, got, want)
		}
	}
}

func TestConnInlineQuoting(t *testing.T) {
	for _, tc := range []struct{ line, want string }{
		{`set "a b" 'c d'`, `"set" "a b" "c d"`},
		{`echo "\x41\n\t\"q\\"`, `"echo" "A\n\t\"q\\"`},
		{`echo 'it\'s'`, `"echo" "it's"`},
		{"echo\t\tx", `"echo" "x"`},
		{`echo ""`, `"echo" ""`},
	} {
		got, _ := readAll(t, 1<<20, tc.line+"\r\n")
		if len(got) != 1 || got[0] != tc.want {
			t.Errorf("%s: got %v, want %s", tc.line, got, tc.want)
		}
	}
	for _, bad := range []string{`echo "abc`, `echo 'abc`, `echo "a"b`} {
		got, _ := readAll(t, 1<<20, bad+"\r\n")
		if len(got) != 1 || got[0] != fmt.Sprintf("%q", unbalancedQuotes) {
			t.Errorf("%s: got %v, want the unbalanced-quotes marker", bad, got)
		}
	}
}

func TestConnQueryBufferLimit(t *testing.T) {
	big := encode("SET", "k", strings.Repeat("v", 100000))
	if _, err := readAll(t, 64<<10, big); err != ErrQueryBuffer {
		t.Fatalf("err = %v, want ErrQueryBuffer", err)
	}
	if got, err := readAll(t, 256<<10, big); err != io.EOF || len(got) != 1 {
		t.Fatalf("under the limit: %d commands, err %v", len(got), err)
	}
}

// encode renders args as one multibulk frame.
func encode(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// TestUnbalancedQuotesMarker: UnbalancedQuotes recognises only the marker
// the reader returns for an inline line whose quotes do not close.
func TestUnbalancedQuotesMarker(t *testing.T) {
	if UnbalancedQuotes([][]byte{[]byte("\x00unbalanced-quotes")}) || UnbalancedQuotes(nil) {
		t.Fatal("UnbalancedQuotes matched something other than the marker")
	}
	if !UnbalancedQuotes([][]byte{unbalancedQuotes}) {
		t.Fatal("UnbalancedQuotes missed the marker")
	}
}
