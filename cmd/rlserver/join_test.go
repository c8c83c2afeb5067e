package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/resp"
)

// fakeMember answers each command by its name from replies (a RESP reply
// line; "+OK" when absent) and records the commands it got.
type fakeMember struct {
	ln      net.Listener
	replies map[string]string
	mu      sync.Mutex
	got     []string
}

func newFakeMember(t *testing.T, replies map[string]string) *fakeMember {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	m := &fakeMember{ln: ln, replies: replies}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go m.serve(c)
		}
	}()
	return m
}

func (m *fakeMember) serve(c net.Conn) {
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "*") {
			return
		}
		n, _ := strconv.Atoi(strings.TrimSpace(line[1:]))
		var args []string
		for range n {
			r.ReadString('\n') // $len
			a, _ := r.ReadString('\n')
			args = append(args, strings.TrimSuffix(a, "\r\n"))
		}
		m.mu.Lock()
		m.got = append(m.got, strings.Join(args, " "))
		m.mu.Unlock()
		reply, ok := m.replies[strings.ToUpper(args[0])]
		switch {
		case ok:
		case strings.EqualFold(args[0], "CLUSTER"):
			reply = "-ERR This instance has cluster support disabled" // one Raft group
		default:
			reply = "+OK"
		}
		c.Write([]byte(reply + "\r\n"))
	}
}

func (m *fakeMember) commands() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]string(nil), m.got...)
}

// TestJoinRefusals classifies a member's replies to PING, AUTH and
// RL.CLUSTER JOIN, written with the server's own error codes and texts:
// refusals only a change of configuration fixes are joinRefused, with the
// kind of refusal; anything else is retried.
func TestJoinRefusals(t *testing.T) {
	noPerm := "-" + command.ErrCodeNoPerm + " User app has no permissions to run the 'rl.cluster|join' command"
	for _, c := range []struct {
		name     string
		replies  map[string]string
		user     string
		password string
		want     error  // nil: joined, or not refused when text is set
		text     string // the error's text, when not refused
		sharded  bool   // the joining node runs with --groups
	}{
		{name: "joined", replies: map[string]string{"PING": "+PONG"}, password: "pw"},
		{name: "TLS-only member", replies: map[string]string{"PING": "-" + resp.TextNotTLS}, want: errJoinTLS},
		{name: "protected mode", replies: map[string]string{"PING": "-" + command.ErrCodeDenied + " rlserver is running in protected mode"}, want: errJoinForbidden},
		{name: "wrong password", replies: map[string]string{"AUTH": "-" + command.ErrCodeWrongPass + " invalid username-password pair or user is disabled."}, password: "x", want: errJoinCredentials},
		{name: "member without a password", replies: map[string]string{"AUTH": "-" + command.ErrTextNoPassSet}, password: "pw"},
		{name: "no password given", replies: map[string]string{"RL.CLUSTER": "-" + command.ErrCodeNoAuth + " Authentication required."}, want: errJoinCredentials},
		{name: "user may not join", replies: map[string]string{"RL.CLUSTER": noPerm}, user: "app", password: "pw", want: errJoinForbidden},
		{name: "standalone member", replies: map[string]string{"RL.CLUSTER": "-" + command.ErrTextNoCluster}, want: errJoinForbidden},
		{name: "no leader yet", replies: map[string]string{"RL.CLUSTER": "-CLUSTERDOWN no leader"}, text: "CLUSTERDOWN no leader"},
		{name: "other ERR", replies: map[string]string{"RL.CLUSTER": "-ERR something else"}, text: "ERR something else"},
		{name: "sharded member, one-group node", replies: map[string]string{"CLUSTER": "$40\r\n" + strings.Repeat("a", 40)}, want: errJoinMode},
		{name: "one-group member, sharded node", sharded: true, want: errJoinMode},
		{name: "sharded member and node", replies: map[string]string{"CLUSTER": "$40\r\n" + strings.Repeat("a", 40)}, sharded: true},
		// The id's line is read with it: the join's own refusal is seen.
		{name: "sharded member refuses the join", replies: map[string]string{"CLUSTER": "$40\r\n" + strings.Repeat("a", 40), "RL.CLUSTER": "-ERR no"}, sharded: true, text: "ERR no"},
	} {
		t.Run(c.name, func(t *testing.T) {
			m := newFakeMember(t, c.replies)
			err := join(context.Background(), joinTarget{Addr: m.ln.Addr().String(), User: c.user, Password: c.password, Sharded: c.sharded}, "n4", "10.0.0.4:7000")
			switch {
			case c.want != nil:
				if !errors.Is(err, c.want) || !joinRefused(err) {
					t.Errorf("join: %v, want %v", err, c.want)
				}
			case c.text != "":
				if err == nil || joinRefused(err) || err.Error() != c.text {
					t.Errorf("join: %v, want the unrefused error %q", err, c.text)
				}
			case err != nil:
				t.Errorf("join: %v", err)
			}
		})
	}
}

// TestJoinCommands pins what a join sends: PING, AUTH with the user when
// one is set, CLUSTER MYID (is the member sharded?), then RL.CLUSTER JOIN
// with this node's id and Raft address.
func TestJoinCommands(t *testing.T) {
	m := newFakeMember(t, map[string]string{"PING": "+PONG"})
	if err := join(context.Background(), joinTarget{Addr: m.ln.Addr().String(), User: "ops", Password: "pw"}, "n4", "10.0.0.4:7000"); err != nil {
		t.Fatal(err)
	}
	want := []string{"PING", "AUTH ops pw", "CLUSTER MYID", "RL.CLUSTER JOIN n4 10.0.0.4:7000"}
	if got := m.commands(); strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("sent %q, want %q", got, want)
	}
	m2 := newFakeMember(t, map[string]string{"PING": "+PONG"})
	if err := join(context.Background(), joinTarget{Addr: m2.ln.Addr().String()}, "n4", "10.0.0.4:7000"); err != nil {
		t.Fatal(err)
	}
	if got := m2.commands(); len(got) != 3 || got[2] != "RL.CLUSTER JOIN n4 10.0.0.4:7000" {
		t.Errorf("without a password, sent %q", got)
	}
}

// TestJoinTLSToPlainMember: a TLS join to a member that answers in plain
// text is refused as a TLS mismatch, not retried as a network error.
func TestJoinTLSToPlainMember(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		c.Write([]byte("-ERR Protocol error: unbalanced quotes in request\r\n"))
		bufio.NewReader(c).ReadString('\n')
	}()
	err = join(context.Background(), joinTarget{Addr: ln.Addr().String(), TLS: &tls.Config{ServerName: "member", MinVersion: tls.VersionTLS12}}, "n4", "r")
	if !errors.Is(err, errJoinTLS) || !strings.Contains(err.Error(), "does not speak TLS") {
		t.Errorf("join: %v, want %v (does not speak TLS)", err, errJoinTLS)
	}
}

// TestJoinUnreachable: a member that cannot be reached is retried.
func TestJoinUnreachable(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := join(context.Background(), joinTarget{Addr: addr}, "n4", "r"); err == nil || joinRefused(err) {
		t.Errorf("join to a closed port: %v, want an error that is retried", err)
	}
}
