package main

import (
	"bytes"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"testing/iotest"
)

// TestAnswerSplitReads feeds a pipeline one byte per read: every command
// gets exactly one reply, in order, however the stream is split.
func TestAnswerSplitReads(t *testing.T) {
	in := "*1\r\n$4\r\nPING\r\n" +
		"*5\r\n$8\r\nRL.ALLOW\r\n$16\r\nkey:000000012345\r\n$3\r\n100\r\n$4\r\n0.01\r\n$1\r\n1\r\n" +
		"*1\r\n$4\r\nping\r\n" +
		"*2\r\n$4\r\nPING\r\n$2\r\nhi\r\n" // PING with an argument is not a bare PING
	var out bytes.Buffer
	err := answer(iotest.OneByteReader(strings.NewReader(in)), &out, []byte(":7\r\n"))
	if err != io.EOF {
		t.Fatalf("answer returned %v, want io.EOF", err)
	}
	if want := "+PONG\r\n:7\r\n+PONG\r\n:7\r\n"; out.String() != want {
		t.Fatalf("replies %q, want %q", out.String(), want)
	}
}

// TestAnswerBadFrame answers the commands before a bad frame, then a
// protocol error, and stops.
func TestAnswerBadFrame(t *testing.T) {
	var out bytes.Buffer
	err := answer(strings.NewReader("*1\r\n$4\r\nPING\r\n$4\r\nPING\r\n"), &out, []byte(":7\r\n"))
	if err == nil {
		t.Fatal("answer accepted a frame that is not a multibulk")
	}
	if want := "+PONG\r\n-ERR Protocol error: expected '*', got '$'\r\n"; out.String() != want {
		t.Fatalf("replies %q, want %q", out.String(), want)
	}
}

// TestAnswerBadBulkEnd refuses a bulk whose body is not followed by CRLF,
// and a command that does not fit the read buffer.
func TestAnswerBadBulkEnd(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"*1\r\n$4\r\nPINGxx", "-ERR Protocol error: expected CRLF after a bulk\r\n"},
		{"*1\r\n$99999\r\n" + strings.Repeat("x", 70<<10), "-ERR Protocol error: command larger than 64 KiB\r\n"},
	} {
		var out bytes.Buffer
		if err := answer(strings.NewReader(c.in), &out, []byte(":7\r\n")); err == nil || err == io.EOF {
			t.Errorf("answer(%.20q...) returned %v, want a protocol error", c.in, err)
		}
		if out.String() != c.want {
			t.Errorf("answer(%.20q...) wrote %q, want %q", c.in, out.String(), c.want)
		}
	}
}

// TestServeRedisCLI drives the server over loopback with redis-cli: PING
// gets PONG, and any other command RL.ALLOW's four integers.
func TestServeRedisCLI(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- serve(ln, []byte(allowReply)) }()
	_, port, _ := net.SplitHostPort(ln.Addr().String())
	for _, c := range []struct{ args, want string }{
		{"PING", "PONG\n"},
		{"RL.ALLOW k 100 0.01 1", "1\n99\n0\n100000\n"},
	} {
		args := append([]string{"-h", "127.0.0.1", "-p", port}, strings.Fields(c.args)...)
		out, err := exec.Command("redis-cli", args...).CombinedOutput()
		if err != nil || string(out) != c.want {
			t.Errorf("redis-cli %s: %q (%v), want %q", c.args, out, err, c.want)
		}
	}
	ln.Close()
	if err := <-done; err != nil {
		t.Fatalf("serve: %v", err)
	}
}
