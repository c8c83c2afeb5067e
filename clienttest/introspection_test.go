package clienttest

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Issue 16, points 4 and 5: CONFIG SET as Redis 7 (all or nothing,
// duplicates), CONFIG RESETSTAT, COMMAND LIST FILTERBY, CLIENT LIST/INFO's
// fields, CLIENT KILL, CLIENT NO-EVICT and CLIENT REPLY, compared with a
// real redis-server where one is installed.

// realRedis starts a redis-server on a free loopback port in a temp dir
// and returns its address; it is stopped at cleanup. Without redis-server
// the test is skipped, or fails under CI=true.
func realRedis(t *testing.T) string {
	t.Helper()
	path, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	port := freePort(t)
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	cmd := exec.Command(path, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		"--dir", t.TempDir(), "--logfile", "")
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() {
		cmd.Process.Kill()
		cmd.Wait()
	})
	c := redis.NewClient(&redis.Options{Addr: addr})
	defer c.Close()
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING")
		}
		time.Sleep(10 * time.Millisecond)
	}
	return addr
}

// errText runs a command and returns its error reply's text ("" when it
// succeeded).
func errText(c *redis.Client, args ...any) string {
	err := c.Do(context.Background(), args...).Err()
	if err == nil || err == redis.Nil {
		return ""
	}
	return err.Error()
}

func TestConfigSetAllOrNothing(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	before := configGet(t, c, "maxmemory")

	// A bad value later in the call leaves the earlier ones unapplied.
	want := "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: volatile-ttl, allkeys-lru, noeviction"
	if got := errText(c, "CONFIG", "SET", "maxmemory", "20000000", "maxmemory-policy", "bogus"); got != want {
		t.Errorf("bad policy: %q, want %q", got, want)
	}
	if got := configGet(t, c, "maxmemory"); got != before {
		t.Errorf("maxmemory = %s after a refused CONFIG SET, want %s (unchanged)", got, before)
	}
	// ...and so does a refused setting applied outside the edge (log
	// level), which is rolled back, and an immutable one.
	if got := errText(c, "CONFIG", "SET", "maxclients", "77", "loglevel", "bogus"); !strings.HasPrefix(got, "ERR CONFIG SET failed (possibly related to argument 'loglevel') - ") {
		t.Errorf("bad loglevel: %q", got)
	}
	if got := errText(c, "CONFIG", "SET", "loglevel", "debug", "port", "1"); got != "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config" {
		t.Errorf("immutable: %q", got)
	}
	if got := configGet(t, c, "loglevel"); got != "warn" {
		t.Errorf("loglevel = %q after a refused CONFIG SET, want warn (rolled back)", got)
	}
	if got := configGet(t, c, "maxclients"); got == "77" {
		t.Error("maxclients applied by a refused CONFIG SET")
	}
	// All good: all applied.
	if err := c.Do(context.Background(), "CONFIG", "SET", "maxmemory", "2mb", "maxclients", "77", "loglevel", "info").Err(); err != nil {
		t.Fatalf("CONFIG SET: %v", err)
	}
	for name, want := range map[string]string{"maxmemory": "2097152", "maxclients": "77", "loglevel": "info"} {
		if got := configGet(t, c, name); got != want {
			t.Errorf("%s = %q, want %q", name, got, want)
		}
	}

	// The texts Redis 7 gives, compared with a real redis-server.
	cases := [][]any{
		{"CONFIG", "SET", "maxmemory", "1", "maxmemory", "2"},
		{"CONFIG", "SET", "maxmemory", "1", "MAXMEMORY", "2"},
		{"CONFIG", "SET", "nosuch", "1"},
		{"CONFIG", "SET", "maxmemory", "bogus-value", "nosuch", "1"},
		{"CONFIG", "SET", "maxmemory", "1", "maxclients"},
		{"CONFIG", "SET", "maxmemory"},
	}
	wantTexts := []string{
		"ERR CONFIG SET failed (possibly related to argument 'maxmemory') - duplicate parameter",
		"ERR CONFIG SET failed (possibly related to argument 'MAXMEMORY') - duplicate parameter",
		"ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'",
		"ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'",
		"ERR syntax error",
		"ERR wrong number of arguments for 'config|set' command",
	}
	for i, args := range cases {
		if got := errText(c, args...); got != wantTexts[i] {
			t.Errorf("%v: %q, want %q", args, got, wantTexts[i])
		}
	}
	if got := configGet(t, c, "maxmemory"); got != "2097152" {
		t.Errorf("maxmemory = %s after refused calls, want 2097152", got)
	}
	r := redis.NewClient(&redis.Options{Addr: realRedis(t)})
	defer r.Close()
	for i, args := range cases {
		if got := errText(r, args...); got != wantTexts[i] {
			t.Errorf("redis-server %v: %q, want %q", args, got, wantTexts[i])
		}
	}
	if got := errText(r, "CONFIG", "SET", "maxmemory", "20000000", "maxmemory-policy", "bogus"); !strings.HasPrefix(got, "ERR CONFIG SET failed (possibly related to argument 'maxmemory-policy') - argument(s) must be one of the following: ") {
		t.Errorf("redis-server bad policy: %q", got)
	}
}

