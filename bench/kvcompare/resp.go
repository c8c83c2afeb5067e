package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"time"
)

// conn is a minimal RESP2 connection: commands appended to a buffer and
// written in one call, replies parsed one at a time. The load generator
// and the set-up and checking code share it, for both servers.
type conn struct {
	c     net.Conn
	r     *bufio.Reader
	out   []byte // commands not yet written
	reads int64  // socket reads so far
}

// serverError is an error reply (-ERR ...).
type serverError string

func (e serverError) Error() string { return string(e) }

func dial(addr string) (*conn, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	cn := &conn{c: c, out: make([]byte, 0, 64<<10)}
	cn.r = bufio.NewReaderSize(countReads{cn}, 64<<10)
	return cn, nil
}

// countReads counts the reads a conn makes from its socket: a server that
// writes a round trip's replies in several pieces makes the generator
// read more often.
type countReads struct{ c *conn }

func (r countReads) Read(p []byte) (int, error) {
	r.c.reads++
	return r.c.c.Read(p)
}

func (c *conn) close() { c.c.Close() }

// appendBulk appends one bulk string.
func appendBulk(b []byte, s []byte) []byte {
	b = append(b, '$')
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, '\r', '\n')
	b = append(b, s...)
	return append(b, '\r', '\n')
}

// send buffers one command.
func (c *conn) send(args ...string) {
	c.out = append(c.out, '*')
	c.out = strconv.AppendInt(c.out, int64(len(args)), 10)
	c.out = append(c.out, '\r', '\n')
	for _, a := range args {
		c.out = append(c.out, '$')
		c.out = strconv.AppendInt(c.out, int64(len(a)), 10)
		c.out = append(c.out, '\r', '\n')
		c.out = append(c.out, a...)
		c.out = append(c.out, '\r', '\n')
	}
}

// flush writes the buffered commands.
func (c *conn) flush() error {
	_, err := c.c.Write(c.out)
	c.out = c.out[:0]
	return err
}

// do sends one command and reads its reply, with a 30 s limit.
func (c *conn) do(args ...string) (any, error) {
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.c.SetDeadline(time.Time{})
	c.send(args...)
	if err := c.flush(); err != nil {
		return nil, err
	}
	return c.read()
}

// line reads one reply line without its CRLF; the slice is valid until
// the next read.
func (c *conn) line() (byte, []byte, error) {
	l, err := c.r.ReadSlice('\n')
	if err != nil {
		return 0, nil, err
	}
	if len(l) < 3 || l[len(l)-2] != '\r' {
		return 0, nil, fmt.Errorf("malformed reply line %q", l)
	}
	return l[0], l[1 : len(l)-2], nil
}

// atoi parses a reply's decimal integer without allocating.
func atoi(b []byte) (int64, error) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 18 {
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

// readInt reads one integer reply.
func (c *conn) readInt() (int64, error) {
	t, body, err := c.line()
	switch {
	case err != nil:
		return 0, err
	case t == ':':
		return atoi(body)
	case t == '-':
		return 0, serverError(body)
	}
	return 0, fmt.Errorf("want an integer reply, got %q", append([]byte{t}, body...))
}

// expect reads one reply line that must be exactly want (such as "+OK" or
// "*2").
func (c *conn) expect(want string) error {
	t, body, err := c.line()
	switch {
	case err != nil:
		return err
	case t == '-':
		return serverError(body)
	case t != want[0] || string(body) != want[1:]:
		return fmt.Errorf("want %q, got %q", want, append([]byte{t}, body...))
	}
	return nil
}

// read reads one reply of any kind: string (simple or bulk), int64, []any,
// nil, or a serverError as the error.
func (c *conn) read() (any, error) {
	t, body, err := c.line()
	if err != nil {
		return nil, err
	}
	switch t {
	case '+':
		return string(body), nil
	case '-':
		return nil, serverError(body)
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
			v, err := c.read()
			var se serverError
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
