package server

import (
	"crypto/tls"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/resp"
)

// watchClosed reports, by closing the channel, that a parked client's
// connection was closed by the peer, was killed or is being shut down,
// without reading what it sent: it waits for the socket to turn readable
// and peeks. Bytes sent meanwhile (a pipeline behind the blocking
// command) end the watch with nothing reported: they stay unread, as
// Redis leaves a blocked client's next commands in its buffer. stop ends
// the watch and restores the read deadline the connection's reader arms.
func watchClosed(c *conn) (closed <-chan struct{}, stop func()) {
	nc := c.nc
	if g, ok := nc.(*resp.GuardConn); ok {
		nc = g.Conn
	}
	if t, ok := nc.(*tls.Conn); ok {
		nc = t.NetConn()
	}
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil, func() {}
	}
	rc, err := sc.SyscallConn()
	if err != nil {
		return nil, func() {}
	}
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		gone := false
		err := rc.Read(func(fd uintptr) bool {
			var b [1]byte
			n, _, err := syscall.Recvfrom(int(fd), b[:], syscall.MSG_PEEK|syscall.MSG_DONTWAIT)
			switch {
			case err == syscall.EAGAIN || err == syscall.EINTR:
				return false // not readable yet: wait
			case err != nil || n == 0:
				gone = true // reset, or the peer's FIN
			}
			return true
		})
		if gone || err != nil { // err: a deadline in the past (stop, CLIENT KILL, shutdown)
			close(ch)
		}
	}()
	return ch, func() {
		select {
		case <-done:
		default:
			c.nc.SetReadDeadline(time.Unix(1, 0))
			<-done
		}
		c.deadlineSet = true // the reader's next armDeadline resets it
		c.armDeadline(false)
	}
}
