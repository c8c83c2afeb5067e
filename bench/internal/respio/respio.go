// Package respio is the minimal RESP2 client the benchmark programs
// share: commands appended to a buffer and written in one call, replies
// parsed one at a time, with no dependency on either server's quirks.
package respio

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// Conn is a RESP2 connection. A load generator may append commands to
// Out itself (AppendBulk) and write them with Flush.
type Conn struct {
	c     net.Conn
	r     *bufio.Reader
	Out   []byte // commands not yet written
	Reads int64  // socket reads so far
}

// ServerError is an error reply (-ERR ...).
type ServerError string

func (e ServerError) Error() string { return string(e) }

// Dial connects to addr, waiting up to 5 s.
func Dial(addr string) (*Conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	cn := &Conn{c: c, Out: make([]byte, 0, 64<<10)}
	cn.r = bufio.NewReaderSize(countReads{cn}, 64<<10)
	return cn, nil
}

// countReads counts the reads a Conn makes from its socket: a server that
// writes a round trip's replies in several pieces makes the generator
// read more often.
type countReads struct{ c *Conn }

func (r countReads) Read(p []byte) (int, error) {
	r.c.Reads++
	return r.c.c.Read(p)
}

// Close closes the connection.
func (c *Conn) Close() { c.c.Close() }

// SetDeadline sets the connection's deadline (the zero time: none).
func (c *Conn) SetDeadline(t time.Time) error { return c.c.SetDeadline(t) }

// SetReadDeadline sets the connection's read deadline.
func (c *Conn) SetReadDeadline(t time.Time) error { return c.c.SetReadDeadline(t) }

// AppendBulk appends one bulk string.
func AppendBulk(b []byte, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// Send buffers one command.
func (c *Conn) Send(args ...string) {
	c.Out = append(c.Out, '*')
	c.Out = strconv.AppendInt(c.Out, int64(len(args)), 10)
	c.Out = append(c.Out, '\r', '\n')
	for _, a := range args {
		c.Out = append(c.Out, '$')
		c.Out = strconv.AppendInt(c.Out, int64(len(a)), 10)
		c.Out = append(c.Out, '\r', '\n')
		c.Out = append(c.Out, a...)
		c.Out = append(c.Out, '\r', '\n')
	}
}

// Flush writes the buffered commands.
func (c *Conn) Flush() error {
	_, err := c.c.Write(c.Out)
	c.Out = c.Out[:0]
	return err
}

// Do sends one command and reads its reply, with a 30 s limit.
func (c *Conn) Do(args ...string) (any, error) {
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.c.SetDeadline(time.Time{})
	c.Send(args...)
	if err := c.Flush(); err != nil {
		return nil, err
	}
	return c.Read()
}

// line reads one reply line without its CRLF; the slice is valid until
// the next read.
func (c *Conn) line() (byte, []byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return 0, nil, fmt.Errorf("malformed reply line %q", l)
	}
	return l[0], l[1 : len(l)-2], nil
}

// atoi parses a reply's decimal integer, without allocating when it has
// up to 18 digits.
func atoi(b []byte) (int64, error) {
	all := b
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) > 18 {
		n, err := strconv.ParseInt(string(all), 10, 64)
		if err != nil {
			return 0, fmt.Errorf("bad integer %q", all)
		}
		return n, nil
	}
	if len(b) == 0 {
		return 0, fmt.Errorf("bad integer %q", b)
	}
	var n int64
	for _, d := range b {
		if d < '0' || d > '9' {
			return 0, fmt.Errorf("bad integer %q", b)
		}
		n = n*10 + int64(d-'0')
	}
	if neg {
		n = -n
	}
	return n, nil
}

// ReadInt reads one integer reply.
func (c *Conn) ReadInt() (int64, error) {
	t, body, err := c.line()
	switch {
	case err != nil:
		return 0, err
	case t == ':':
		return atoi(body)
	case t == '-':
		return 0, ServerError(body)
	}
	return 0, fmt.Errorf("want an integer reply, got %q", append([]byte{t}, body...))
}

// Expect reads one reply line that must be exactly want (such as "+OK" or
// "*2").
func (c *Conn) Expect(want string) error {
	t, body, err := c.line()
	switch {
	case err != nil:
		return err
	case t == '-':
		return ServerError(body)
	case t != want[0] || string(body) != want[1:]:
		return fmt.Errorf("want %q, got %q", want, append([]byte{t}, body...))
	}
	return nil
}

// Read reads one reply of any kind: string (simple or bulk), int64, []any,
// nil, or a ServerError as the error (in an array, the first one, after
// the whole array is read).
func (c *Conn) Read() (any, error) {
	t, body, err := c.line()
	if err != nil {
		return nil, err
	}
	switch t {
	case '+':
		return string(body), nil
	case '-':
		return nil, ServerError(body)
	case ':':
		return atoi(body)
	case '$':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(c.r, buf); err != nil {
			return nil, err
		}
		return string(buf[:n]), nil
	case '*':
		n, err := strconv.Atoi(string(body))
		if err != nil {
			return nil, err
		}
		if n < 0 {
			return nil, nil
		}
		out := make([]any, n)
		var firstErr error
		for i := range out {
			v, err := c.Read()
			var se ServerError
			if err != nil && !errors.As(err, &se) {
				return nil, err
			}
			if err != nil && firstErr == nil {
				firstErr = err
			}
			out[i] = v
		}
		return out, firstErr
	}
	return nil, fmt.Errorf("unexpected reply type %q", t)
}

// InfoMemory reads the integer fields of addr's INFO memory, on a new
// connection.
func InfoMemory(addr string) (map[string]int64, error) {
	c, err := Dial(addr)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	v, err := c.Do("INFO", "memory")
	if err != nil {
		return nil, err
	}
	s, _ := v.(string)
	out := map[string]int64{}
	for _, line := range strings.Split(s, "\r\n") {
		k, val, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		if n, err := strconv.ParseInt(val, 10, 64); err == nil {
			out[k] = n
		}
	}
	return out, nil
}
