package clienttest

import (
	"context"
	"os/exec"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// redis-cli's keyspace tools (--scan, --bigkeys, --memkeys, --cluster
// call) against rlserver: they list keys with SCAN and size them with
// TYPE, STRLEN/LLEN/SCARD/HLEN/ZCARD and MEMORY USAGE (issue 35).

// TestRedisCLIScanBigkeysMemkeys fills a standalone server with limiter
// keys and data keys of every kind and checks that redis-cli --scan
// (with and without --pattern) lists each once, and --bigkeys and
// --memkeys find the biggest of each type.
func TestRedisCLIScanBigkeysMemkeys(t *testing.T) {
	t.Parallel()
	s := start(t, opts{})
	var setup strings.Builder
	var want []string
	for i := range 150 {
		k := "rl:user" + strconv.Itoa(i)
		setup.WriteString("RL.ALLOW " + k + " 10 1\n")
		want = append(want, k)
	}
	setup.WriteString("SET str:small ab\nSET str:big " + strings.Repeat("x", 300) + "\n")
	setup.WriteString("RPUSH list:big a b c d e\nRPUSH list:small a\n")
	setup.WriteString("SADD set:big 1 2 3\nHSET hash:big f1 v1 f2 v2\nZADD zset:big 1 a 2 b 3 c 4 d\n")
	want = append(want, "str:small", "str:big", "list:big", "list:small", "set:big", "hash:big", "zset:big")
	if out, errOut, code := cli(t, s, setup.String()); code != 0 {
		t.Fatalf("setup: %q %q %d", out, errOut, code)
	}

	out, errOut, code := cli(t, s, "", "--scan")
	got := strings.Fields(out)
	slices.Sort(got)
	slices.Sort(want)
	if code != 0 || !slices.Equal(got, want) {
		t.Fatalf("redis-cli --scan (status %d, stderr %q): %d keys %q, want %d", code, errOut, len(got), got, len(want))
	}
	out, _, code = cli(t, s, "", "--scan", "--pattern", "rl:user1?")
	got = strings.Fields(out)
	slices.Sort(got)
	if code != 0 || len(got) != 10 || got[0] != "rl:user10" || got[9] != "rl:user19" {
		t.Fatalf("redis-cli --scan --pattern rl:user1?: %q", got)
	}

	out, errOut, code = cli(t, s, "", "--bigkeys")
	for _, line := range []string{
		`Sampled 157 keys in the keyspace!`,
		`Biggest string found '"str:big"' has 300 bytes`,
		`Biggest   list found '"list:big"' has 5 items`,
		`Biggest    set found '"set:big"' has 3 members`,
		`Biggest   hash found '"hash:big"' has 2 fields`,
		`Biggest   zset found '"zset:big"' has 4 members`,
		`150 rl-gcras with 0 ?`,
	} {
		if code != 0 || !strings.Contains(out, line) {
			t.Errorf("redis-cli --bigkeys (status %d, stderr %q): no %q in\n%s", code, errOut, line, out)
		}
	}
	out, errOut, code = cli(t, s, "", "--memkeys")
	for _, re := range []string{
		`Biggest string found '"str:big"' has \d+ bytes`,
		`Biggest rl-gcra found '"rl:user\d+"' has \d+ bytes`,
		`Biggest   zset found '"zset:big"' has \d+ bytes`,
		`150 rl-gcras with \d+ bytes`,
		`2 lists with \d+ bytes`,
	} {
		if code != 0 || !regexp.MustCompile(re).MatchString(out) {
			t.Errorf("redis-cli --memkeys (status %d, stderr %q): no %s in\n%s", code, errOut, re, out)
		}
	}
}

// TestRedisCLIClusterCall runs redis-cli --cluster call DBSIZE against a
// sharded cluster, and redis-cli --scan against each node: each master
// (each node, for the groups it leads) answers for its own keys, and they
// add up to every key written, each once, as on Redis Cluster.
func TestRedisCLIClusterCall(t *testing.T) {
	t.Parallel()
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is needed (apt-get install redis-tools): %v", err)
	}
	c := startSharded(t, 3)
	addr := c.nodes[0].respAddr
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	const n = 60
	var in strings.Builder
	for i := range n {
		switch i % 3 {
		case 0:
			in.WriteString("RL.ALLOW rl:k" + strconv.Itoa(i) + " 10 1\n")
		case 1:
			in.WriteString("RPUSH list:k" + strconv.Itoa(i) + " a b\n")
		default:
			in.WriteString("SADD set:k" + strconv.Itoa(i) + " a\n")
		}
	}
	host, port, _ := strings.Cut(addr, ":")
	cmd := exec.CommandContext(ctx, path, "-c", "-h", host, "-p", port)
	cmd.Stdin = strings.NewReader(in.String())
	if out, err := cmd.CombinedOutput(); err != nil || strings.Contains(string(out), "ERR") {
		t.Fatalf("writes through redis-cli -c: %v\n%s", err, out)
	}

	out, err := exec.CommandContext(ctx, path, "--cluster", "call", addr, "DBSIZE").CombinedOutput()
	if err != nil {
		t.Fatalf("redis-cli --cluster call DBSIZE: %v\n%s", err, out)
	}
	// ">>> Calling DBSIZE" then one "addr: count" line per master.
	total, masters := 0, 0
	for _, m := range regexp.MustCompile(`(?m)^127\.0\.0\.1:\d+: (\d+)$`).FindAllStringSubmatch(string(out), -1) {
		v, _ := strconv.Atoi(m[1])
		total += v
		masters++
	}
	if masters != 3 || total != n {
		t.Fatalf("redis-cli --cluster call DBSIZE: %d masters, %d keys, want 3 and %d:\n%s", masters, total, n, out)
	}
	// redis-cli --scan against each node lists the keys of the groups it
	// leads: together, every key once.
	var keys []string
	for _, nd := range c.nodes {
		h, p, _ := strings.Cut(nd.respAddr, ":")
		out, err := exec.CommandContext(ctx, path, "-h", h, "-p", p, "--scan", "--pattern", "set:*").CombinedOutput()
		if err != nil {
			t.Fatalf("redis-cli --scan on %s: %v\n%s", nd.respAddr, err, out)
		}
		keys = append(keys, strings.Fields(string(out))...)
	}
	slices.Sort(keys)
	if len(keys) != n/3 || len(slices.Compact(keys)) != n/3 {
		t.Fatalf("redis-cli --scan --pattern set:* on each node: %q, want %d keys once each", keys, n/3)
	}
}
