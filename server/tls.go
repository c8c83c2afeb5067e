package server

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"time"

	"github.com/rlserver/rlserver/resp"
)

// TLS: a Server serves a TLS listener like a plain one (Serve on
// tls.NewListener(ln, cfg)); the guard wraps the TLS connection, so the
// reader validates the plaintext. The handshake runs on the connection's own
// goroutine, first thing, bounded by PartialTimeout: a client that opens a
// TLS connection and stalls holds a slot no longer than one that stalls
// inside a command, and never holds up the accept loop.

// tlsConn returns the TLS connection under nc, or nil for a plain one.
func tlsConn(nc net.Conn) *tls.Conn {
	if g, ok := nc.(*resp.GuardConn); ok {
		nc = g.Conn
	}
	tc, _ := nc.(*tls.Conn)
	return tc
}

// handshake completes the TLS handshake of a connection from a TLS
// listener and reports whether to serve it; a plain connection passes.
// A client that speaks plain RESP to the TLS port gets one plaintext
// error line before the close, so redis-cli without --tls says why.
func (s *Server) handshake(c *conn) bool {
	tc := tlsConn(c.nc)
	if tc == nil {
		return true
	}
	if s.cfg.PartialTimeout > 0 {
		tc.SetDeadline(time.Now().Add(s.cfg.PartialTimeout))
	}
	err := tc.Handshake()
	// The read loop arms its own deadlines, and sees a Shutdown that set
	// one in the meantime (conn.armDeadline checks stopping).
	tc.SetDeadline(time.Time{})
	if err == nil {
		return true
	}
	var rhe tls.RecordHeaderError
	if errors.As(err, &rhe) && rhe.Conn != nil {
		refusePlain(rhe.Conn, resp.TextNotTLS)
	}
	return false
}

// refusePlain writes one error line on a raw connection and closes it
// gracefully: it half-closes, then drains what the client sent (briefly),
// so the close sends a FIN rather than a reset that could destroy the
// error line before the client reads it.
func refusePlain(nc net.Conn, text string) {
	nc.SetDeadline(time.Now().Add(time.Second))
	if _, err := io.WriteString(nc, "-"+text+"\r\n"); err == nil {
		if cw, ok := nc.(interface{ CloseWrite() error }); ok {
			cw.CloseWrite()
			io.Copy(io.Discard, io.LimitReader(nc, 64<<10))
		}
	}
	nc.Close()
}

// refuseAsync refuses nc like refuse, off the accept loop for a TLS
// connection, whose error line must wait for a handshake.
func refuseAsync(nc net.Conn, text string) {
	if tlsConn(nc) != nil {
		go refuse(nc, text)
		return
	}
	refuse(nc, text)
}