func TestConfigResetStat(t *testing.T) {
	t.Parallel()
	s, base := startWithMetrics(t, opts{})
	c := newGoRedis(t, s, nil)
	for range 40 {
		do(t, c, "RL.ALLOW", "k", "100", "1")
	}
	errText(c, "RL.ALLOW", "k", "x", "1")
	statAt := func(field string) int64 {
		n, err := strconv.ParseInt(infoField(t, c, "stats", field), 10, 64)
		if err != nil {
			t.Fatalf("INFO %s: %v", field, err)
		}
		return n
	}
	if statAt("total_commands_processed") < 41 || statAt("total_net_input_bytes") < 1600 || statAt("rl_allowed") != 40 || statAt("total_error_replies") < 1 {
		t.Fatalf("before RESETSTAT: INFO stats %s", c.Info(context.Background(), "stats").Val())
	}
	fams := scrape(t, base)
	metricBefore, _ := metricValue(fams, "rlserver_commands_total", "command", "rl.allow", "outcome", "allowed")

	if got := do(t, c, "CONFIG", "RESETSTAT"); got != "OK" {
		t.Fatalf("CONFIG RESETSTAT = %v, want OK", got)
	}
	for _, f := range []string{"rl_allowed", "total_error_replies", "total_connections_received", "rejected_connections"} {
		if n := statAt(f); n != 0 {
			t.Errorf("after RESETSTAT %s = %d, want 0", f, n)
		}
	}
	if n := statAt("total_commands_processed"); n > 10 {
		t.Errorf("after RESETSTAT total_commands_processed = %d, want the few since", n)
	}
	if n := statAt("total_net_input_bytes"); n > 600 {
		t.Errorf("after RESETSTAT total_net_input_bytes = %d, want the few since", n)
	}
	all := c.Info(context.Background(), "commandstats", "errorstats").Val()
	if strings.Contains(all, "cmdstat_rl.allow") || strings.Contains(all, "errorstat_") {
		t.Errorf("after RESETSTAT INFO commandstats/errorstats still count the earlier commands:\n%s", all)
	}
	do(t, c, "RL.ALLOW", "k", "100", "1")
	if n := statAt("rl_allowed"); n != 1 {
		t.Errorf("rl_allowed = %d after one decision since RESETSTAT, want 1", n)
	}
	if all := c.Info(context.Background(), "commandstats").Val(); !strings.Contains(all, "cmdstat_rl.allow:calls=1,") {
		t.Errorf("commandstats after one RL.ALLOW since RESETSTAT:\n%s", all)
	}
	// Prometheus counters never go backwards.
	metricAfter, ok := metricValue(scrape(t, base), "rlserver_commands_total", "command", "rl.allow", "outcome", "allowed")
	if !ok || metricBefore != 40 || metricAfter != 41 {
		t.Errorf("rlserver_commands_total{rl.allow,allowed}: %v before RESETSTAT, %v after one more (%v), want 40 then 41", metricBefore, metricAfter, ok)
	}
}

