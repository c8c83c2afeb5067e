package server

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"testing"

	"github.com/rlserver/rlserver/acl"
	"github.com/rlserver/rlserver/command"
)

func sha(s string) string {
	h := sha256.Sum256([]byte(s))
	return hex.EncodeToString(h[:])
}

func aclList(a *acl.ACL) []string {
	var out []string
	for _, n := range a.Names() {
		out = append(out, a.User(n).Describe())
	}
	return out
}

const appACL = `
# an application: limiter commands only
user app on >app-pw ~* +@ratelimit +@connection -@dangerous
# an operator
user ops on >ops-pw ~* &* +@all
user off-user off >pw +@all ~*
user tenant on >t-pw ~tenant1:* %R~shared:* +@all
user cfg on >c-pw +config|get +acl|whoami
user default on >default-pw +@all ~*
`

func startACLServer(t testing.TB) (string, *Server) {
	t.Helper()
	a, err := ParseACL([]byte(appACL), "")
	if err != nil {
		t.Fatal(err)
	}
	return startServer(t, Config{ACL: a, Settings: map[string]string{"port": "1"}})
}

// exchange sends the commands as one pipeline and checks the replies; a
// wanted reply ending in * is a prefix (for fields that count down).
func exchange(t *testing.T, addr string, steps ...[2]string) {
	t.Helper()
	c, r := dial(t, addr)
	var req strings.Builder
	for _, s := range steps {
		req.WriteString(encode(strings.Fields(s[0])...))
	}
	io.WriteString(c, req.String())
	for i, s := range steps {
		got := readReply(t, r)
		if want, ok := strings.CutSuffix(s[1], "*"); ok && strings.HasPrefix(got, want) {
			continue
		}
		if got != s[1] {
			t.Errorf("%d: %s = %q, want %q", i, s[0], got, s[1])
		}
	}
}

func TestACLApplicationUser(t *testing.T) {
	addr, srv := startACLServer(t)
	exchange(t, addr,
		[2]string{"PING", "-NOAUTH Authentication required."},
		[2]string{"AUTH app wrong", "-WRONGPASS invalid username-password pair or user is disabled."},
		[2]string{"AUTH app app-pw", "OK"},
		[2]string{"ACL WHOAMI", "-NOPERM User app has no permissions to run the 'acl|whoami' command"},
		[2]string{"RL.ALLOW k 1 0.001", "[:1 :0 :0 :1000000]"},
		[2]string{"FLUSHALL", "-NOPERM User app has no permissions to run the 'flushall' command"},
		[2]string{"RL.ALLOW k 1 0.001", "[:0 :0 :*"},
		[2]string{"SHUTDOWN", "-NOPERM User app has no permissions to run the 'shutdown' command"},
		[2]string{"CONFIG GET port", "-NOPERM User app has no permissions to run the 'config|get' command"},
		[2]string{"RL.CLUSTER JOIN n2 127.0.0.1:7001", "-NOPERM User app has no permissions to run the 'rl.cluster|join' command"},
		[2]string{"RL.CLUSTER REMOVE n2", "-NOPERM User app has no permissions to run the 'rl.cluster|remove' command"},
		[2]string{"CONFIG HELP", "-NOPERM User app has no permissions to run the 'config' command"},
		[2]string{"CLIENT LIST", "-NOPERM User app has no permissions to run the 'client|list' command"},
		[2]string{"DEL k", "-NOPERM User app has no permissions to run the 'del' command"},
		[2]string{"RL.PEEK k 1 0.001", "[:0 :0 :*"},
		[2]string{"RL.RESET k", ":1"},
		[2]string{"CL.THROTTLE k 0 1 1000", "[:0 :1 :0 :-1 :1000]"},
		[2]string{"CLIENT SETNAME a", "OK"},
		[2]string{"PING", "PONG"},
	)
	if n := srv.Stats.ACLDeniedCmd.Load(); n != 9 {
		t.Errorf("ACLDeniedCmd = %d, want 9", n)
	}
	if n := srv.Stats.AuthFailures.Load(); n != 1 {
		t.Errorf("AuthFailures = %d, want 1", n)
	}
	if n, _ := srv.backend.Len(t.Context()); n != 1 {
		t.Errorf("keys = %d after a refused FLUSHALL, want 1", n)
	}
}

