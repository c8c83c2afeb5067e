package clienttest

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redis-cli (Debian's redis-tools) against rlserver: commands as
// arguments, authentication, and --pipe mass insertion.

// cli runs redis-cli against s with stdin and returns its stdout, stderr
// and exit status.
func cli(t *testing.T, s *server, stdin string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is needed (apt-get install redis-tools): %v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, append([]string{"-h", "127.0.0.1", "-p", strconv.Itoa(s.port)}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errOut bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = &errOut
	err = cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("redis-cli %q: timed out", args)
	}
	if err != nil {
		if _, ok := err.(*exec.ExitError); !ok {
			t.Fatalf("redis-cli %q: %v", args, err)
		}
	}
	return out.String(), errOut.String(), cmd.ProcessState.ExitCode()
}

func TestRedisCLIArguments(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	port := strconv.Itoa(s.port)
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"PING"}, "PONG\n"},
		{[]string{"ping", "hello"}, "hello\n"},
		{[]string{"RL.ALLOW", "cli", "5", "0.001"}, "1\n4\n0\n1000000\n"},
		{[]string{"RL.ALLOW", "never", "5", "0.001", "6"}, "0\n5\n-1\n0\n"},
		{[]string{"RL.PEEK", "fresh", "5", "0.001", "5"}, "1\n0\n0\n5000000\n"},
		{[]string{"RL.ALLOW", "fresh", "5", "0.001", "0"}, "1\n5\n0\n0\n"},
		{[]string{"RL.ALLOW", "cli", "5", "0.001", "0"}, "1\n4\n0\n"}, // reset_after_ms counts down: cut below
		{[]string{"EXISTS", "cli", "cli", "never", "fresh"}, "2\n"},
		{[]string{"TYPE", "cli"}, "rl-gcra\n"},
		{[]string{"TYPE", "fresh"}, "none\n"},
		{[]string{"PTTL", "fresh"}, "-2\n"},
		{[]string{"TTL", "fresh"}, "-2\n"},
		{[]string{"DBSIZE"}, "1\n"},
		{[]string{"CLIENT", "GETNAME"}, "\n"},
		{[]string{"SELECT", "0"}, "OK\n"},
		{[]string{"CONFIG", "GET", "port"}, "port\n" + port + "\n"},
		{[]string{"ECHO", "a b"}, "a b\n"},
		{[]string{"foo", "a"}, "ERR unknown command 'foo', with args beginning with: 'a' \n"},
		{[]string{"RL.ALLOW", "cli"}, "ERR wrong number of arguments for 'rl.allow' command\n"},
		{[]string{"RL.ALLOW", "cli", "5", "x"}, "ERR value is not a valid float\n"},
		{[]string{"SELECT", "1"}, "ERR DB index is out of range\n"},
		{[]string{"RL.RESET", "cli", "never"}, "1\n"},
		{[]string{"DEL", "cli"}, "0\n"},
		{[]string{"FLUSHALL"}, "OK\n"},
		{[]string{"DBSIZE"}, "0\n"},
	} {
		out, errOut, code := cli(t, s, "", tc.args...)
		// redis-cli ends an error with an empty line; compare up to it.
		if strings.HasPrefix(tc.want, "ERR ") {
			out = strings.TrimSuffix(out, "\n")
		}
		if tc.want == "1\n4\n0\n" {
			lines := strings.SplitAfter(out, "\n")
			if ms, err := strconv.ParseInt(strings.TrimSpace(lines[len(lines)-2]), 10, 64); len(lines) == 5 && err == nil && aged(periodMs).has(ms) {
				out = strings.Join(lines[:3], "")
			}
		}
		if out != tc.want || errOut != "" || code != 0 {
			t.Errorf("redis-cli %q = %q (stderr %q, status %d), want %q", tc.args, out, errOut, code, tc.want)
		}
	}

	// RESP3 from redis-cli -3: HELLO's map.
	out, _, _ := cli(t, s, "", "-3", "HELLO", "3")
	want := regexp.MustCompile(`^server rlserver\nversion ` + regexp.QuoteMeta("7.4.0") +
		`\nproto 3\nid \d+\nmode standalone\nrole master\nmodules \n$`)
	if !want.MatchString(out) {
		t.Errorf("redis-cli -3 HELLO 3 = %q", out)
	}
	out, _, _ = cli(t, s, "", "INFO", "server")
	if !strings.Contains(out, "redis_version:7.4.0\r\n") || !strings.Contains(out, "tcp_port:"+port+"\r\n") {
		t.Errorf("redis-cli INFO server = %q", out)
	}
	// Commands on stdin, one per line.
	out, _, _ = cli(t, s, "RL.ALLOW in 2 0.001\nRL.ALLOW in 2 0.001\nRL.ALLOW in 2 0.001 2\nEXISTS in\n")
	lines := strings.Split(out, "\n")
	if len(lines) != 14 || strings.Join(lines[:3], " ") != "1 1 0" || strings.Join(lines[4:7], " ") != "1 0 0" ||
		strings.Join(lines[8:10], " ") != "0 0" || lines[12] != "1" {
		t.Errorf("redis-cli with commands on stdin = %q", out)
	}
}

