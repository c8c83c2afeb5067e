package resp

import (
	"bytes"
	"io"
	"math"
	"net"
	"strconv"
	"testing"
	"time"
)

// TestAppendIntReply checks the hand-written integer reply against
// strconv at the edges of every digit count and of int64.
func TestAppendIntReply(t *testing.T) {
	vals := []int64{0, 1, -1, math.MaxInt64, math.MinInt64, math.MinInt64 + 1}
	for p := int64(1); p <= 1e18; p *= 10 {
		vals = append(vals, p-1, p, p+1, -p, -p+1, -p-1)
	}
	for _, v := range vals {
		got := string(AppendInt([]byte("x"), v))
		want := "x:" + strconv.FormatInt(v, 10) + "\r\n"
		if got != want {
			t.Errorf("AppendInt(%d) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkAppendIntReply(b *testing.B) {
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = AppendInt(buf[:0], 1)
		buf = AppendInt(buf, 99)
		buf = AppendInt(buf, 0)
		buf = AppendInt(buf, 9_999_000)
	}
}

// TestWriterProtocols checks each reply whose encoding depends on the
// protocol, in RESP2 and RESP3, and the byte count.
func TestWriterProtocols(t *testing.T) {
	for _, tc := range []struct {
		resp3 bool
		want  string
	}{
		{false, "*4\r\n*2\r\n$-1\r\n$5\r\nhello\r\n"},
		{true, "%2\r\n~2\r\n_\r\n=9\r\ntxt:hello\r\n"},
	} {
		var out bytes.Buffer
		w := NewWriter(&out)
		w.SetRESP3(tc.resp3)
		if w.RESP3() != tc.resp3 {
			t.Fatalf("RESP3() = %v after SetRESP3(%v)", w.RESP3(), tc.resp3)
		}
		w.WriteMap(2)
		w.WriteSet(2)
		w.WriteNil()
		w.WriteVerbatim("hello")
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if out.String() != tc.want {
			t.Errorf("resp3 %v: wrote %q, want %q", tc.resp3, out.String(), tc.want)
		}
		if n := w.TakeBytesWritten(); n != len(tc.want) {
			t.Errorf("resp3 %v: TakeBytesWritten = %d, want %d", tc.resp3, n, len(tc.want))
		}
		if n := w.TakeBytesWritten(); n != 0 {
			t.Errorf("second TakeBytesWritten = %d, want 0", n)
		}
	}
}

// TestWriterMute: replies written while muted vanish, including those
// buffered and never flushed before Unmute; the others arrive in order.
func TestWriterMute(t *testing.T) {
	var out bytes.Buffer
	w := NewWriter(&out)
	w.WriteString("OK")
	w.Mute()
	w.WriteInt(1)
	w.WriteError("ERR hidden")
	w.Unmute()
	w.WriteInt64(2)
	w.Mute()
	w.WriteBulkString("gone")
	w.Flush()
	w.Unmute()
	w.WriteBulk([]byte("x"))
	w.Flush()
	if want := "+OK\r\n:2\r\n$1\r\nx\r\n"; out.String() != want {
		t.Errorf("wrote %q, want %q", out.String(), want)
	}
}

// TestWriterBuffered: while a flush waits for a client that does not read,
// Buffered reports its bytes as pending (CLIENT LIST's obl and omem); once
// written, none, and the reply buffer's capacity stays.
func TestWriterBuffered(t *testing.T) {
	srv, cli := net.Pipe()
	defer srv.Close()
	defer cli.Close()
	w := NewWriter(srv)
	reply := bytes.Repeat([]byte("x"), 5000)
	w.WriteBulk(reply)
	want := len("$5000\r\n") + len(reply) + 2
	flushed := make(chan error, 1)
	go func() { flushed <- w.Flush() }()
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(time.Millisecond) {
		if pending, _ := w.Buffered(); pending == want {
			break
		} else if time.Now().After(deadline) {
			t.Fatalf("pending %d during a blocked flush, want %d", pending, want)
		}
	}
	if _, err := io.ReadFull(cli, make([]byte, want)); err != nil {
		t.Fatal(err)
	}
	if err := <-flushed; err != nil {
		t.Fatal(err)
	}
	if pending, capacity := w.Buffered(); pending != 0 || capacity < want {
		t.Errorf("after the flush: pending %d, capacity %d; want 0 and at least %d", pending, capacity, want)
	}
}
