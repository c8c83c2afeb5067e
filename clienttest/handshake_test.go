package clienttest

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
)

// The handshake and server commands real clients send, through go-redis
// (RESP3 and RESP2), rueidis and raw connections.

// helloWant is the HELLO reply for a connection, as value.String() renders it.
func helloWant(proto int, id int64) string {
	kind := "%"
	if proto == 2 {
		kind = "*"
	}
	return fmt.Sprintf(`%s["server" "rlserver" "version" %q "proto" :%d "id" :%d "mode" "standalone" "role" "master" "modules" *[]]`,
		kind, "7.4.0", proto, id)
}

// clientID asks a raw connection for its id.
func clientID(t *testing.T, rc *rawConn) int64 {
	t.Helper()
	rc.send("CLIENT ID\r\n")
	v := rc.read()
	if v.kind != ':' || v.num <= 0 {
		t.Fatalf("CLIENT ID = %v", v)
	}
	return v.num
}

func TestGoRedisHandshake(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	for _, proto := range []int{3, 2} {
		t.Run("RESP"+strconv.Itoa(proto), func(t *testing.T) {
			o := &redis.Options{}
			if proto == 2 {
				o.Protocol = 2 // the default is 3
			}
			c := newGoRedis(t, s, o)
			info, err := c.ClientInfo(ctx).Result()
			if err != nil {
				t.Fatalf("CLIENT INFO: %v", err)
			}
			if info.Resp != proto || !strings.HasPrefix(info.LibName, "go-redis(") || info.LibVer != redis.Version() ||
				info.Name != "" || info.DB != 0 || info.User != "default" || info.LastCmd != "client|info" {
				t.Errorf("CLIENT INFO = %+v", info)
			}
			id, err := c.ClientID(ctx).Result()
			if err != nil || id != info.ID {
				t.Errorf("CLIENT ID = %d, %v; CLIENT INFO says %d", id, err, info.ID)
			}
			// HELLO without a version keeps the protocol and replies in it.
			hello := do(t, c, "HELLO")
			want := []any{"server", "rlserver", "version", "7.4.0", "proto", int64(proto), "id", id,
				"mode", "standalone", "role", "master", "modules", []any{}}
			if proto == 3 {
				m := map[any]any{}
				for i := 0; i < len(want); i += 2 {
					m[want[i]] = want[i+1]
				}
				if fmt.Sprint(hello) != fmt.Sprint(m) {
					t.Errorf("HELLO = %#v, want %#v", hello, m)
				}
			} else if fmt.Sprint(hello) != fmt.Sprint(want) {
				t.Errorf("HELLO = %#v, want %#v", hello, want)
			}
			wantDecision(t, c, allowedAt(3, 1), "RL.ALLOW", "k"+strconv.Itoa(proto), 3, slowRate)
			if v, err := c.Ping(ctx).Result(); v != "PONG" || err != nil {
				t.Errorf("PING = %q, %v", v, err)
			}
			if v, err := c.Echo(ctx, "a\r\nb").Result(); v != "a\r\nb" || err != nil {
				t.Errorf("ECHO = %q, %v", v, err)
			}
			if _, err := c.ClientGetName(ctx).Result(); err != redis.Nil {
				t.Errorf("CLIENT GETNAME on an unnamed connection: %v, want nil", err)
			}

			// A name given to go-redis goes into HELLO ... SETNAME.
			o.ClientName = "app-" + strconv.Itoa(proto)
			named := newGoRedis(t, s, o)
			if v, err := named.ClientGetName(ctx).Result(); v != o.ClientName || err != nil {
				t.Errorf("CLIENT GETNAME = %q, %v; want %q", v, err, o.ClientName)
			}
			list, err := c.ClientList(ctx).Result()
			if err != nil || !strings.Contains(list, " name="+o.ClientName+" ") {
				t.Errorf("CLIENT LIST = %q, %v; want a client named %s", list, err, o.ClientName)
			}
		})
	}
}

func TestRueidis(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	for _, resp2 := range []bool{false, true} {
		c := newRueidis(t, s, rueidis.ClientOption{DisableCache: true, AlwaysRESP2: resp2, ClientName: "rue"})
		key := fmt.Sprint("rue-", resp2)
		for n := int64(1); n <= 3; n++ {
			got, err := c.Do(ctx, c.B().Arbitrary("RL.ALLOW").Keys(key).Args("3", slowRate).Build()).AsIntSlice()
			if err != nil || !allowedAt(3, n).match(got) {
				t.Errorf("RL.ALLOW = %v, %v; want %v", got, err, allowedAt(3, n))
			}
		}
		got, err := c.Do(ctx, c.B().Arbitrary("RL.PEEK").Keys(key).Args("3", slowRate).Build()).AsIntSlice()
		if err != nil || !deniedFull(3).match(got) {
			t.Errorf("RL.PEEK = %v, %v; want %v", got, err, deniedFull(3))
		}
		err = c.Do(ctx, c.B().Arbitrary("RL.ALLOW").Keys(key).Args("x", "1").Build()).Error()
		// rueidis drops the "ERR " prefix from error texts.
		if err == nil || err.Error() != "value is not an integer or out of range" {
			t.Errorf("RL.ALLOW with a bad capacity: %v", err)
		}
		info, err := c.Do(ctx, c.B().ClientInfo().Build()).ToString()
		wantResp := " resp=3"
		if resp2 {
			wantResp = " resp=2"
		}
		if err != nil || !strings.Contains(info, " name=rue ") || !strings.Contains(info, " lib-name=rueidis ") ||
			!strings.Contains(info, wantResp) {
			t.Errorf("CLIENT INFO = %q, %v", info, err)
		}
		n, err := c.Do(ctx, c.B().Exists().Key(key, key, "missing").Build()).AsInt64()
		if err != nil || n != 2 {
			t.Errorf("EXISTS = %d, %v; want 2", n, err)
		}
	}
}