func TestACLAuthForms(t *testing.T) {
	addr, _ := startACLServer(t)
	exchange(t, addr,
		[2]string{"AUTH default-pw", "OK"}, // AUTH <password>: the default user
		[2]string{"ACL WHOAMI", "default"},
		[2]string{"AUTH off-user pw", "-WRONGPASS invalid username-password pair or user is disabled."},
		[2]string{"ACL WHOAMI", "default"}, // a failed AUTH keeps the user
		[2]string{"AUTH nobody pw", "-WRONGPASS invalid username-password pair or user is disabled."},
		[2]string{"AUTH ops ops-pw", "OK"},
		[2]string{"ACL WHOAMI", "ops"},
		[2]string{"RESET", "RESET"},
		[2]string{"ACL WHOAMI", "-NOAUTH Authentication required."},
		[2]string{"HELLO 2 AUTH cfg c-pw", "[server rlserver version " + redisVersion + " proto :2 id :1 mode standalone role master modules []]"},
		[2]string{"ACL WHOAMI", "cfg"},
		[2]string{"CONFIG GET port", "[port 1]"},
		[2]string{"CONFIG HELP", "-NOPERM User cfg has no permissions to run the 'config' command"},
		[2]string{"HELLO 2 AUTH app nope", "-WRONGPASS invalid username-password pair or user is disabled."},
		[2]string{"ACL WHOAMI", "cfg"},
	)
}

func TestACLKeyPatterns(t *testing.T) {
	addr, srv := startACLServer(t)
	exchange(t, addr,
		[2]string{"AUTH tenant t-pw", "OK"},
		[2]string{"RL.ALLOW tenant1:a 5 0.001", "[:1 :4 :0 :1000000]"},
		[2]string{"RL.ALLOW tenant2:a 5 0.001", "-NOPERM No permissions to access a key"},
		[2]string{"RL.PEEK shared:x 5 0.001", "[:1 :4 :0 :1000000]"},
		[2]string{"RL.ALLOW shared:x 5 0.001", "-NOPERM No permissions to access a key"}, // read-only pattern
		[2]string{"EXISTS tenant1:a shared:x", ":1"},
		[2]string{"EXISTS tenant1:a other", "-NOPERM No permissions to access a key"},
		[2]string{"DEL shared:x", "-NOPERM No permissions to access a key"},
		[2]string{"DEL tenant1:a", ":1"},
		[2]string{"DBSIZE", ":0"},
	)
	if n := srv.Stats.ACLDeniedKey.Load(); n != 4 {
		t.Errorf("ACLDeniedKey = %d, want 4", n)
	}
}

func TestACLCommands(t *testing.T) {
	addr, _ := startACLServer(t)
	exchange(t, addr,
		[2]string{"AUTH ops ops-pw", "OK"},
		[2]string{"ACL USERS", "[app cfg default off-user ops tenant]"},
		[2]string{"ACL CAT", "[" + strings.Join(acl.Categories(), " ") + "]"},
		[2]string{"ACL CAT nope", "-ERR Unknown category 'nope'"},
		[2]string{"ACL CAT a b", "-ERR wrong number of arguments for 'acl|cat' command"},
		[2]string{"ACL SETUSER x", "-ERR unknown subcommand 'SETUSER'. Try ACL HELP."},
		[2]string{"ACL LIST", "[user app on #" + sha("app-pw") + " ~* resetchannels -@all +@ratelimit +@connection -@dangerous " +
			"user cfg on #" + sha("c-pw") + " resetchannels -@all +config|get +acl|whoami " +
			"user default on #" + sha("default-pw") + " ~* resetchannels +@all " +
			"user off-user off #" + sha("pw") + " ~* resetchannels +@all " +
			"user ops on #" + sha("ops-pw") + " ~* &* +@all " +
			"user tenant on #" + sha("t-pw") + " ~tenant1:* %R~shared:* resetchannels +@all]"},
	)
	// ACL CAT lists a category's commands, subcommands as container|sub
	// and without containers.
	c, r := dial(t, addr)
	io.WriteString(c, encode("AUTH", "ops", "ops-pw")+encode("ACL", "CAT", "ratelimit")+encode("ACL", "CAT", "@dangerous"))
	readReply(t, r)
	for _, tc := range []struct{ in, out []string }{
		{in: []string{"rl.allow", "rl.peek", "rl.reset", "cl.throttle", "gcra"}, out: []string{"flushall", "del", "ping"}},
		{in: []string{"flushall", "shutdown", "config|get", "rl.cluster|join", "client|list", "acl|list"}, out: []string{"rl.allow", "config", "ping"}},
	} {
		got := strings.Fields(strings.Trim(readReply(t, r), "[]"))
		for _, n := range tc.in {
			if !slices.Contains(got, n) {
				t.Errorf("ACL CAT %v lacks %s", got, n)
			}
		}
		for _, n := range tc.out {
			if slices.Contains(got, n) {
				t.Errorf("ACL CAT %v has %s", got, n)
			}
		}
	}
}

