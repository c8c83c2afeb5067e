package resp

import (
	"io"
	"strings"
	"testing"
)

// TestGuardDefaultsManyArgs: with the default limits a command of 100,000
// arguments passes the guard and is parsed whole (the default was 1024).
func TestGuardDefaultsManyArgs(t *testing.T) {
	const n = 100_000
	var b strings.Builder
	b.WriteString("*100001\r\n$6\r\nEXISTS\r\n")
	for range n {
		b.WriteString("$3\r\nkey\r\n")
	}
	nc := NewGuardConn(&fakeNetConn{chunks: []string{b.String()}}, GuardLimits{})
	c := NewReader(nc, int(DefaultGuardLimits().MaxQueryBuffer))
	cmds, err := c.ReadCommands()
	if err != nil || len(cmds) != 1 || len(cmds[0]) != n+1 {
		t.Fatalf("got %d commands (first with %d args), %v; want 1 with %d", len(cmds), len(cmds[0]), err, n+1)
	}
}

// TestGuardClaimedCountCostsNothing: a client that announces a million
// arguments and sends one reserves nothing for the others: the buffer
// and the argument slice follow the bytes that arrived.
func TestGuardClaimedCountCostsNothing(t *testing.T) {
	nc := NewGuardConn(&fakeNetConn{chunks: []string{"*1000000\r\n$3\r\nDEL\r\n$1\r\nk\r\n"}}, GuardLimits{})
	c := NewReader(nc, int(DefaultGuardLimits().MaxQueryBuffer))
	cmds, err := c.ReadCommands()
	if err != io.EOF || len(cmds) != 0 {
		t.Fatalf("got %d commands, %v; want none and io.EOF", len(cmds), err)
	}
	if len(c.buf) > firstChunk || cap(c.argv) > 16 {
		t.Errorf("buffer %d bytes, argument slice capacity %d: grew for arguments never sent", len(c.buf), cap(c.argv))
	}
	// Nor does judging the claimed count allocate.
	c = NewReader(NewGuardConn(&guardLoopConn{data: []byte("*1000000000\r\n$3\r\nDEL\r\n")}, GuardLimits{MaxArgs: 1 << 30}), 1<<20)
	allocs := testing.AllocsPerRun(100, func() {
		c.start, c.end = 0, copy(c.buf, "*1000000000\r\n$3\r\nDEL\r\n")
		c.part.count = 0
		if cmds := c.parse(); cmds != nil || c.bad != guardOK {
			t.Fatalf("parse: %d commands, %v", len(cmds), c.bad)
		}
	})
	if allocs != 0 {
		t.Errorf("the reader allocated %v times for a claimed count", allocs)
	}
}