func TestCommandListFilterBy(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	list := func(c *redis.Client, args ...any) []string {
		t.Helper()
		v, err := c.Do(ctx, append([]any{"COMMAND", "LIST"}, args...)...).StringSlice()
		if err != nil {
			t.Fatalf("COMMAND LIST %v: %v", args, err)
		}
		return v
	}
	got := list(c, "FILTERBY", "PATTERN", "CLIENT*")
	for _, n := range []string{"client", "client|list", "client|kill", "client|info", "client|reply", "client|no-evict"} {
		if !slices.Contains(got, n) {
			t.Errorf("FILTERBY PATTERN CLIENT* lacks %s: %q", n, got)
		}
	}
	for _, n := range got {
		if !strings.HasPrefix(n, "client") {
			t.Errorf("FILTERBY PATTERN CLIENT* has %s", n)
		}
	}
	admin := list(c, "FILTERBY", "ACLCAT", "admin")
	if !slices.Contains(admin, "config|set") || !slices.Contains(admin, "client|kill") || slices.Contains(admin, "ping") || slices.Contains(admin, "rl.allow") {
		t.Errorf("FILTERBY ACLCAT admin: %q", admin)
	}
	if got := list(c, "FILTERBY", "ACLCAT", "nosuchcategory"); len(got) != 0 {
		t.Errorf("FILTERBY ACLCAT nosuchcategory: %q, want empty", got)
	}
	if got := list(c, "filterby", "module", "x"); len(got) != 0 {
		t.Errorf("FILTERBY MODULE x: %q, want empty", got)
	}
	bad := [][]any{
		{"COMMAND", "LIST", "FILTERBY", "BOGUS", "x"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN"},
		{"COMMAND", "LIST", "FILTERBY", "PATTERN", "a", "b"},
		{"COMMAND", "LIST", "x"},
	}
	r := redis.NewClient(&redis.Options{Addr: realRedis(t)})
	defer r.Close()
	for _, args := range bad {
		if got := errText(c, args...); got != "ERR syntax error" {
			t.Errorf("%v: %q, want ERR syntax error", args, got)
		}
		if got := errText(r, args...); got != "ERR syntax error" {
			t.Errorf("redis-server %v: %q, want ERR syntax error", args, got)
		}
	}
	if got := list(r, "FILTERBY", "MODULE", "x"); len(got) != 0 {
		t.Errorf("redis-server FILTERBY MODULE x: %q", got)
	}
	if got := list(r, "FILTERBY", "PATTERN", "CLIENT*"); !slices.Contains(got, "client|kill") {
		t.Errorf("redis-server FILTERBY PATTERN CLIENT*: %q", got)
	}
}

// fieldNames returns the names of a CLIENT INFO line's fields in order.
func fieldNames(line string) []string {
	var out []string
	for _, f := range strings.Fields(line) {
		name, _, _ := strings.Cut(f, "=")
		out = append(out, name)
	}
	return out
}

// isSubsequence reports whether sub's elements all appear in s in order.
func isSubsequence(sub, s []string) bool {
	i := 0
	for _, x := range s {
		if i < len(sub) && sub[i] == x {
			i++
		}
	}
	return i == len(sub)
}

func fields(line string) map[string]string {
	out := map[string]string{}
	for _, f := range strings.Fields(line) {
		k, v, _ := strings.Cut(f, "=")
		out[k] = v
	}
	return out
}

func TestClientInfoFields(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	c := newGoRedis(t, s, &redis.Options{Protocol: 2, DisableIdentity: true, PoolSize: 1})
	do(t, c, "CLIENT", "SETNAME", "worker-1")
	do(t, c, "CLIENT", "SETINFO", "LIB-NAME", "mylib")
	do(t, c, "CLIENT", "SETINFO", "LIB-VER", "1.2")
	do(t, c, "RL.ALLOW", "k", "10", "1")
	do(t, c, "CLIENT", "NO-EVICT", "on")
	info := c.ClientInfo(ctx)
	if info.Err() != nil {
		t.Fatalf("CLIENT INFO: %v", info.Err())
	}
	line, err := c.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatalf("CLIENT INFO: %v", err)
	}
	want := []string{"id", "addr", "laddr", "fd", "name", "age", "idle", "flags", "db", "sub", "psub", "ssub", "multi", "watch",
		"qbuf", "qbuf-free", "argv-mem", "multi-mem", "rbs", "rbp", "obl", "oll", "omem", "tot-mem", "events", "cmd", "user",
		"redir", "resp", "lib-name", "lib-ver", "tot-net-in", "tot-net-out", "tot-cmds"}
	if got := fieldNames(line); !slices.Equal(got, want) {
		t.Errorf("CLIENT INFO fields\n got %q\nwant %q", got, want)
	}
	f := fields(line)
	for k, v := range map[string]string{"name": "worker-1", "lib-name": "mylib", "lib-ver": "1.2", "cmd": "client|info",
		"user": "default", "resp": "2", "flags": "e", "db": "0", "multi": "-1", "redir": "-1"} {
		if f[k] != v {
			t.Errorf("CLIENT INFO %s=%q, want %q (%s)", k, f[k], v, line)
		}
	}
	if n, _ := strconv.Atoi(f["fd"]); n <= 2 {
		t.Errorf("CLIENT INFO fd=%s, want the socket's descriptor", f["fd"])
	}
	// The buffers of the client running CLIENT INFO, as redis-server shows
	// them: the query buffer holds its command (26 bytes of RESP), argv-mem
	// is its arguments' bytes, no reply is pending.
	for k, v := range map[string]string{"qbuf": "26", "argv-mem": "10", "obl": "0", "oll": "0", "omem": "0", "events": "r"} {
		if f[k] != v {
			t.Errorf("CLIENT INFO %s=%q, want %q (%s)", k, f[k], v, line)
		}
	}
	if free, tot := atoi(f["qbuf-free"]), atoi(f["tot-mem"]); free <= 0 || tot < 26+free {
		t.Errorf("CLIENT INFO qbuf-free=%d tot-mem=%d, want room left and at least the read buffer", free, tot)
	}
	if n, _ := strconv.Atoi(f["tot-cmds"]); n < 5 {
		t.Errorf("CLIENT INFO tot-cmds=%s, want at least the 5 commands before it", f["tot-cmds"])
	}
	if n, _ := strconv.Atoi(f["tot-net-in"]); n < 100 {
		t.Errorf("CLIENT INFO tot-net-in=%s, want the bytes of the commands before it", f["tot-net-in"])
	}
	if n, _ := strconv.Atoi(f["tot-net-out"]); n < 20 {
		t.Errorf("CLIENT INFO tot-net-out=%s, want the bytes of the replies before it", f["tot-net-out"])
	}

	// Redis's own fields, in Redis's order: every field redis-server
	// shows (Debian's 7.0 has fewer than 7.4) comes in rlserver's line, in
	// the same order.
	r := redis.NewClient(&redis.Options{Addr: realRedis(t), Protocol: 2, DisableIdentity: true})
	defer r.Close()
	rline, err := r.Do(ctx, "CLIENT", "INFO").Text()
	if err != nil {
		t.Fatalf("redis-server CLIENT INFO: %v", err)
	}
	rnames := fieldNames(rline)
	if got := fieldNames(line); !isSubsequence(rnames, got) {
		t.Errorf("CLIENT INFO fields differ from redis-server's\nrlserver %q\n   redis %q", got, rnames)
	}

	// CLIENT LIST TYPE and ID.
	other := newGoRedis(t, s, &redis.Options{PoolSize: 1})
	otherID := doInt(t, other, "CLIENT", "ID")
	myID := doInt(t, c, "CLIENT", "ID")
	listOf := func(args ...any) []string {
		t.Helper()
		v, err := c.Do(ctx, append([]any{"CLIENT", "LIST"}, args...)...).Text()
		if err != nil {
			t.Fatalf("CLIENT LIST %v: %v", args, err)
		}
		var ids []string
		for _, l := range strings.Split(strings.TrimSuffix(v, "\n"), "\n") {
			if l != "" {
				ids = append(ids, fields(l)["id"])
			}
		}
		return ids
	}
	my, oth := strconv.FormatInt(myID, 10), strconv.FormatInt(otherID, 10)
	if got := listOf("TYPE", "normal"); !slices.Contains(got, my) || !slices.Contains(got, oth) {
		t.Errorf("CLIENT LIST TYPE normal = %q, want %s and %s", got, my, oth)
	}
	for _, typ := range []string{"master", "replica", "pubsub"} {
		if got := listOf("TYPE", typ); len(got) != 0 {
			t.Errorf("CLIENT LIST TYPE %s = %q, want none", typ, got)
		}
	}
	if got := listOf("ID", oth, "999999", my); !slices.Equal(got, []string{oth, my}) {
		t.Errorf("CLIENT LIST ID %s 999999 %s = %q", oth, my, got)
	}
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CLIENT", "LIST", "TYPE", "bogus"}, "ERR Unknown client type 'bogus'"},
		{[]any{"CLIENT", "LIST", "TYPE"}, "ERR syntax error"},
		{[]any{"CLIENT", "LIST", "ID"}, "ERR syntax error"},
		{[]any{"CLIENT", "LIST", "ID", "abc"}, "ERR Invalid client ID"},
		{[]any{"CLIENT", "NO-EVICT", "maybe"}, "ERR syntax error"},
		{[]any{"CLIENT", "REPLY", "maybe"}, "ERR syntax error"},
	} {
		if got := errText(c, tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
		if got := errText(r, tc.args...); got != tc.want {
			t.Errorf("redis-server %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	if got := do(t, c, "CLIENT", "NO-EVICT", "off"); got != "OK" {
		t.Errorf("CLIENT NO-EVICT off = %v", got)
	}

	// A client part way through a large command: CLIENT LIST from another
	// connection shows the part received in its qbuf, and qbuf is 0 again
	// once the command is complete and answered.
	big := s.raw(t)
	big.send("*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n")
	bigID := strconv.FormatInt(big.read().num, 10)
	const bulk = 100_000
	head := "*2\r\n$4\r\nECHO\r\n$" + strconv.Itoa(bulk) + "\r\n"
	sent := head + strings.Repeat("x", bulk/2)
	big.send(sent)
	bigLine := func(want int) map[string]string {
		t.Helper()
		var line string
		for deadline := time.Now().Add(ioTimeout); ; time.Sleep(10 * time.Millisecond) {
			v, err := c.Do(ctx, "CLIENT", "LIST", "ID", bigID).Text()
			if err != nil {
				t.Fatalf("CLIENT LIST ID %s: %v", bigID, err)
			}
			line = strings.TrimSuffix(v, "\n")
			if atoi(fields(line)["qbuf"]) == want || time.Now().After(deadline) {
				break
			}
		}
		f := fields(line)
		if atoi(f["qbuf"]) != want {
			t.Fatalf("CLIENT LIST of a client %d bytes into a command: qbuf=%s, want %d (%s)", want, f["qbuf"], want, line)
		}
		return f
	}
	f = bigLine(len(sent))
	if free, tot := atoi(f["qbuf-free"]), atoi(f["tot-mem"]); free < 0 || tot < len(sent)+free {
		t.Errorf("partial command: qbuf-free=%d tot-mem=%d, want at least the %d bytes buffered", free, tot, len(sent))
	}
	if f["argv-mem"] != "0" || f["cmd"] != "client|id" {
		t.Errorf("partial command: argv-mem=%s cmd=%s, want 0 and the last command run (client|id)", f["argv-mem"], f["cmd"])
	}
	big.send(strings.Repeat("x", bulk-bulk/2) + "\r\n")
	if v := big.read(); len(v.str) != bulk {
		t.Fatalf("ECHO of %d bytes: got %d", bulk, len(v.str))
	}
	bigLine(0)
}

// atoi is strconv.Atoi's number, -1 for a string that is not one.
func atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		return -1
	}
	return n
}