func TestRedisCLIAuth(t *testing.T) {
	t.Parallel()
	s := start(t, opts{args: []string{"--requirepass", "s3cret"}, authPass: "s3cret"})
	const noAuth = "NOAUTH Authentication required.\n"
	for _, tc := range []struct {
		args         []string
		want, stderr string
	}{
		{[]string{"PING"}, noAuth, ""},
		{[]string{"RL.ALLOW", "k", "1", "1"}, noAuth, ""},
		{[]string{"-a", "s3cret", "--no-auth-warning", "PING"}, "PONG\n", ""},
		{[]string{"-a", "s3cret", "--no-auth-warning", "RL.ALLOW", "k", "3", "0.001"}, "1\n2\n0\n1000000\n", ""},
		{[]string{"--user", "default", "--pass", "s3cret", "--no-auth-warning", "EXISTS", "k"}, "1\n", ""},
		{[]string{"-a", "wrong", "--no-auth-warning", "PING"}, noAuth,
			"AUTH failed: WRONGPASS invalid username-password pair or user is disabled.\n"},
	} {
		out, errOut, code := cli(t, s, "", tc.args...)
		if strings.HasPrefix(tc.want, "NOAUTH") {
			out = strings.TrimSuffix(out, "\n")
		}
		if out != tc.want || errOut != tc.stderr || code != 0 {
			t.Errorf("redis-cli %q = %q (stderr %q, status %d), want %q (stderr %q)", tc.args, out, errOut, code, tc.want, tc.stderr)
		}
	}
}

// massInsert is a redis-cli --pipe file: n RL.ALLOW commands over keys
// mass0..mass(keys-1) in turn, each of the given capacity at slowRate.
func massInsert(n, keys, capacity int) string {
	var b strings.Builder
	for i := range n {
		args := []string{"RL.ALLOW", fmt.Sprintf("mass%d", i%keys), strconv.Itoa(capacity), slowRate}
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
	}
	return b.String()
}

func TestRedisCLIPipe(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	// 10,000 commands over 100 keys of capacity 60: 60 allowed and 40
	// denied per key.
	out, errOut, code := cli(t, s, massInsert(10000, 100, 60), "--pipe")
	if !strings.HasSuffix(out, "errors: 0, replies: 10000\n") || code != 0 {
		t.Errorf("redis-cli --pipe = %q (stderr %q, status %d), want a summary of errors: 0, replies: 10000", out, errOut, code)
	}
	c := newGoRedis(t, s, nil)
	if got := infoField(t, c, "stats", "rl_allowed"); got != "6000" {
		t.Errorf("rl_allowed = %s, want 6000", got)
	}
	if got := infoField(t, c, "stats", "rl_denied"); got != "4000" {
		t.Errorf("rl_denied = %s, want 4000", got)
	}
	wantInt(t, c, 100, "DBSIZE")
	for _, k := range []string{"mass0", "mass42", "mass99"} {
		wantDecision(t, c, deniedFull(60), "RL.PEEK", k, 60, slowRate)
	}

	// Errors are counted, inline commands work, the status says so.
	in := massInsert(3, 3, 1) + "RL.ALLOW mass0 1 x\r\nRL.ALLOW inline 1 0.001\r\nNOSUCH\r\n"
	out, _, code = cli(t, s, in, "--pipe")
	if !strings.HasSuffix(out, "errors: 2, replies: 6\n") || code != 1 {
		t.Errorf("redis-cli --pipe with 2 bad commands = %q (status %d), want errors: 2, replies: 6", out, code)
	}
	wantInt(t, c, 1, "EXISTS", "inline")
}