// rueidis enables client-side caching by default, which needs CLIENT
// TRACKING (RESP3 invalidation pushes). rlserver has none, so such a client
// fails fast with rueidis.ErrNoCache, and DisableCache: true is required.
// When CLIENT TRACKING is implemented this test must be turned around.
func TestRueidisClientSideCachingNeedsClientTracking(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}})
	if err == nil {
		c.Close()
		t.Fatal("rueidis with client-side caching connected; CLIENT TRACKING must have been implemented: update this test")
	}
	if !errors.Is(err, rueidis.ErrNoCache) || !strings.Contains(err.Error(), "unknown subcommand 'TRACKING'. Try CLIENT HELP.") {
		t.Errorf("rueidis.NewClient: %v; want ErrNoCache after CLIENT TRACKING is refused", err)
	}
}

func TestHello(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	id := clientID(t, rc)

	for _, tc := range []struct{ send, want string }{
		{"HELLO\r\n", helloWant(2, id)},
		{"HELLO 3\r\n", helloWant(3, id)},
		{"HELLO\r\n", helloWant(3, id)},
		{"HELLO 2\r\n", helloWant(2, id)},
		{"hello 3 setname app\r\n", helloWant(3, id)},
		{"CLIENT GETNAME\r\n", `"app"`},
		{"HELLO 2 SETNAME other\r\n", helloWant(2, id)},
		{"CLIENT GETNAME\r\n", `"other"`},
		// Any password authenticates the default user when none is set.
		{"HELLO 3 AUTH default whatever SETNAME third\r\n", helloWant(3, id)},
		{"CLIENT GETNAME\r\n", `"third"`},
		{"HELLO 3 AUTH bob whatever\r\n", "-WRONGPASS invalid username-password pair or user is disabled."},
		{"HELLO 4\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO 1\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO 0\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO -3\r\n", "-NOPROTO unsupported protocol version"},
		{"HELLO abc\r\n", "-ERR Protocol version is not an integer or out of range"},
		{"HELLO 3 FOO\r\n", "-ERR Syntax error in HELLO option 'FOO'"},
		{"HELLO 3 AUTH default\r\n", "-ERR Syntax error in HELLO option 'AUTH'"},
		{"HELLO 3 SETNAME\r\n", "-ERR Syntax error in HELLO option 'SETNAME'"},
		{"HELLO 2 SETNAME \"a b\"\r\n", "-ERR Client names cannot contain spaces, newlines or special characters."},
		// A failed HELLO changes nothing: still RESP3, still named third.
		{"CLIENT GETNAME\r\n", `"third"`},
		{"CLIENT SETNAME \"\"\r\n", "+OK"},
		{"CLIENT GETNAME\r\n", "(nil)"},
	} {
		rc.send(tc.send)
		if got := rc.read().String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.send, got, tc.want)
		}
	}
	// The wire types: a RESP3 null and map, a RESP2 null bulk and array.
	rc.do("CLIENT GETNAME\r\n", "_\r\n")
	rc.do("HELLO 2\r\n", "*14\r\n$6\r\nserver\r\n$8\r\nrlserver\r\n")
	for range 12 { // the rest of the reply
		rc.read()
	}
	rc.do("CLIENT GETNAME\r\n", "$-1\r\n")
	rc.do("HELLO 3\r\n", "%7\r\n$6\r\nserver\r\n$8\r\nrlserver\r\n")
}

