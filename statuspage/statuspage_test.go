package statuspage

import (
	"bufio"
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/server"
)

func TestRatesSeries(t *testing.T) {
	srv := server.New(server.Config{}, nil)
	p := New(Source{Server: srv, Version: "v"})
	t0 := p.last.at
	srv.Stats.Allowed.Add(30)
	srv.Stats.Denied.Add(10)
	p.tick(t0.Add(2 * time.Second))
	srv.Stats.Denied.Add(5)
	p.tick(t0.Add(3 * time.Second))
	st := p.Status(context.Background())
	if len(st.Series) != 2 || st.Series[0].Allowed != 15 || st.Series[0].Denied != 5 ||
		st.Series[1].Allowed != 0 || st.Series[1].Denied != 5 {
		t.Errorf("series %+v", st.Series)
	}
	if st.Totals.Allowed != 30 || st.Totals.Denied != 15 || st.Cluster != nil || st.Version != "v" {
		t.Errorf("status %+v", st)
	}
	for i := range History + 10 {
		p.tick(t0.Add(time.Duration(4+i) * time.Second))
	}
	if n := len(p.Status(context.Background()).Series); n != History {
		t.Errorf("%d points kept, want %d", n, History)
	}
}

// TestAskRole reads a leader's and a follower's ROLE replies from a fake
// member, with AUTH first.
func TestAskRole(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	replies := []string{
		"+OK\r\n*3\r\n$6\r\nmaster\r\n:42\r\n*1\r\n*3\r\n$9\r\n127.0.0.1\r\n$4\r\n7001\r\n$1\r\n0\r\n",
		"+OK\r\n*5\r\n$5\r\nslave\r\n$9\r\n127.0.0.1\r\n:7000\r\n$9\r\nconnected\r\n:41\r\n",
	}
	go func() {
		for _, r := range replies {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			br := bufio.NewReader(c)
			for range 2 { // AUTH and ROLE, each a 2- or 1-element array
				line, _ := br.ReadString('\n')
				n := int(line[1] - '0')
				for range 2 * n {
					br.ReadString('\n')
				}
			}
			c.Write([]byte(r))
			c.Close()
		}
	}()
	for _, want := range []struct {
		role    string
		applied uint64
	}{{"leader", 42}, {"follower", 41}} {
		role, applied, err := askRole(context.Background(), ln.Addr().String(), "pw")
		if err != nil || role != want.role || applied != want.applied {
			t.Errorf("askRole = %q %d %v, want %q %d", role, applied, err, want.role, want.applied)
		}
	}
	if _, _, err := askRole(context.Background(), "", ""); err == nil || !strings.Contains(err.Error(), "no client address") {
		t.Errorf("askRole without an address: %v", err)
	}
}
