// Command noopserver is a RESP server that does no work: it answers PING
// with +PONG and every other command with one fixed reply, by default the
// four integers RL.ALLOW answers for a new key of capacity 100. It keeps
// no state and checks nothing beyond the framing.
//
// It measures the load generator, not a server: run beside rlserver under
// the same redis-benchmark case, it shows the RL.ALLOW/PING rate a server
// that spends nothing per command would reach on the machine. The client
// spends more CPU on an RL.ALLOW (a longer command with a random key, a
// four-element reply to parse) than on a PING, so that ratio is below 100%
// however fast the server is. bench/compare runs it as its "no-work
// server" row.
//
//	go run ./bench/noopserver -addr 127.0.0.1:7000
//	redis-benchmark -p 7000 -c 50 -P 32 -r 100000 -q RL.ALLOW key:__rand_int__ 100 0.01 1
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"os"

	"github.com/rlserver/rlserver/internal/sysmon"
)

// allowReply is RL.ALLOW's answer for a new key of capacity 100 and rate
// 0.01/s: allowed, 99 left, no wait, full again in 100 s.
const allowReply = "*4\r\n:1\r\n:99\r\n:0\r\n:100000\r\n"

func main() {
	addr := flag.String("addr", "127.0.0.1:0", "listen address (port 0: a free one, printed on stdout)")
	reply := flag.String("reply", allowReply, "the reply to every command but PING, as raw RESP")
	flag.Parse()
	// The runtime setting rlserver runs with, so the ceiling compares
	// like with like.
	sysmon.KeepAwake()
	ln, err := net.Listen("tcp", *addr)
	if err != nil {
		log.Fatalf("noopserver: %v", err)
	}
	fmt.Println(ln.Addr())
	if err := serve(ln, []byte(*reply)); err != nil {
		log.Fatalf("noopserver: %v", err)
	}
}

// serve accepts connections until ln is closed.
func serve(ln net.Listener, reply []byte) error {
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		go func() {
			defer nc.Close()
			if err := answer(nc, nc, reply); err != nil && !errors.Is(err, io.EOF) {
				fmt.Fprintln(os.Stderr, "noopserver:", err)
			}
		}()
	}
}

// answer reads multibulk commands from r and writes one reply per command
// to w, one write per read: +PONG for PING, reply for anything else. It
// returns at the end of the stream or on a framing error (after writing a
// Redis-style protocol error).
func answer(r io.Reader, w io.Writer, reply []byte) error {
	buf := make([]byte, 64<<10)
	out := make([]byte, 0, 64<<10)
	have := 0
	for {
		n, err := r.Read(buf[have:])
		have += n
		used := 0
		for used < have {
			size, ping, perr := frame(buf[used:have])
			if perr != nil {
				w.Write(append(out, "-ERR Protocol error: "+perr.Error()+"\r\n"...))
				return perr
			}
			if size == 0 {
				break
			}
			used += size
			if ping {
				out = append(out, "+PONG\r\n"...)
			} else {
				out = append(out, reply...)
			}
		}
		if len(out) > 0 {
			if _, werr := w.Write(out); werr != nil {
				return werr
			}
			out = out[:0]
		}
		have = copy(buf, buf[used:have])
		if err != nil {
			return err
		}
		if have == len(buf) {
			err := errors.New("command larger than 64 KiB")
			w.Write([]byte("-ERR Protocol error: " + err.Error() + "\r\n"))
			return err
		}
	}
}

// frame returns the size of the complete multibulk frame at the start of
// b (0 when b holds only part of one) and whether it is a PING.
func frame(b []byte) (size int, ping bool, err error) {
	count, i, err := header(b, '*')
	if i == 0 || err != nil {
		return 0, false, err
	}
	for k := 0; k < count; k++ {
		n, j, err := header(b[i:], '$')
		if j == 0 || err != nil {
			return 0, false, err
		}
		end := i + j + n + 2
		if end > len(b) {
			return 0, false, nil
		}
		if b[end-2] != '\r' || b[end-1] != '\n' {
			return 0, false, errors.New("expected CRLF after a bulk")
		}
		if k == 0 {
			ping = count == 1 && bytes.EqualFold(b[i+j:i+j+n], []byte("ping"))
		}
		i = end
	}
	return i, ping, nil
}

// header parses "<kind><digits>\r\n" at the start of b: the number and the
// header's length (0 when b holds only part of it).
func header(b []byte, kind byte) (int, int, error) {
	if len(b) == 0 {
		return 0, 0, nil
	}
	if b[0] != kind {
		return 0, 0, fmt.Errorf("expected '%c', got '%c'", kind, b[0])
	}
	n := 0
	for i := 1; i < len(b); i++ {
		c := b[i]
		switch {
		case c >= '0' && c <= '9' && i <= 8:
			n = n*10 + int(c-'0')
		case c == '\r' && i > 1:
			if i+1 == len(b) {
				return 0, 0, nil
			}
			if b[i+1] != '\n' {
				return 0, 0, errors.New("invalid length")
			}
			return n, i + 2, nil
		default:
			return 0, 0, errors.New("invalid length")
		}
	}
	return 0, 0, nil
}