func TestAuth(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--requirepass", "secret"}, authPass: "secret"})
	ctx := context.Background()
	const (
		noAuth      = "-NOAUTH Authentication required."
		wrongPass   = "-WRONGPASS invalid username-password pair or user is disabled."
		helloNoAuth = "-NOAUTH HELLO must be called with the client already authenticated, otherwise the HELLO <proto> AUTH <user> <pass> option can be used to authenticate the client and select the RESP protocol version at the same time"
	)
	rc := s.raw(t)
	for _, tc := range []struct{ send, want string }{
		{"PING\r\n", noAuth},
		{"RL.ALLOW k 1 1\r\n", noAuth},
		{"DBSIZE\r\n", noAuth},
		{"CLIENT ID\r\n", noAuth},
		{"INFO\r\n", noAuth},
		// Unknown commands and wrong arity are reported first, as Redis does.
		{"FOO\r\n", "-ERR unknown command 'FOO', with args beginning with: "},
		{"RL.ALLOW k\r\n", "-ERR wrong number of arguments for 'rl.allow' command"},
		{"HELLO\r\n", helloNoAuth},
		{"HELLO 3\r\n", helloNoAuth},
		{"HELLO 3 SETNAME x\r\n", helloNoAuth},
		{"AUTH wrong\r\n", wrongPass},
		{"AUTH default wrong\r\n", wrongPass},
		{"AUTH bob secret\r\n", wrongPass},
		{"HELLO 3 AUTH default wrong\r\n", wrongPass},
		{"AUTH a b c\r\n", "-ERR syntax error"},
		{"PING\r\n", noAuth},
		{"AUTH secret\r\n", "+OK"},
		{"PING\r\n", "+PONG"},
		{"RL.ALLOW k 3 0.001\r\n", "*[:1 :2 :0 :1000000]"},
		{"AUTH wrong\r\n", wrongPass},
		{"PING\r\n", "+PONG"}, // a failed AUTH keeps the earlier one
		// RESET logs the connection out.
		{"RESET\r\n", "+RESET"},
		{"PING\r\n", noAuth},
		{"AUTH default secret\r\n", "+OK"},
		{"EXISTS k\r\n", ":1"},
	} {
		rc.send(tc.send)
		if got := rc.read().String(); got != tc.want {
			t.Errorf("%q = %s, want %s", tc.send, got, tc.want)
		}
	}
	// HELLO AUTH authenticates, switches protocol and names at once.
	h := s.raw(t)
	h.send("HELLO 3 AUTH default secret SETNAME app\r\n")
	v := h.read()
	if v.kind != '%' || v.mapOf()["proto"].num != 3 {
		t.Errorf("HELLO 3 AUTH = %v", v)
	}
	h.do("CLIENT GETNAME\r\n", "$3\r\napp\r\n")
	// QUIT needs no authentication.
	q := s.raw(t)
	q.do("QUIT\r\n", "+OK\r\n")
	q.expectEOF()

	// Five wrong passwords so far.
	admin := newGoRedis(t, s, &redis.Options{Password: "secret"})
	if got := infoField(t, admin, "stats", "acl_access_denied_auth"); got != "5" {
		t.Errorf("acl_access_denied_auth = %s, want 5", got)
	}

	// go-redis: Password goes into HELLO 3 AUTH (or HELLO 2 AUTH).
	for _, o := range []*redis.Options{
		{Password: "secret"},
		{Password: "secret", Protocol: 2},
		{Username: "default", Password: "secret"},
	} {
		c := newGoRedis(t, s, o)
		info, err := c.ClientInfo(ctx).Result()
		wantProto := 3
		if o.Protocol == 2 {
			wantProto = 2
		}
		if err != nil || info.Resp != wantProto {
			t.Errorf("%+v: CLIENT INFO = %+v, %v", o, info, err)
		}
		wantDecision(t, c, allowedAt(3, 2), "RL.PEEK", "k", 3, slowRate)
	}
	// Without a password go-redis falls back to RESP2 and the commands fail.
	c := newGoRedis(t, s, &redis.Options{MaxRetries: -1})
	if err := c.Ping(ctx).Err(); err == nil || err.Error() != noAuth[1:] {
		t.Errorf("PING without a password: %v, want %s", err, noAuth[1:])
	}
	// With a wrong one the connection is refused.
	c = newGoRedis(t, s, &redis.Options{Password: "nope", MaxRetries: -1})
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), wrongPass[1:]) {
		t.Errorf("PING with a wrong password: %v, want %s", err, wrongPass[1:])
	}
	// rueidis: HELLO 3 AUTH.
	rue := newRueidis(t, s, rueidis.ClientOption{DisableCache: true, Password: "secret"})
	if err := rue.Do(ctx, rue.B().Ping().Build()).Error(); err != nil {
		t.Errorf("rueidis PING: %v", err)
	}
	_, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: []string{s.addr}, DisableCache: true, Password: "nope"})
	if err == nil || err.Error() != wrongPass[1:] {
		t.Errorf("rueidis with a wrong password: %v, want %s", err, wrongPass[1:])
	}
}

func TestAuthWithoutRequirepass(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	rc.do("AUTH x\r\n", "-ERR AUTH <password> called without any password configured for the default user. Are you sure your configuration is correct?\r\n")
	rc.do("AUTH default x\r\n", "+OK\r\n")
	rc.do("AUTH bob x\r\n", "-WRONGPASS invalid username-password pair or user is disabled.\r\n")
	rc.do("PING\r\n", "+PONG\r\n")
	// go-redis sends AUTH-less HELLO when no password is configured.
	c := newGoRedis(t, s, &redis.Options{Password: "anything"})
	wantReply(t, c, "PONG", "PING")
}

