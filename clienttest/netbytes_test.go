package clienttest

import (
	"regexp"
	"strconv"
	"testing"
	"time"
)

// TestInfoNetBytes: INFO stats counts the bytes read from and written to
// clients exactly (total_net_input_bytes, total_net_output_bytes).
func TestInfoNetBytes(t *testing.T) {
	s := start(t, opts{})
	rc := s.raw(t)
	info := badEnc("INFO", "stats")
	field := func(text, name string) int64 {
		m := regexp.MustCompile("\r\n" + name + ":([0-9]+)\r\n").FindStringSubmatch(text)
		if m == nil {
			t.Fatalf("INFO stats has no %s: %q", name, text)
		}
		n, _ := strconv.ParseInt(m[1], 10, 64)
		return n
	}
	// The counters are server-wide: the harness's own probe connection may
	// still be talking right after start, and only adds. Exact deltas in one
	// of a few attempts show the counting is exact.
	var gotIn, gotOut, wantIn, wantOut int64
	for range 10 {
		rc.send(info)
		first := rc.read()
		// The reply as sent: "$<len>\r\n<text>\r\n".
		firstLen := int64(len("$\r\n\r\n") + len(strconv.Itoa(len(first.str))) + len(first.str))
		ping := badEnc("PING")
		rc.do(ping, "+PONG\r\n")
		rc.send(info)
		second := rc.read()
		// A reply counts once written, so the INFO reply itself is not in its
		// own output figure; every command read is in the input figure.
		gotIn = field(second.str, "total_net_input_bytes") - field(first.str, "total_net_input_bytes")
		gotOut = field(second.str, "total_net_output_bytes") - field(first.str, "total_net_output_bytes")
		wantIn, wantOut = int64(len(ping)+len(info)), firstLen+int64(len("+PONG\r\n"))
		if gotIn == wantIn && gotOut == wantOut {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Errorf("total_net_input_bytes grew by %d, want %d; total_net_output_bytes grew by %d, want %d", gotIn, wantIn, gotOut, wantOut)
}
