package server

import (
	"bufio"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"
)

// waitBlocked polls the parked clients' count (INFO's blocked_clients) until it is want or the deadline
// passes.
func waitBlocked(t *testing.T, srv *Server, want int64) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for srv.blocked.n.Load() != want {
		if time.Now().After(deadline) {
			t.Fatalf("blocked clients: %d, want %d", srv.blocked.n.Load(), want)
		}
		time.Sleep(time.Millisecond)
	}
}

func send(t *testing.T, c net.Conn, r *bufio.Reader, args ...string) string {
	t.Helper()
	if _, err := c.Write([]byte(encode(args...))); err != nil {
		t.Fatal(err)
	}
	return readReply(t, r)
}

// TestBlockingParks pins issue 35's blocking commands, which answered
// "ERR rlserver does not block clients" instead of waiting (Redis's
// unit/type/list and unit/type/zset failed 85 tests on it): a BLPOP on an
// empty list waits, counts in INFO's blocked_clients, and takes the
// element a later LPUSH adds before the pusher's reply is sent; LPUSH +
// DEL in one MULTI and a key turned into a string wake nobody; the first
// client parked is served first; timeouts answer a null array; CLIENT
// UNBLOCK ends a wait; a client that leaves while parked stops counting.
func TestBlockingParks(t *testing.T) {
	addr, srv := startServer(t, Config{})
	w, wr := dial(t, addr)
	b1, r1 := dial(t, addr)
	b2, r2 := dial(t, addr)

	b1.Write([]byte(encode("BLPOP", "l", "0")))
	waitBlocked(t, srv, 1)
	b2.Write([]byte(encode("BLPOP", "l", "0")))
	waitBlocked(t, srv, 2)
	if got := strings.Join([]string{
		send(t, w, wr, "MULTI"), send(t, w, wr, "LPUSH", "l", "a"), send(t, w, wr, "DEL", "l"), send(t, w, wr, "EXEC"),
		send(t, w, wr, "SET", "l", "x"), send(t, w, wr, "DEL", "l"),
	}, " "); got != "OK QUEUED QUEUED [:1 :1] OK :1" {
		t.Fatalf("writes: %s", got)
	}
	if n := srv.blocked.n.Load(); n != 2 {
		t.Fatalf("woken by an emptied or retyped key: %d parked", n)
	}
	// Once LPUSH has replied, the first client parked holds its element.
	if got := send(t, w, wr, "LPUSH", "l", "b"); got != ":1" {
		t.Fatalf("LPUSH: %s", got)
	}
	if got := send(t, w, wr, "LLEN", "l"); got != ":0" {
		t.Fatalf("LLEN after the push: %s", got)
	}
	if got := readReply(t, r1); got != "[l b]" {
		t.Fatalf("first parked: %s", got)
	}
	waitBlocked(t, srv, 1)
	// CLIENT UNBLOCK ... ERROR ends the second's wait with an error.
	id := send(t, b1, r1, "CLIENT", "ID")
	if got := send(t, w, wr, "CLIENT", "UNBLOCK", id[1:]); got != ":0" {
		t.Fatalf("CLIENT UNBLOCK of an unparked client: %s", got)
	}
	b2.Write([]byte(encode("CLIENT", "ID"))) // queued behind the BLPOP: run after it
	waitBlocked(t, srv, 1)
	srv.blocked.mu.Lock()
	parked := srv.blocked.list[0].id
	srv.blocked.mu.Unlock()
	if got := send(t, w, wr, "CLIENT", "UNBLOCK", strconv.FormatInt(parked, 10), "ERROR"); got != ":1" {
		t.Fatalf("CLIENT UNBLOCK: %s", got)
	}
	if got := readReply(t, r2); got != "-UNBLOCKED client unblocked via CLIENT UNBLOCK" {
		t.Fatalf("unblocked: %s", got)
	}
	if got := readReply(t, r2); !strings.HasPrefix(got, ":") {
		t.Fatalf("CLIENT ID after the wait: %s", got)
	}
	// A timeout: a null array; BLMOVE takes from one list into another.
	start := time.Now()
	b1.Write([]byte(encode("BZPOPMIN", "z", "0.05")))
	if got, err := r1.ReadString('\n'); err != nil || got != "*-1\r\n" {
		t.Fatalf("BZPOPMIN timeout: %q %v", got, err)
	}
	if time.Since(start) < 50*time.Millisecond {
		t.Fatal("BZPOPMIN did not wait")
	}
	b1.Write([]byte(encode("BLMOVE", "src", "dst", "LEFT", "RIGHT", "0")))
	waitBlocked(t, srv, 1)
	send(t, w, wr, "RPUSH", "src", "v")
	if got := readReply(t, r1); got != "v" {
		t.Fatalf("BLMOVE: %s", got)
	}
	if got := send(t, w, wr, "LRANGE", "dst", "0", "-1"); got != "[v]" {
		t.Fatalf("dst: %s", got)
	}
	// A parked client that leaves stops counting and takes nothing.
	b2.Write([]byte(encode("BLPOP", "gone", "0")))
	waitBlocked(t, srv, 1)
	b2.Close()
	waitBlocked(t, srv, 0)
	send(t, w, wr, "RPUSH", "gone", "x")
	if got := send(t, w, wr, "LLEN", "gone"); got != ":1" {
		t.Fatalf("a departed client took an element: LLEN %s", got)
	}
}