var clientLine = regexp.MustCompile(`^id=(\d+) addr=(127\.0\.0\.1:\d+) laddr=(127\.0\.0\.1:\d+) fd=\d+ name=(\S*) age=\d+ idle=\d+ ` +
	`flags=N db=0 sub=0 psub=0 ssub=0 multi=-1 watch=0 qbuf=\d+ qbuf-free=\d+ argv-mem=\d+ multi-mem=0 rbs=0 rbp=0 obl=\d+ oll=0 omem=\d+ tot-mem=\d+ events=rw? ` +
	`cmd=(\S+) user=default redir=-1 resp=([23]) lib-name=(\S*) lib-ver=(\S*) tot-net-in=\d+ tot-net-out=\d+ tot-cmds=\d+$`)

func TestClientCommands(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	conns := make([]*rawConn, 3)
	ids := make([]int64, 3)
	for i := range conns {
		conns[i] = s.raw(t)
		ids[i] = clientID(t, conns[i])
		if i > 0 && ids[i] <= ids[i-1] {
			t.Errorf("client ids %v are not increasing", ids)
		}
		conns[i].do(fmt.Sprintf("CLIENT SETNAME c%d\r\n", i), "+OK\r\n")
	}
	a := conns[0]
	a.do("CLIENT GETNAME\r\n", "$2\r\nc0\r\n")
	a.do("CLIENT SETNAME \"a b\"\r\n", "-ERR Client names cannot contain spaces, newlines or special characters.\r\n")
	a.do("CLIENT SETINFO LIB-NAME mylib\r\n", "+OK\r\n")
	a.do("client setinfo lib-ver 1.0.1\r\n", "+OK\r\n")
	a.do("CLIENT SETINFO foo x\r\n", "-ERR Unrecognized option 'foo'\r\n")
	a.do("CLIENT SETINFO lib-name \"a b\"\r\n", "-ERR LIB-NAME cannot contain spaces, newlines or special characters.\r\n")
	a.do("CLIENT SETINFO lib-name\r\n", "-ERR wrong number of arguments for 'client|setinfo' command\r\n")
	a.do("CLIENT SETNAME\r\n", "-ERR wrong number of arguments for 'client|setname' command\r\n")
	a.do("CLIENT ID x\r\n", "-ERR wrong number of arguments for 'client|id' command\r\n")
	a.do("CLIENT\r\n", "-ERR wrong number of arguments for 'client' command\r\n")
	a.do("CLIENT FOO\r\n", "-ERR unknown subcommand 'FOO'. Try CLIENT HELP.\r\n")
	a.do("CLIENT LIST ID abc\r\n", "-ERR Invalid client ID\r\n")
	a.do("CLIENT LIST ID 0\r\n", "$0\r\n\r\n") // no such client, as Redis
	a.do("CLIENT LIST FOO\r\n", "-ERR syntax error\r\n")
	a.send("CLIENT HELP\r\n")
	if v := a.read(); v.kind != '*' || len(v.elems) < 2 || !strings.HasPrefix(v.elems[0].str, "CLIENT <subcommand>") {
		t.Errorf("CLIENT HELP = %v", v)
	}

	// CLIENT INFO describes this connection, in Redis's format.
	a.send("CLIENT INFO\r\n")
	info := a.read()
	m := clientLine.FindStringSubmatch(strings.TrimSuffix(info.str, "\n"))
	if info.kind != '$' || !strings.HasSuffix(info.str, "\n") || m == nil {
		t.Fatalf("CLIENT INFO = %v", info)
	}
	want := []string{strconv.FormatInt(ids[0], 10), a.c.LocalAddr().String(), s.addr, "c0", "client|info", "2", "mylib", "1.0.1"}
	if !slices.Equal(m[1:], want) {
		t.Errorf("CLIENT INFO fields %q, want %q", m[1:], want)
	}
	// In RESP3 it is a verbatim string.
	a.send("HELLO 3\r\n")
	a.read()
	a.send("CLIENT INFO\r\n")
	if v := a.read(); v.kind != '=' || !strings.Contains(v.str, " resp=3 ") || !strings.HasSuffix(v.str, "\n") {
		t.Errorf("CLIENT INFO in RESP3 = %v", v)
	}

	// CLIENT LIST has one line per connection, in id order.
	a.send("CLIENT LIST\r\n")
	var lines []string
	for _, l := range strings.Split(strings.TrimSuffix(a.read().str, "\n"), "\n") {
		m := clientLine.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("CLIENT LIST line %q", l)
		}
		lines = append(lines, m[1]+" "+m[2]+" "+m[4])
	}
	var wantLines []string
	for i, rc := range conns {
		wantLines = append(wantLines, fmt.Sprintf("%d %s c%d", ids[i], rc.c.LocalAddr(), i))
	}
	if !slices.Equal(lines, wantLines) {
		t.Errorf("CLIENT LIST = %q, want %q", lines, wantLines)
	}
	a.send(fmt.Sprintf("CLIENT LIST ID %d %d\r\n", ids[2], ids[0]))
	if got := strings.Count(a.read().str, "\n"); got != 2 {
		t.Errorf("CLIENT LIST ID: %d lines, want 2", got)
	}
	a.send("CLIENT LIST TYPE normal\r\n")
	if got := strings.Count(a.read().str, "\n"); got != 3 {
		t.Errorf("CLIENT LIST TYPE normal: %d lines, want 3", got)
	}
	a.send("CLIENT LIST TYPE pubsub\r\n")
	if got := a.read(); got.str != "" {
		t.Errorf("CLIENT LIST TYPE pubsub = %v, want empty", got)
	}
	// A closed connection leaves the list.
	conns[1].send("QUIT\r\n")
	conns[1].expect("+OK\r\n")
	conns[1].expectEOF()
	waitFor(t, "the closed client to leave CLIENT LIST", func() bool {
		a.send("CLIENT LIST\r\n")
		return strings.Count(a.read().str, "\n") == 2
	})
}

