package clienttest

import (
	"strings"
	"testing"
)

// TestConfigSetFramingLimits: CONFIG SET proto-max-bulk-len, max-args and
// max-inline-len take effect on connections already open (from their next
// read) and on new ones, CONFIG GET reports them, and bad values are refused
// with Redis's CONFIG SET error naming the argument.
func TestConfigSetFramingLimits(t *testing.T) {
	s := start(t, opts{})
	admin := s.raw(t)
	idle := s.raw(t) // open before the change
	idle.do("PING\r\n", "+PONG\r\n")

	admin.do(badEnc("CONFIG", "SET", "proto-max-bulk-len", "100"), "+OK\r\n")
	admin.do(badEnc("CONFIG", "GET", "proto-max-bulk-len"), "*2\r\n$18\r\nproto-max-bulk-len\r\n$3\r\n100\r\n")

	// The connection opened before the change follows it.
	idle.send(badEnc("ECHO", strings.Repeat("x", 101)))
	idle.expect("-ERR Protocol error: invalid bulk length\r\n")
	idle.expectEOF()

	// A new one too; a bulk of exactly the limit passes.
	c := s.raw(t)
	c.do(badEnc("ECHO", strings.Repeat("y", 100)), "$100\r\n"+strings.Repeat("y", 100)+"\r\n")

	admin.do(badEnc("CONFIG", "SET", "max-args", "4"), "+OK\r\n")
	c.do(badEnc("RL.ALLOW", "k", "5", "1"), "*4\r\n:1\r\n:4\r\n:0\r\n:1000\r\n")
	c.send(badEnc("RL.ALLOW", "k", "5", "1", "1"))
	c.expect("-ERR Protocol error: invalid multibulk length\r\n")
	c.expectEOF()

	admin.do(badEnc("CONFIG", "SET", "max-inline-len", "16"), "+OK\r\n")
	d := s.raw(t)
	d.do("PING hello\r\n", "$5\r\nhello\r\n")
	d.send("ECHO " + strings.Repeat("z", 20) + "\r\n")
	d.expect("-ERR Protocol error: too big inline request\r\n")
	d.expectEOF()

	// Units as in Redis; back to the defaults.
	admin.do(badEnc("CONFIG", "SET", "max-args", "1024"), "+OK\r\n")
	admin.do(badEnc("CONFIG", "SET", "proto-max-bulk-len", "1mb", "max-inline-len", "64kb"), "+OK\r\n")
	e := s.raw(t)
	e.do(badEnc("ECHO", strings.Repeat("w", 1000)), "$1000\r\n"+strings.Repeat("w", 1000)+"\r\n")
	admin.do(badEnc("CONFIG", "GET", "max-args"), "*2\r\n$8\r\nmax-args\r\n$4\r\n1024\r\n")

	for _, bad := range [][]string{
		{"proto-max-bulk-len", "0"},
		{"proto-max-bulk-len", "2gb"},
		{"max-args", "many"},
		{"max-args", "3000000000"},
		{"max-inline-len", "-5"},
	} {
		admin.send(badEnc("CONFIG", "SET", bad[0], bad[1]))
		v := admin.read()
		if v.kind != '-' || !strings.HasPrefix(v.str, "ERR CONFIG SET failed (possibly related to argument '"+bad[0]+"') - ") {
			t.Errorf("CONFIG SET %s %s: %c%q, want the CONFIG SET failed error", bad[0], bad[1], v.kind, v.str)
		}
	}
	// Memory values are reported in bytes, as Redis does.
	admin.do(badEnc("CONFIG", "SET", "maxmemory", "2mb"), "+OK\r\n")
	admin.do(badEnc("CONFIG", "GET", "maxmemory"), "*2\r\n$9\r\nmaxmemory\r\n$7\r\n2097152\r\n")
	admin.do(badEnc("CONFIG", "SET", "maxmemory", "0"), "+OK\r\n")
	admin.do(badEnc("CONFIG", "GET", "proto-max-bulk-len"), "*2\r\n$18\r\nproto-max-bulk-len\r\n$7\r\n1048576\r\n")

	// A refused value changes nothing.
	admin.do(badEnc("CONFIG", "GET", "max-args"), "*2\r\n$8\r\nmax-args\r\n$4\r\n1024\r\n")
}
