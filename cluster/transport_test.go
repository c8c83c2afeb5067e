package cluster

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

// TestReadFrameSizes: frames around the chunk boundaries and a large one
// arrive intact, whether the reader sees them whole or in small pieces.
func TestReadFrameSizes(t *testing.T) {
	for _, size := range []int{0, 1, frameChunk - 1, frameChunk, frameChunk + 1, 3*frameChunk + 7, 5 << 20} {
		payload := make([]byte, size)
		for i := range payload {
			payload[i] = byte(i * 7)
		}
		frame := appendFrame(nil, msgBatchV1, uint64(size)+1, payload)
		for _, r := range []io.Reader{bytes.NewReader(frame), &trickle{b: frame, step: 1000}} {
			typ, id, got, err := readFrame(r)
			if err != nil || typ != msgBatchV1 || id != uint64(size)+1 || !bytes.Equal(got, payload) {
				t.Fatalf("size %d: typ %d id %d len %d, %v", size, typ, id, len(got), err)
			}
			if cap(got) != size && size > 0 {
				t.Errorf("size %d: buffer capacity %d", size, cap(got))
			}
		}
	}
	// Cut short: an error, never a short payload.
	frame := appendFrame(nil, msgBatchV1, 1, make([]byte, 200_000))
	if _, _, _, err := readFrame(bytes.NewReader(frame[:150_000])); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	for _, n := range []uint32{0, 8, maxFrame + 1, 1<<32 - 1} {
		hdr := binary.BigEndian.AppendUint32(nil, n)
		if _, _, _, err := readFrame(bytes.NewReader(append(hdr, make([]byte, 20)...))); !errors.Is(err, errFrameTooLarge) {
			t.Errorf("length %d: %v, want errFrameTooLarge", n, err)
		}
	}
}

// trickle returns at most step bytes per Read.
type trickle struct {
	b    []byte
	step int
}

func (r *trickle) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), r.step)], r.b)
	r.b = r.b[n:]
	return n, nil
}

// TestHugeFrameAnnouncementCostsNoMemory pins issue 7's readFrame bug:
// it allocated the length a peer announced (up to 64 MiB) before reading
// it, so unauthenticated connections to the Raft port that announce big
// frames and send nothing made every node allocate 64 MiB each. Now the
// buffer follows the bytes that arrive, and a frame that stalls is cut
// off at the frame timeout.
func TestHugeFrameAnnouncementCostsNoMemory(t *testing.T) {
	const timeout = 700 * time.Millisecond
	c := newCluster(t, 1, func(cfg *Config) { cfg.FrameTimeout = timeout })
	l := c.leader()

	// Connections announcing a 64 MiB frame, sending nothing more.
	const conns = 32
	hdr := binary.BigEndian.AppendUint32(nil, maxFrame)
	hdr = append(hdr, msgBatchV1)
	hdr = binary.BigEndian.AppendUint64(hdr, 1)
	announce := func(c net.Conn, msg []byte) {
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	before := memStats()
	start := time.Now()
	var cs []net.Conn
	for range conns {
		pc, err := dialProto(l.addr, time.Second, preamble(0, protoForward), nil)
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		announce(pc, hdr)
		cs = append(cs, pc)
	}
	// Each is disconnected at the deadline, not before and not much after.
	for i, pc := range cs {
		pc.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := pc.Read(make([]byte, 1))
		var ne net.Error
		if err == nil || errors.As(err, &ne) && ne.Timeout() {
			t.Fatalf("connection %d still open after %v (%v)", i, time.Since(start), err)
		}
	}
	took := time.Since(start)
	if took < timeout {
		t.Errorf("connections closed after %v, before the %v frame timeout", took, timeout)
	}
	if took > timeout+5*time.Second {
		t.Errorf("connections closed after %v, long after the %v frame timeout", took, timeout)
	}
	after := memStats()
	perConn := (after.TotalAlloc - before.TotalAlloc) / conns
	t.Logf("%d connections announcing %d MiB each: %d KiB allocated per connection (all goroutines), closed after %v",
		conns, maxFrame>>20, perConn>>10, took.Round(time.Millisecond))
	// The reader's 64 KiB buffer plus one 64 KiB chunk, and some slack
	// for Raft's own work meanwhile; a reader that trusted the length would
	// allocate 64 MiB.
	if perConn > 512<<10 {
		t.Errorf("%d KiB allocated per connection announcing a 64 MiB frame, want well under 1 MiB", perConn>>10)
	}

	// A peer that sends 1 MiB of its 64 MiB and stalls costs about what
	// it sent, not what it announced.
	partial := append(hdr[:len(hdr):len(hdr)], make([]byte, 1<<20)...)
	before = memStats()
	pc, err := dialProto(l.addr, time.Second, preamble(0, protoForward), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	announce(pc, partial)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := pc.Read(make([]byte, 1)); err == nil {
		t.Fatal("a stalled frame was answered")
	}
	grown := memStats().TotalAlloc - before.TotalAlloc
	t.Logf("a peer that sent 1 MiB of a 64 MiB frame: %d KiB allocated", grown>>10)
	// Doubling from 64 KiB to 2 MiB allocates 4 MiB in all.
	if grown > 6<<20 {
		t.Errorf("%d KiB allocated for a peer that sent 1 MiB, want about 4 MiB", grown>>10)
	}

	// The node still serves forwarded batches.
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	good := appendRequest(nil, ptr(allow(t, "k", 5, 1, 1)))
	if r, err := p.call(ctx, msgBatchV1, append([]byte{1}, good...)); err != nil || r.status != statusOK {
		t.Fatalf("a good batch after the attack: status %d, %v", r.status, err)
	}
}

// TestFrameTimeoutSparesIdleConnections: the deadline applies only once a
// frame has started; a persistent connection idles as long as it likes.
func TestFrameTimeoutSparesIdleConnections(t *testing.T) {
	const timeout = 300 * time.Millisecond
	c := newCluster(t, 1, func(cfg *Config) { cfg.FrameTimeout = timeout })
	l := c.leader()
	p, err := dialPeer(raft.ServerAddress(l.addr), 0, time.Second, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer p.close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	good := appendRequest(nil, ptr(allow(t, "k", 5, 1, 1)))
	for range 3 {
		if r, err := p.call(ctx, msgBatchV1, append([]byte{1}, good...)); err != nil || r.status != statusOK {
			t.Fatalf("batch: status %d, %v", r.status, err)
		}
		time.Sleep(3 * timeout) // idle well past the frame timeout
	}
	if p.isDead() {
		t.Fatal("an idle forward connection was closed")
	}
}

func memStats() runtime.MemStats {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m
}