// waitFor polls cond until it holds, failing the test after ioTimeout.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(ioTimeout)
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		<-tick.C
	}
}

func TestSelect(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	rc.do("SELECT 0\r\n", "+OK\r\n")
	rc.do("SELECT 1\r\n", "-ERR DB index is out of range\r\n")
	rc.do("SELECT 16\r\n", "-ERR DB index is out of range\r\n")
	rc.do("SELECT x\r\n", "-ERR value is not an integer or out of range\r\n")
	rc.do("SELECT\r\n", "-ERR wrong number of arguments for 'select' command\r\n")
	c := newGoRedis(t, s, &redis.Options{DB: 1, MaxRetries: -1})
	if err := c.Ping(context.Background()).Err(); err == nil || !strings.Contains(err.Error(), "ERR DB index is out of range") {
		t.Errorf("go-redis with DB 1: %v, want ERR DB index is out of range", err)
	}
}

func TestCommand(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	required := []string{"auth", "client", "command", "config", "dbsize", "del", "echo", "exists", "flushall",
		"hello", "info", "ping", "pttl", "quit", "reset", "rl.allow", "rl.peek", "rl.reset", "select", "time",
		"ttl", "type", "unlink"}
	type keys struct {
		arity             int8
		first, last, step int8
		readOnly          bool
		flag              string
	}
	wantKeys := map[string]keys{
		"rl.allow": {-4, 1, 1, 1, false, "write"},
		"rl.peek":  {-4, 1, 1, 1, true, "readonly"},
		"rl.reset": {-2, 1, -1, 1, false, "write"},
		"del":      {-2, 1, -1, 1, false, "write"},
		"unlink":   {-2, 1, -1, 1, false, "write"},
		"exists":   {-2, 1, -1, 1, true, "readonly"},
		"pttl":     {2, 1, 1, 1, true, "readonly"},
		"ttl":      {2, 1, 1, 1, true, "readonly"},
		"type":     {2, 1, 1, 1, true, "readonly"},
		"ping":     {-1, 0, 0, 0, false, "fast"},
		"hello":    {-1, 0, 0, 0, false, "no_auth"},
		"client":   {-2, 0, 0, 0, false, ""},
	}
	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		// go-redis parses every entry.
		cmds, err := c.Command(ctx).Result()
		if err != nil {
			t.Fatalf("RESP%d: COMMAND: %v", proto, err)
		}
		names, err := c.Do(ctx, "COMMAND", "LIST").StringSlice()
		if err != nil {
			t.Fatalf("COMMAND LIST: %v", err)
		}
		count := doInt(t, c, "COMMAND", "COUNT")
		if int(count) != len(cmds) || len(names) != len(cmds) {
			t.Errorf("RESP%d: COMMAND has %d entries, COMMAND COUNT %d, COMMAND LIST %d", proto, len(cmds), count, len(names))
		}
		for _, n := range names {
			if cmds[n] == nil || cmds[n].Name != n {
				t.Errorf("RESP%d: COMMAND LIST has %q, COMMAND has %+v", proto, n, cmds[n])
			}
		}
		for _, n := range required {
			if !slices.Contains(names, n) {
				t.Errorf("RESP%d: COMMAND LIST lacks %q", proto, n)
			}
		}
		for name, w := range wantKeys {
			ci := cmds[name]
			if ci == nil {
				t.Errorf("RESP%d: COMMAND lacks %s", proto, name)
				continue
			}
			got := keys{ci.Arity, ci.FirstKeyPos, ci.LastKeyPos, ci.StepCount, ci.ReadOnly, w.flag}
			if got != w || (w.flag != "" && !slices.Contains(ci.Flags, w.flag)) {
				t.Errorf("RESP%d: COMMAND %s = %+v, want %+v", proto, name, ci, w)
			}
		}
		// COMMAND GETKEYS, as cluster-aware clients would use it.
		for _, tc := range []struct {
			args []any
			want []string
		}{
			{[]any{"rl.allow", "k", 1, 1}, []string{"k"}},
			{[]any{"RL.ALLOW", "k", 1, 1, 1}, []string{"k"}},
			{[]any{"rl.peek", "p", 1, 1}, []string{"p"}},
			{[]any{"del", "a", "b", "c"}, []string{"a", "b", "c"}},
			{[]any{"unlink", "a"}, []string{"a"}},
			{[]any{"exists", "a", "a", "b"}, []string{"a", "a", "b"}},
			{[]any{"rl.reset", "x", "y"}, []string{"x", "y"}},
			{[]any{"pttl", "t"}, []string{"t"}},
		} {
			got, err := c.CommandGetKeys(ctx, tc.args...).Result()
			if err != nil || !slices.Equal(got, tc.want) {
				t.Errorf("RESP%d: COMMAND GETKEYS %v = %q, %v; want %q", proto, tc.args, got, err, tc.want)
			}
		}
		wantErr(t, c, "ERR The command has no key arguments", "COMMAND", "GETKEYS", "ping")
		wantErr(t, c, "ERR Invalid command specified", "COMMAND", "GETKEYS", "xadd", "k")
		wantErr(t, c, "ERR Invalid number of arguments specified for command", "COMMAND", "GETKEYS", "rl.allow", "k")
		wantErr(t, c, "ERR wrong number of arguments for 'command|getkeys' command", "COMMAND", "GETKEYS")
		wantErr(t, c, "ERR unknown subcommand 'FOO'. Try COMMAND HELP.", "COMMAND", "FOO")
	}

	// COMMAND INFO and DOCS, raw, in both protocols.
	rc := s.raw(t)
	for _, proto := range []int{2, 3} {
		rc.send(fmt.Sprintf("HELLO %d\r\n", proto))
		rc.read()
		set, mp := "*", "*"
		if proto == 3 {
			set, mp = "~", "%"
		}
		rc.send("COMMAND INFO rl.allow nosuch DEL\r\n")
		v := rc.read()
		wantAllow := fmt.Sprintf(`*["rl.allow" :-4 %s[+write +denyoom +fast] :1 :1 :1 %s[+@write +@fast +@ratelimit] *[] `+
			`*[%s["flags" %s[+RW +update] "begin_search" %s["type" "index" "spec" %s["index" :1]] `+
			`"find_keys" %s["type" "range" "spec" %s["lastkey" :0 "keystep" :1 "limit" :0]]]] *[]]`,
			set, set, mp, set, mp, mp, mp, mp)
		wantDel := fmt.Sprintf(`*["del" :-2 %s[+write] :1 :-1 :1 %s[+@keyspace +@write +@slow] *[] `+
			`*[%s["flags" %s[+RM +delete] "begin_search" %s["type" "index" "spec" %s["index" :1]] `+
			`"find_keys" %s["type" "range" "spec" %s["lastkey" :-1 "keystep" :1 "limit" :0]]]] *[]]`,
			set, set, mp, set, mp, mp, mp, mp)
		if len(v.elems) != 3 || v.elems[0].String() != wantAllow || !v.elems[1].null || v.elems[2].String() != wantDel {
			t.Errorf("RESP%d: COMMAND INFO rl.allow nosuch DEL =\n%v\nwant\n%s\n(nil)\n%s", proto, v, wantAllow, wantDel)
		}
		rc.send("COMMAND INFO client\r\n")
		if v := rc.read(); len(v.elems) != 1 || len(v.elems[0].elems) != 10 || len(v.elems[0].elems[9].elems) < 6 {
			t.Errorf("RESP%d: COMMAND INFO client = %v, want its subcommands", proto, v)
		}
		rc.send("COMMAND DOCS rl.allow nosuch\r\n")
		v = rc.read()
		want := fmt.Sprintf(`%s["rl.allow" %s["summary" "Takes cost tokens from a token bucket if it has them. Replies [allowed, remaining, retry_after_ms, reset_after_ms]." "since" "0.1.0" "group" "ratelimit"]]`, mp, mp)
		if v.String() != want {
			t.Errorf("RESP%d: COMMAND DOCS = %v, want %s", proto, v, want)
		}
		rc.send("COMMAND DOCS\r\n")
		if v := rc.read(); len(v.elems) < 2*len(required) {
			t.Errorf("RESP%d: COMMAND DOCS has %d entries", proto, len(v.elems)/2)
		}
	}
}

