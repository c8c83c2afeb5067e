package server

import (
	"net"
	"sync/atomic"
	"time"

	"github.com/rlserver/rlserver/resp"
)

// conn is one client connection: resp's Reader over the guarded byte
// stream, resp's Writer for replies, and what the server keeps per
// connection (read deadlines, the kill flag).
type conn struct {
	nc   net.Conn
	rd   *resp.Reader
	w    *resp.Writer
	g    *resp.GuardConn // the guard in front of the socket; nil if none
	addr string

	closed bool

	// A command that has started to arrive must finish within
	// partialTimeout (0: no limit); an idle connection has no deadline.
	partialTimeout time.Duration
	deadlineSet    bool
	stopping       *atomic.Bool // the server is shutting down: reads end now
	killed         atomic.Bool  // CLIENT KILL: reads end now (client.go)
}

func newConn(nc net.Conn, maxQuery int) *conn {
	c := &conn{nc: nc, addr: nc.RemoteAddr().String(),
		rd: resp.NewReader(nc, maxQuery), w: resp.NewWriter(nc)}
	c.g, _ = nc.(*resp.GuardConn)
	c.rd.BeforeRead = c.armDeadline
	return c
}

// armDeadline sets the read deadline for the next read: partialTimeout
// from now while part of a command is buffered, none while idle, and one in
// the past once the server is stopping. The stopping check comes after the
// deadline is set, so a concurrent Shutdown's past deadline is never lost.
func (c *conn) armDeadline(partial bool) {
	partial = partial && c.partialTimeout > 0
	switch {
	case partial:
		c.nc.SetReadDeadline(time.Now().Add(c.partialTimeout))
		c.deadlineSet = true
	case c.deadlineSet:
		c.nc.SetReadDeadline(time.Time{})
		c.deadlineSet = false
	}
	if c.stopping != nil && c.stopping.Load() || c.killed.Load() {
		c.nc.SetReadDeadline(time.Unix(1, 0))
		c.deadlineSet = true
	}
}

// What the command handlers write replies with.

func (c *conn) RemoteAddr() string       { return c.addr }
func (c *conn) NetConn() net.Conn        { return c.nc }
func (c *conn) WriteError(msg string)    { c.w.WriteError(msg) }
func (c *conn) WriteString(s string)     { c.w.WriteString(s) }
func (c *conn) WriteBulk(b []byte)       { c.w.WriteBulk(b) }
func (c *conn) WriteBulkString(s string) { c.w.WriteBulkString(s) }
func (c *conn) WriteInt(n int)           { c.w.WriteInt(n) }
func (c *conn) WriteInt64(n int64)       { c.w.WriteInt64(n) }
func (c *conn) WriteArray(n int)         { c.w.WriteArray(n) }
func (c *conn) WriteNull()               { c.w.WriteNull() }
func (c *conn) WriteRaw(b []byte)        { c.w.WriteRaw(b) }

// mute makes the replies written from now on vanish, until unmute
// (CLIENT REPLY OFF/SKIP).
func (c *conn) mute() { c.w.Mute() }

// unmute sends replies to the client again.
func (c *conn) unmute() { c.w.Unmute() }

// Close flushes pending replies and closes the connection.
func (c *conn) Close() error {
	c.w.Flush()
	c.closed = true
	return c.nc.Close()
}
