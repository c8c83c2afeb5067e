package clienttest

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// Start-up as a new user meets it (issue 16): the documented config file,
// one process per data folder, the pid file, the listen error, --help and
// --healthcheck's messages, and a refused policy file's text.

// docBlock returns the first fenced block after heading in a file of docs/.
func docBlock(t *testing.T, file, heading string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "docs", file))
	if err != nil {
		t.Fatal(err)
	}
	s := string(b)
	i := strings.Index(s, "\n"+heading+"\n")
	if i < 0 {
		t.Fatalf("docs/%s has no %q", file, heading)
	}
	s = s[i:]
	start := strings.Index(s, "\n```")
	if start < 0 {
		t.Fatalf("docs/%s: no code block after %q", file, heading)
	}
	s = s[start+4:]
	s = s[strings.Index(s, "\n")+1:]
	end := strings.Index(s, "```")
	if end < 0 {
		t.Fatalf("docs/%s: unclosed code block after %q", file, heading)
	}
	return s[:end]
}

// TestDocsConfigExampleRuns: docs/operations.md's example config file,
// as printed, starts the real binary and every line takes effect.
// Regression: "protected-mode no  # comment" stopped the start, and
// 'requirepass "s3cret"  # comment' made the password the whole text.
func TestDocsConfigExampleRuns(t *testing.T) {
	example := docBlock(t, "operations.md", "## Configuration")
	conf := filepath.Join(t.TempDir(), "rlserver.conf")
	if err := os.WriteFile(conf, []byte(example), 0o644); err != nil {
		t.Fatal(err)
	}
	// What each setting of the example must read back as. addr and
	// metrics-addr are overridden by flags (never 6379 or 9121 in a test),
	// after the file was parsed.
	want := map[string]string{
		"addr":           "",
		"metrics-addr":   "",
		"log-format":     "json",
		"maxclients":     "20000",
		"protected-mode": "no",
		"requirepass":    "", // not shown by CONFIG GET: checked with AUTH
	}
	for _, line := range strings.Split(example, "\n") {
		f := strings.Fields(line)
		if len(f) == 0 || strings.HasPrefix(f[0], "#") {
			continue
		}
		if _, ok := want[f[0]]; !ok {
			t.Errorf("the example sets %q, which this test does not check: add it", f[0])
		}
	}
	metrics := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	s := start(t, opts{args: []string{"--config", conf, "--metrics-addr", metrics}, authPass: "s3cret"})
	c := newGoRedis(t, s, &redis.Options{Password: "s3cret"})
	for name, v := range want {
		if v == "" {
			continue
		}
		if got := configGet(t, c, name); got != v {
			t.Errorf("CONFIG GET %s = %q, want %q (from the docs' example)", name, got, v)
		}
	}
	if code, _ := httpGet(t, "http://"+metrics+"/healthz"); code != 200 {
		t.Errorf("GET /healthz on %s: %d", metrics, code)
	}
	// The password is s3cret, not "s3cret" with its quotes or comment.
	other := newGoRedis(t, s, nil)
	wantErr(t, other, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", `"s3cret"     # double quotes are optional`)
	wantErr(t, other, "WRONGPASS invalid username-password pair or user is disabled.", "AUTH", `"s3cret"`)
	wantReply(t, other, "OK", "AUTH", "s3cret")
}

// TestConfigFileRefusedLines: a line with the wrong number of arguments or
// unbalanced quotes stops the start, naming the file and the line; a
// missing --config file is named.
func TestConfigFileRefusedLines(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	free := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	for i, tc := range []struct{ body, want string }{
		{"maxclients 5\nrequirepass s3cret oops\n", "line 2: wrong number of arguments: requirepass takes one value, the line has 2 (quote a value that holds blanks or starts with '#')"},
		{"maxclients\n", "line 1: wrong number of arguments: maxclients takes one value, the line has 0 (quote a value that holds blanks or starts with '#')"},
		{"# x\nrequirepass \"s3cret\n", "line 2: unbalanced quotes in configuration line"},
		{"requirepass \"s3\"cret\n", "line 1: unbalanced quotes in configuration line"},
	} {
		conf := filepath.Join(dir, fmt.Sprintf("c%d.conf", i))
		os.WriteFile(conf, []byte(tc.body), 0o644)
		out, errOut, code := runBinary(t, nil, "--config", conf, "--addr", free, "--dir", t.TempDir())
		if want := "rlserver: config file " + conf + " " + tc.want + "\n"; errOut != want || code == 0 || out != "" {
			t.Errorf("%q: stderr %q, status %d; want %q", tc.body, errOut, code, want)
		}
	}
	missing := filepath.Join(dir, "missing.conf")
	for _, run := range []struct {
		env  []string
		args []string
	}{
		{nil, []string{"--config", missing}},
		{[]string{"RL_CONFIG=" + missing}, nil},
	} {
		_, errOut, code := runBinary(t, run.env, append(run.args, "--addr", free, "--dir", t.TempDir())...)
		if want := "rlserver: config file " + missing + ": no such file or directory\n"; errOut != want || code == 0 {
			t.Errorf("%v %v: stderr %q, status %d; want %q", run.env, run.args, errOut, code, want)
		}
	}
}

// TestOneProcessPerDataDir: a second rlserver on a data folder in use
// refuses to start and names the first one's pid, standalone and in
// cluster mode; once the first is killed with -9, the second starts.
func TestOneProcessPerDataDir(t *testing.T) {
	second := func(t *testing.T, dir string, extra ...string) (string, int) {
		args := append([]string{"--dir", dir, "--addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))}, extra...)
		_, errOut, code := runBinary(t, nil, args...)
		return errOut, code
	}
	t.Run("standalone", func(t *testing.T) {
		dir := t.TempDir()
		first := startIn(t, dir, opts{})
		pid := first.cmd.Process.Pid
		errOut, code := second(t, dir)
		want := fmt.Sprintf("rlserver: data folder %s is in use by another rlserver (pid %d, holding %s); give each server its own --dir\n", dir, pid, filepath.Join(dir, "rlserver.lock"))
		if errOut != want || code == 0 {
			t.Errorf("second server on %s: stderr %q, status %d; want %q", dir, errOut, code, want)
		}
		// The first one is untouched and still serves.
		wantReply(t, goRedis(t, first), "PONG", "PING")
		first.kill9()
		next := startIn(t, dir, opts{})
		wantReply(t, goRedis(t, next), "PONG", "PING")
	})
	t.Run("cluster", func(t *testing.T) {
		dir := t.TempDir()
		raftArgs := func() []string {
			return []string{"--node-id", "n1", "--raft-addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))), "--bootstrap"}
		}
		first := startIn(t, dir, opts{args: raftArgs()})
		errOut, code := second(t, dir, raftArgs()...)
		if want := fmt.Sprintf("(pid %d, holding", first.cmd.Process.Pid); !strings.Contains(errOut, want) || code == 0 || strings.Count(errOut, "\n") != 1 {
			t.Errorf("second cluster node on %s: stderr %q, status %d; want one line with %q", dir, errOut, code, want)
		}
		first.kill9()
		next := startIn(t, dir, opts{args: raftArgs()})
		wantReply(t, goRedis(t, next), "PONG", "PING")
	})
}

// TestPidFile: --pidfile (and pidfile in the config file, RL_PIDFILE)
// holds the pid while the server runs, so the docs' `kill -HUP $(cat
// FILE)` reaches this one server; a clean exit removes it.
func TestPidFile(t *testing.T) {
	dir := t.TempDir()
	policies := filepath.Join(dir, "policies.conf")
	writePolicyFile(t, policies, "a FIXED 1 1000\n")
	conf := filepath.Join(dir, "rl.conf")
	for _, how := range []struct {
		name string
		o    func(pid string) opts
	}{
		{"flag", func(pid string) opts { return opts{args: []string{"--pidfile", pid, "--policies", policies}} }},
		{"env", func(pid string) opts {
			return opts{args: []string{"--policies", policies}, env: []string{"RL_PIDFILE=" + pid}}
		}},
		{"config", func(pid string) opts {
			os.WriteFile(conf, []byte("pidfile "+pid+"\npolicies "+policies+"\n"), 0o644)
			return opts{args: []string{"--config", conf}}
		}},
	} {
		t.Run(how.name, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "rlserver.pid")
			s := start(t, how.o(pidFile))
			b, err := os.ReadFile(pidFile)
			if want := strconv.Itoa(s.cmd.Process.Pid) + "\n"; err != nil || string(b) != want {
				t.Fatalf("pid file %s: %q, %v; want %q", pidFile, b, err, want)
			}
			c := newGoRedis(t, s, nil)
			if got := configGet(t, c, "pidfile"); got != pidFile {
				t.Errorf("CONFIG GET pidfile = %q, want %q", got, pidFile)
			}
			// The docs' reload command, as printed.
			writePolicyFile(t, policies, "b FIXED 2 1000\n")
			if out, err := exec.Command("sh", "-c", "kill -HUP $(cat "+pidFile+")").CombinedOutput(); err != nil {
				t.Fatalf("kill -HUP $(cat %s): %v %s", pidFile, err, out)
			}
			pollUntil(t, 10*time.Second, "the reload", func() bool {
				v, err := c.Do(context.Background(), "RL.POLICY", "LIST").Result()
				return err == nil && fmt.Sprint(v) == "[[b FIXED 2 1000]]"
			})
			writePolicyFile(t, policies, "a FIXED 1 1000\n")
			if code, err := s.stop(); err != nil || code != 0 {
				t.Fatalf("stop: %d %v", code, err)
			}
			if _, err := os.Stat(pidFile); !os.IsNotExist(err) {
				t.Errorf("pid file %s still there after a clean exit: %v", pidFile, err)
			}
		})
	}
	// An unwritable pid file stops the start, naming it.
	bad := filepath.Join(dir, "no-such-dir", "rl.pid")
	_, errOut, code := runBinary(t, nil, "--pidfile", bad, "--dir", t.TempDir(), "--addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))))
	if want := "rlserver: pidfile " + bad + ": no such file or directory\n"; errOut != want || code == 0 {
		t.Errorf("unwritable pid file: stderr %q, status %d; want %q", errOut, code, want)
	}
}

// TestHelpShowsOneShardsDefault: --help printed "(default: a quarter of the
// CPUs, at least 1)" and "(default N)" for --shards.
func TestHelpShowsOneShardsDefault(t *testing.T) {
	t.Parallel()
	out, _, _ := runBinary(t, nil, "--help")
	i := strings.Index(out, "\n  -shards ")
	if i < 0 {
		t.Fatalf("--help has no -shards:\n%s", out)
	}
	entry := out[i+1:]
	if j := strings.Index(entry[1:], "\n  -"); j >= 0 {
		entry = entry[:j+1]
	}
	if n := strings.Count(entry, "(default"); n != 1 {
		t.Errorf("--help's -shards entry has %d \"(default\" parts, want one:\n%s", n, entry)
	}
}

// TestHealthcheckMessages: what --healthcheck prints when the answer is
// wrong says what came back, never "<nil>".
func TestHealthcheckMessages(t *testing.T) {
	s := start(t, opts{args: []string{"--requirepass", "sekrit"}, authPass: "sekrit"})
	check := func(args ...string) (int, string) {
		cmd := exec.Command(binary(), append([]string{"--healthcheck"}, args...)...)
		cmd.Env = cleanEnv()
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := check("--addr", s.addr, "--requirepass", "wrong"); code != 1 || out != "unhealthy: AUTH: WRONGPASS invalid username-password pair or user is disabled.\n" {
		t.Errorf("wrong password: exit %d, %q", code, out)
	}
	if code, out := check("--addr", s.addr); code != 1 || out != "unhealthy: PING: NOAUTH Authentication required.\n" {
		t.Errorf("no password: exit %d, %q", code, out)
	}
	// Something that is not a Redis server: answers one line, or hangs up.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for i := 0; ; i++ {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.SetReadDeadline(time.Now().Add(5 * time.Second))
			c.Read(make([]byte, 64)) // the PING, so the close is a FIN, not a reset
			if i == 0 {
				c.Write([]byte("HTTP/1.0 400 Bad Request\r\n"))
			}
			c.Close()
		}
	}()
	if code, out := check("--addr", ln.Addr().String()); code != 1 || out != "unhealthy: PING: unexpected reply \"HTTP/1.0 400 Bad Request\"\n" {
		t.Errorf("not Redis: exit %d, %q", code, out)
	}
	if code, out := check("--addr", ln.Addr().String()); code != 1 || out != "unhealthy: PING: EOF\n" {
		t.Errorf("hung up: exit %d, %q", code, out)
	}
}

// TestPolicyRefusalOneText: a bad policy line reads the same to the client
// (RL.POLICY LOAD), in the log and at start; a refused SIGHUP reload is
// logged once (it was logged twice, in two wordings).
func TestPolicyRefusalOneText(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.conf")
	writePolicyFile(t, file, "login ALLOW 5 0.1\n")
	s := start(t, opts{args: []string{"--policies", file}})
	c := newGoRedis(t, s, nil)
	writePolicyFile(t, file, "login ALLOW 5 0.1\nip FIXED 0 60000\n")
	const text = "policy file line 2: limit must be an integer >= 1"
	wantErr(t, c, "ERR "+text, "RL.POLICY", "LOAD")
	logged := func() int { return strings.Count(s.stderr.String(), "line 2") }
	// stderr reaches the test through a pipe: wait for the line.
	pollUntil(t, 10*time.Second, "the RL.POLICY LOAD refusal in the log", func() bool { return logged() >= 1 })
	if !strings.Contains(s.stderr.String(), `err="`+text+`"`) || logged() != 1 {
		t.Errorf("after RL.POLICY LOAD, the log has %d lines on line 2, want one with err=%q:\n%s", logged(), text, s.stderr)
	}
	s.signal(syscall.SIGHUP)
	pollUntil(t, 10*time.Second, "the SIGHUP refusal in the log", func() bool { return logged() >= 2 })
	if code, err := s.stop(); err != nil || code != 0 {
		t.Fatalf("stop: %d %v", code, err)
	}
	if n := logged(); n != 2 {
		t.Errorf("the refused SIGHUP reload is logged %d times, want once:\n%s", n-1, s.stderr)
	}
	// At start: the same words, with the file's path.
	_, errOut, code := runBinary(t, nil, "--policies", file, "--dir", t.TempDir(), "--addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t))))
	if want := "rlserver: policy file " + file + " line 2: limit must be an integer >= 1\n"; errOut != want || code == 0 {
		t.Errorf("bad policy file at start: stderr %q, status %d; want %q", errOut, code, want)
	}
}

// TestConfigQuotingMatchesRedis: the same requirepass line gives the same
// password to a real redis-server and to rlserver, and the lines Redis
// refuses stop rlserver too.
func TestConfigQuotingMatchesRedis(t *testing.T) {
	redisBin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	// authOK starts bin with the config body, and reports whether it
	// started and AUTH pass then succeeds.
	authOK := func(t *testing.T, bin string, args []string, pass string) (started, ok bool) {
		port := freePort(t)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		args = append(args[:len(args):len(args)], map[bool][]string{
			true:  {"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--dir", t.TempDir()},
			false: {"--addr", addr, "--dir", t.TempDir()},
		}[bin == redisBin]...)
		cmd := exec.Command(bin, args...)
		cmd.Env = cleanEnv()
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan struct{})
		go func() { cmd.Wait(); close(exited) }()
		defer func() { cmd.Process.Kill(); <-exited }()
		deadline := time.Now().Add(readyTimeout)
		for {
			select {
			case <-exited:
				return false, false
			default:
			}
			if v, err := rawDo(addr, 2*time.Second, "AUTH", pass); err == nil {
				return true, v.kind == '+'
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s did not answer on %s", bin, addr)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	for i, tc := range []struct {
		value string // requirepass's argument as written in the file
		pass  string // the password it means; "" when the line is refused
	}{
		{`"a\x41 b\"c\\d"`, `aA b"c\d`},
		{`"x\ty\n"`, "x\ty\n"},
		{`'it\'s \n'`, `it's \n`},
		{`a"b c"`, "ab c"},
		{`"s3cret"`, "s3cret"},
		{`"abc`, ""},
		{`'abc`, ""},
		{`"abc"def`, ""},
		{`a b`, ""},
	} {
		conf := filepath.Join(t.TempDir(), fmt.Sprintf("c%d.conf", i))
		if err := os.WriteFile(conf, []byte("requirepass "+tc.value+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		for _, bin := range []string{redisBin, binary()} {
			args := []string{conf}
			if bin != redisBin {
				args = []string{"--config", conf}
			}
			started, ok := authOK(t, bin, args, tc.pass)
			switch {
			case tc.pass == "" && started:
				t.Errorf("%s started with requirepass %s; want a refused line", filepath.Base(bin), tc.value)
			case tc.pass != "" && (!started || !ok):
				t.Errorf("%s with requirepass %s: started %v, AUTH %q accepted %v", filepath.Base(bin), tc.value, started, tc.pass, ok)
			}
		}
	}
}