// infoField reads one INFO field with go-redis's parser.
func infoField(t *testing.T, c *redis.Client, section, field string) string {
	t.Helper()
	m, err := c.InfoMap(context.Background(), section).Result()
	if err != nil {
		t.Fatalf("INFO %s: %v", section, err)
	}
	for _, fields := range m {
		if v, ok := fields[field]; ok {
			return v
		}
	}
	t.Fatalf("INFO %s has no %s: %v", section, field, m)
	return ""
}

func TestInfo(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	c := newGoRedis(t, s, nil)

	// Known traffic: 7 allowed, 6 denied; errors count as neither.
	for range 7 {
		do(t, c, "RL.ALLOW", "a", 5, slowRate) // 5 allowed, 2 denied
	}
	for range 3 {
		do(t, c, "RL.PEEK", "a", 5, slowRate) // denied
	}
	do(t, c, "RL.PEEK", "b", 5, slowRate)     // allowed
	do(t, c, "RL.ALLOW", "b", 5, slowRate, 6) // denied: cost > capacity
	do(t, c, "RL.ALLOW", "c", 5, slowRate)    // allowed
	wantErr(t, c, "ERR value is not a valid float", "RL.ALLOW", "d", 5, "x")
	wantErr(t, c, "ERR unknown command 'NOPE', with args beginning with: ", "NOPE")

	for _, proto := range []int{3, 2} {
		c := newGoRedis(t, s, &redis.Options{Protocol: proto})
		all, err := c.InfoMap(ctx).Result()
		if err != nil {
			t.Fatalf("INFO: %v", err)
		}
		for _, sec := range []string{"Server", "Clients", "Memory", "Stats", "Keyspace"} {
			if _, ok := all[sec]; !ok {
				t.Errorf("RESP%d: INFO lacks section %s: %v", proto, sec, all)
			}
		}
		for sec, fields := range map[string]map[string]string{
			"Server": {
				"redis_version": "7.4.0", "rlserver_version": testVersion, "redis_mode": "standalone",
				"process_id": strconv.Itoa(s.cmd.Process.Pid), "tcp_port": strconv.Itoa(s.port),
			},
			"Stats":    {"rl_allowed": "7", "rl_denied": "6", "acl_access_denied_auth": "0"},
			"Keyspace": {"db0": "keys=2,expires=2,avg_ttl=0"},
		} {
			for k, v := range fields {
				if got := all[sec][k]; got != v {
					t.Errorf("RESP%d: INFO %s %s = %q, want %q", proto, sec, k, got, v)
				}
			}
		}
		// Counters that other connections also move: lower bounds.
		for _, f := range []struct {
			sec, key string
			min      int
		}{
			{"Clients", "connected_clients", 2},
			{"Stats", "total_connections_received", 2},
			{"Stats", "total_commands_processed", 14},
			{"Stats", "total_error_replies", 2},
			{"Server", "uptime_in_seconds", 0},
		} {
			if n, err := strconv.Atoi(all[f.sec][f.key]); err != nil || n < f.min {
				t.Errorf("RESP%d: INFO %s = %q, want at least %d", proto, f.key, all[f.sec][f.key], f.min)
			}
		}
		// One section, several sections, none.
		m, err := c.InfoMap(ctx, "stats").Result()
		if err != nil || len(m) != 1 || m["Stats"]["rl_allowed"] != "7" {
			t.Errorf("RESP%d: INFO stats = %v, %v", proto, m, err)
		}
		m, err = c.InfoMap(ctx, "server", "KEYSPACE").Result()
		if err != nil || len(m) != 2 || m["Keyspace"]["db0"] == "" || m["Server"]["tcp_port"] == "" {
			t.Errorf("RESP%d: INFO server keyspace = %v, %v", proto, m, err)
		}
		for _, arg := range []string{"all", "everything", "default"} {
			m, err := c.InfoMap(ctx, arg).Result()
			want := len(all) // INFO alone is INFO default
			if arg != "default" {
				want++ // commandstats, left out of the default as in Redis
			}
			if err != nil || len(m) != want {
				t.Errorf("RESP%d: INFO %s = %v, %v; want %d sections of INFO", proto, arg, m, err, want)
			}
		}
		if v, err := c.Info(ctx, "nosuch").Result(); err != nil || v != "" {
			t.Errorf("RESP%d: INFO nosuch = %q, %v", proto, v, err)
		}
	}

	// The text itself: CRLF lines, a blank line between sections, a
	// verbatim string in RESP3.
	rc := s.raw(t)
	rc.send("INFO stats\r\n")
	v := rc.read()
	if v.kind != '$' || !strings.HasPrefix(v.str, "# Stats\r\ntotal_connections_received:") ||
		!strings.Contains(v.str, "\r\nrl_allowed:7\r\nrl_denied:6\r\n") || !strings.HasSuffix(v.str, "\r\n") {
		t.Errorf("INFO stats = %q", v.str)
	}
	rc.send("HELLO 3\r\nINFO clients keyspace\r\n")
	rc.read()
	v = rc.read()
	if v.kind != '=' || !regexp.MustCompile(`^# Clients\r\nconnected_clients:\d+\r\ncluster_connections:0\r\nmaxclients:10000\r\nblocked_clients:0\r\ntracking_clients:0\r\n\r\n# Keyspace\r\ndb0:keys=2,expires=2,avg_ttl=0\r\nrl_keys_gcra:2\r\n$`).MatchString(v.str) {
		t.Errorf("INFO clients keyspace = %c %q", v.kind, v.str)
	}
	// An empty keyspace has an empty section.
	wantReply(t, c, "OK", "FLUSHALL")
	if v, err := c.Info(ctx, "keyspace").Result(); err != nil || v != "# Keyspace\r\n" {
		t.Errorf("INFO keyspace on an empty server = %q, %v", v, err)
	}
}