func TestClientKill(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	ctx := context.Background()
	admin := newGoRedis(t, s, &redis.Options{PoolSize: 1})
	myID := doInt(t, admin, "CLIENT", "ID")

	// An idle victim, on a raw connection: killed by ID, its socket is
	// closed at once although it sends nothing.
	victim := s.raw(t)
	victim.send("*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n")
	id := victim.read().num
	wantInt(t, admin, 1, "CLIENT", "KILL", "ID", id)
	victim.expectEOF()
	if v, _ := admin.Do(ctx, "CLIENT", "LIST", "ID", id).Text(); v != "" {
		t.Errorf("CLIENT LIST ID %d after the kill: %q", id, v)
	}

	// The old form, by address: +OK, then "No such client".
	v2 := s.raw(t)
	v2.do("*1\r\n$4\r\nPING\r\n", "+PONG\r\n")
	addr := v2.c.LocalAddr().String()
	if got := do(t, admin, "CLIENT", "KILL", addr); got != "OK" {
		t.Errorf("CLIENT KILL %s = %v, want OK", addr, got)
	}
	v2.expectEOF()
	if got := errText(admin, "CLIENT", "KILL", addr); got != "ERR No such client" {
		t.Errorf("CLIENT KILL %s again: %q", addr, got)
	}

	// ADDR, LADDR, USER, MAXAGE filters; SKIPME yes spares the caller.
	v3 := s.raw(t)
	v3.do("*1\r\n$4\r\nPING\r\n", "+PONG\r\n")
	wantInt(t, admin, 0, "CLIENT", "KILL", "ADDR", "127.0.0.1:1")
	wantInt(t, admin, 0, "CLIENT", "KILL", "LADDR", "127.0.0.1:1")
	wantInt(t, admin, 0, "CLIENT", "KILL", "MAXAGE", 3600)
	wantInt(t, admin, 1, "CLIENT", "KILL", "ADDR", v3.c.LocalAddr().String(), "LADDR", s.addr, "USER", "default", "SKIPME", "yes")
	v3.expectEOF()
	v4 := s.raw(t)
	v4.do("*1\r\n$4\r\nPING\r\n", "+PONG\r\n")
	wantInt(t, admin, 1, "CLIENT", "KILL", "USER", "default") // v4, not the caller
	v4.expectEOF()
	if got := doInt(t, admin, "CLIENT", "ID"); got != myID {
		t.Errorf("the caller was killed: CLIENT ID %d, was %d", got, myID)
	}

	// SKIPME no kills the caller too, after its reply.
	self := s.raw(t)
	self.send("*2\r\n$6\r\nCLIENT\r\n$2\r\nID\r\n")
	selfID := strconv.FormatInt(self.read().num, 10)
	self.do("*6\r\n$6\r\nCLIENT\r\n$4\r\nKILL\r\n$2\r\nID\r\n$"+strconv.Itoa(len(selfID))+"\r\n"+selfID+"\r\n$6\r\nSKIPME\r\n$2\r\nno\r\n", ":1\r\n")
	self.expectEOF()

	// Error texts, compared with redis-server.
	r := redis.NewClient(&redis.Options{Addr: realRedis(t)})
	defer r.Close()
	for _, tc := range []struct {
		args []any
		want string
	}{
		{[]any{"CLIENT", "KILL", "1.2.3.4:5"}, "ERR No such client"},
		{[]any{"CLIENT", "KILL", "ID", "0"}, "ERR client-id should be greater than 0"},
		{[]any{"CLIENT", "KILL", "ID", "abc"}, "ERR client-id should be greater than 0"},
		{[]any{"CLIENT", "KILL", "USER", "nouser"}, "ERR No such user 'nouser'"},
		{[]any{"CLIENT", "KILL", "SKIPME", "maybe"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL", "ID", "1", "SKIPME"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL", "BOGUS", "1"}, "ERR syntax error"},
		{[]any{"CLIENT", "KILL", "TYPE", "bogus"}, "ERR Unknown client type 'bogus'"},
		{[]any{"CLIENT", "KILL"}, "ERR wrong number of arguments for 'client|kill' command"},
	} {
		if got := errText(admin, tc.args...); got != tc.want {
			t.Errorf("%v: %q, want %q", tc.args, got, tc.want)
		}
		if got := errText(r, tc.args...); got != tc.want {
			t.Errorf("redis-server %v: %q, want %q", tc.args, got, tc.want)
		}
	}
	// MAXAGE is Redis 7.4's (Debian's 7.0 calls it a syntax error).
	if got := errText(admin, "CLIENT", "KILL", "MAXAGE", "0"); got != "ERR maxage should be greater than 0" {
		t.Errorf("CLIENT KILL MAXAGE 0: %q", got)
	}
}

