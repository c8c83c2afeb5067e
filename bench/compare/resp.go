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

// client is a minimal RESP2 client: enough for SCRIPT LOAD, INFO, DBSIZE
// and the pipelined loader, with no dependency on either server's quirks.
type client struct {
	c net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// serverError is an error reply (-ERR ...).
type serverError string

func (e serverError) Error() string { return string(e) }

func dial(addr string, timeout time.Duration) (*client, error) {
	c, err := net.DialTimeout("tcp", addr, timeout)
	if err != nil {
		return nil, err
	}
	return &client{c: c, r: bufio.NewReaderSize(c, 64<<10), w: bufio.NewWriterSize(c, 64<<10)}, nil
}

func (c *client) close() { c.c.Close() }

// send buffers one command; flush writes the buffer.
func (c *client) send(args ...string) {
	c.w.WriteByte('*')
	c.w.WriteString(strconv.Itoa(len(args)))
	c.w.WriteString("\r\n")
	for _, a := range args {
		c.w.WriteByte('$')
		c.w.WriteString(strconv.Itoa(len(a)))
		c.w.WriteString("\r\n")
		c.w.WriteString(a)
		c.w.WriteString("\r\n")
	}
}

func (c *client) flush() error { return c.w.Flush() }

// do sends one command and reads its reply, with a 30 s limit.
func (c *client) do(args ...string) (any, error) {
	c.c.SetDeadline(time.Now().Add(30 * time.Second))
	defer c.c.SetDeadline(time.Time{})
	c.send(args...)
	if err := c.flush(); err != nil {
		return nil, err
	}
	return c.read()
}

// read reads one reply: string (simple or bulk), int64, []any, nil, or a
// serverError as the error.
func (c *client) read() (any, error) {
	line, err := c.r.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	if len(line) < 3 || line[len(line)-2] != '\r' {
		return nil, errors.New("malformed reply line")
	}
	body := string(line[1 : len(line)-2])
	switch line[0] {
	case '+':
		return body, nil
	case '-':
		return nil, serverError(body)
	case ':':
		return strconv.ParseInt(body, 10, 64)
	case '$':
		n, err := strconv.Atoi(body)
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
		n, err := strconv.Atoi(body)
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
	return nil, fmt.Errorf("unexpected reply type %q", line[0])
}