func TestDefaultACLFromRequirePass(t *testing.T) {
	addr, _ := startServer(t, Config{RequirePass: "pw"})
	exchange(t, addr,
		[2]string{"AUTH default pw", "OK"},
		[2]string{"ACL WHOAMI", "default"},
		[2]string{"ACL LIST", "[user default on #" + sha("pw") + " ~* &* +@all]"},
		[2]string{"AUTH other pw", "-WRONGPASS invalid username-password pair or user is disabled."},
	)
	addr, _ = startServer(t, Config{})
	exchange(t, addr,
		[2]string{"ACL WHOAMI", "default"},
		[2]string{"AUTH x", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?"},
		[2]string{"AUTH default anything", "OK"}, // nopass: any password
	)
}

// TestDefaultUserOffRequiresAuth: a default user that is off means every
// connection must AUTH as someone, with the tighter pre-auth limits.
func TestDefaultUserOffRequiresAuth(t *testing.T) {
	a, err := ParseACL([]byte("user default off nopass\nuser a on nopass +@all ~*"), "")
	if err != nil {
		t.Fatal(err)
	}
	addr, srv := startServer(t, Config{ACL: a})
	if srv.openAuth {
		t.Fatal("default user off, yet connections start authenticated")
	}
	exchange(t, addr,
		[2]string{"PING", "-NOAUTH Authentication required."},
		[2]string{"AUTH default x", "-WRONGPASS invalid username-password pair or user is disabled."},
		[2]string{"AUTH a whatever", "OK"},
		[2]string{"PING", "PONG"},
	)
}

// BenchmarkACLCheck is the per-command permission check of process for
// RL.ALLOW: a user with every command and key, one limited to categories,
// and one whose keys must match a pattern.
func BenchmarkACLCheck(b *testing.B) {
	a, err := ParseACL([]byte(appACL), "")
	if err != nil {
		b.Fatal(err)
	}
	s := New(Config{ACL: a}, nil)
	cmd := command.ByName("rl.allow")
	args := [][]byte{[]byte("RL.ALLOW"), []byte("tenant1:user:12345"), []byte("100"), []byte("10")}
	c := &client{}
	for _, name := range []string{"ops", "app", "tenant"} {
		u := s.acl.users[name]
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if s.checkACL(c, u, cmd, args) != "" {
					b.Fatal("denied")
				}
			}
		})
	}
}

// BenchmarkPipelineAllowUser is RL.ALLOW pipelined (32 per batch, one
// connection) as the default user with every permission and as an
// application user checked against its bitmap and key patterns: the
// difference is the cost of the check in place, with everything else
// that serving a command does.
func BenchmarkPipelineAllowUser(b *testing.B) {
	a, err := ParseACL([]byte(appACL), "")
	if err != nil {
		b.Fatal(err)
	}
	for _, tc := range []struct{ name, auth string }{
		{"default", "default-pw"}, {"app", "app app-pw"}, {"tenant", "tenant t-pw"},
	} {
		b.Run(tc.name, func(b *testing.B) {
			addr, _ := startServer(b, Config{ACL: a})
			c, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			r := bufio.NewReaderSize(c, 1<<20)
			io.WriteString(c, encode(append([]string{"AUTH"}, strings.Fields(tc.auth)...)...))
			if line, _ := r.ReadString('\n'); line != "+OK\r\n" {
				b.Fatalf("AUTH: %q", line)
			}
			var pl strings.Builder
			const depth = 32
			for i := range depth {
				pl.WriteString(encode("RL.ALLOW", fmt.Sprintf("tenant1:%06d", i), "1000000", "1000"))
			}
			req := []byte(pl.String())
			b.ReportAllocs()
			for b.Loop() {
				c.Write(req)
				for range 5 * depth { // each reply: an array header and 4 integers
					if _, err := r.ReadSlice('\n'); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*depth), "ns/cmd")
		})
	}
}

// FuzzParseACL: no file makes ParseACL panic, and a file it accepts
// describes users whose ACL LIST lines parse back to the same lines.
func FuzzParseACL(f *testing.F) {
	f.Add([]byte(appACL), "")
	f.Add([]byte("user a on >p ~x* %R~y +@all -config|get &c\nuser default off"), "pw")
	f.Add([]byte("user \"a\" '>b c' \"\\x41\""), "")
	f.Fuzz(func(t *testing.T, src []byte, pass string) {
		a, err := ParseACL(src, pass)
		if err != nil {
			return
		}
		list := strings.Join(aclList(a), "\n")
		b, err := ParseACL([]byte(list), "")
		if err != nil {
			t.Fatalf("ACL LIST does not parse back: %v\n%s", err, list)
		}
		if again := strings.Join(aclList(b), "\n"); again != list {
			t.Fatalf("ACL LIST changes on a round trip:\n%s\n%s", list, again)
		}
		ca, cb := compileACL(a), compileACL(b)
		for _, n := range ca.names {
			if !slices.Equal(ca.users[n].allowed, cb.users[n].allowed) {
				t.Fatalf("user %s: permissions change on a round trip", n)
			}
		}
	})
}