// clientReplyExchange sends CLIENT REPLY commands and others on one
// connection and returns everything it reads back.
func clientReplyExchange(t *testing.T, addr string) string {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	defer nc.Close()
	cmd := func(args ...string) string {
		var b strings.Builder
		b.WriteString("*" + strconv.Itoa(len(args)) + "\r\n")
		for _, a := range args {
			b.WriteString("$" + strconv.Itoa(len(a)) + "\r\n" + a + "\r\n")
		}
		return b.String()
	}
	script := cmd("PING", "a") +
		cmd("CLIENT", "REPLY", "OFF") + cmd("PING", "b") + cmd("NOSUCHCOMMAND") + cmd("CLIENT", "REPLY", "SKIP") + cmd("PING", "c") +
		cmd("CLIENT", "REPLY", "ON") + cmd("PING", "d") +
		cmd("CLIENT", "REPLY", "SKIP") + cmd("PING", "e") + cmd("PING", "f") +
		cmd("CLIENT", "REPLY", "SKIP") + cmd("CLIENT", "REPLY", "SKIP") + cmd("PING", "g") + cmd("PING", "h") +
		cmd("CLIENT", "REPLY", "SKIP") + cmd("GET") + cmd("PING", "i") +
		cmd("PING", "end")
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := nc.Write([]byte(script)); err != nil {
		t.Fatalf("write: %v", err)
	}
	want := "$3\r\nend\r\n"
	var got []byte
	buf := make([]byte, 4096)
	for !strings.HasSuffix(string(got), want) {
		n, err := nc.Read(buf)
		got = append(got, buf[:n]...)
		if err != nil {
			t.Fatalf("read: %v (after %q)", err, got)
		}
	}
	return string(got)
}

