package server

import (
	"io"
	"testing"
)

func TestInlineUnbalancedQuotesOverTCP(t *testing.T) {
	addr, _ := startServer(t, Config{})
	c, r := dial(t, addr)
	io.WriteString(c, "PING\r\necho \"abc\r\n")
	if got := readReply(t, r); got != "PONG" {
		t.Fatalf("first reply %q", got)
	}
	if got := readReply(t, r); got != "-ERR Protocol error: unbalanced quotes in request" {
		t.Fatalf("second reply %q", got)
	}
	if _, err := r.ReadByte(); err == nil {
		t.Fatal("connection still open after a protocol error")
	}
}