func TestTime(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	got, err := c.Time(context.Background()).Result()
	if d := time.Since(got); err != nil || d < -time.Minute || d > time.Minute {
		t.Errorf("TIME = %v, %v; now is %v", got, err, time.Now())
	}
	rc := s.raw(t)
	rc.send("TIME\r\n")
	v := rc.read()
	if len(v.elems) != 2 || v.elems[0].kind != '$' || v.elems[1].kind != '$' {
		t.Fatalf("TIME = %v", v)
	}
	sec, err1 := strconv.ParseInt(v.elems[0].str, 10, 64)
	usec, err2 := strconv.ParseInt(v.elems[1].str, 10, 64)
	if err1 != nil || err2 != nil || usec < 0 || usec >= 1e6 || sec < time.Now().Unix()-60 || sec > time.Now().Unix()+60 {
		t.Errorf("TIME = %v", v)
	}
	rc.do("TIME x\r\n", "-ERR wrong number of arguments for 'time' command\r\n")
}

func TestQuit(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	rc.do("QUIT\r\n", "+OK\r\n")
	rc.expectEOF()
	// In a pipeline, what follows QUIT is not run.
	rc = s.raw(t)
	rc.do("PING\r\nRL.ALLOW q 5 0.001\r\nQUIT\r\nRL.ALLOW q 5 0.001\r\nPING\r\n",
		"+PONG\r\n*4\r\n:1\r\n:4\r\n:0\r\n:1000000\r\n+OK\r\n")
	rc.expectEOF()
	c := newGoRedis(t, s, nil)
	wantDecision(t, c, allowedAt(5, 2), "RL.ALLOW", "q", 5, slowRate)
}