func TestClientReply(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	want := "$1\r\na\r\n" + "+OK\r\n$1\r\nd\r\n" + "$1\r\nf\r\n" + "$1\r\nh\r\n" + "$1\r\ni\r\n" + "$3\r\nend\r\n"
	if got := clientReplyExchange(t, s.addr); got != want {
		t.Errorf("rlserver:\n got %q\nwant %q", got, want)
	}
	if got := clientReplyExchange(t, realRedis(t)); got != want {
		t.Errorf("redis-server:\n got %q\nwant %q", got, want)
	}
	// A limiter command's reply (answered with its batch) is dropped too
	// while OFF.
	rc := s.raw(t)
	allow := "*4\r\n$8\r\nRL.ALLOW\r\n$1\r\nk\r\n$2\r\n10\r\n$5\r\n0.001\r\n"
	rc.do("*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$3\r\nOFF\r\n"+allow+allow+"*3\r\n$6\r\nCLIENT\r\n$5\r\nREPLY\r\n$2\r\nON\r\n"+allow,
		"+OK\r\n*4\r\n:1\r\n:7\r\n")
	// RESET turns replies back on and answers, as Redis's.
	for name, addr := range map[string]string{"rlserver": s.addr, "redis-server": realRedis(t)} {
		nc, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("dial %s: %v", addr, err)
		}
		rc := &rawConn{t: t, c: nc, r: bufio.NewReader(nc)}
		rc.do("CLIENT REPLY OFF\r\nPING x\r\nRESET\r\nPING\r\n", "+RESET\r\n+PONG\r\n")
		nc.Close()
		_ = name
	}
}