func TestReset(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	rc := s.raw(t)
	id := clientID(t, rc)
	rc.send("HELLO 3 SETNAME app\r\n")
	rc.read()
	rc.do("RESET\r\n", "+RESET\r\n")
	rc.do("CLIENT GETNAME\r\n", "$-1\r\n")
	rc.send("CLIENT INFO\r\n")
	if v := rc.read(); v.kind != '$' || !strings.Contains(v.str, " name= ") || !strings.Contains(v.str, " resp=2 ") {
		t.Errorf("CLIENT INFO after RESET = %v", v)
	}
	if got := clientID(t, rc); got != id {
		t.Errorf("CLIENT ID after RESET = %d, want %d", got, id)
	}
	rc.do("RESET x\r\n", "-ERR wrong number of arguments for 'reset' command\r\n")
}

func TestConfigGet(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--shards", "3"}})
	ctx := context.Background()
	c := newGoRedis(t, s, nil)
	port := strconv.Itoa(s.port)
	for _, tc := range []struct {
		args []string
		want map[string]string
	}{
		{[]string{"port"}, map[string]string{"port": port}},
		{[]string{"PORT"}, map[string]string{"port": port}},
		{[]string{"*port*"}, map[string]string{"port": port}},
		{[]string{"nosuch"}, map[string]string{}},
		{[]string{"bind"}, map[string]string{"bind": "127.0.0.1"}},
		{[]string{"dir"}, map[string]string{"dir": s.dir}},
		{[]string{"databases"}, map[string]string{"databases": "1"}},
		{[]string{"shards"}, map[string]string{"shards": "3"}},
		{[]string{"loglevel"}, map[string]string{"loglevel": "warn"}},
	} {
		got, err := c.ConfigGet(ctx, tc.args[0]).Result()
		if err != nil || fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("CONFIG GET %v = %v, %v; want %v", tc.args, got, err, tc.want)
		}
	}
	// What redis-benchmark asks for, several patterns at once.
	wantReply(t, c, map[any]any{"save": "", "appendonly": "no"}, "CONFIG", "GET", "save", "appendonly")
	all, err := c.ConfigGet(ctx, "*").Result()
	if err != nil || len(all) < 9 || all["maxclients"] == "" || all["port"] != port {
		t.Errorf("CONFIG GET * = %v, %v", all, err)
	}
	rc := s.raw(t)
	rc.do("CONFIG GET port\r\n", fmt.Sprintf("*2\r\n$4\r\nport\r\n$%d\r\n%s\r\n", len(port), port))
	rc.send("HELLO 3\r\n")
	rc.read()
	rc.do("CONFIG GET port\r\n", fmt.Sprintf("%%1\r\n$4\r\nport\r\n$%d\r\n%s\r\n", len(port), port))
	rc.do("CONFIG GET\r\n", "-ERR wrong number of arguments for 'config|get' command\r\n")
	rc.do("CONFIG SET port 1\r\n", "-ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config\r\n")
	rc.do("CONFIG NOSUCH\r\n", "-ERR unknown subcommand 'NOSUCH'. Try CONFIG HELP.\r\n")
	rc.do("CONFIG\r\n", "-ERR wrong number of arguments for 'config' command\r\n")
}
