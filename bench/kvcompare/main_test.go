package main

import (
	"context"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/respio"
)

// needRedis skips the test without redis-server, except in CI, which
// installs it (.ci/run).
func needRedis(t *testing.T) {
	t.Helper()
	if _, err := exec.LookPath("redis-server"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
}

// smokeConfig is -smoke with rlserver built from this checkout once.
func smokeConfig(t *testing.T) config {
	t.Helper()
	cfg := smoke(defaults())
	cfg.progress = nil
	dir := t.TempDir()
	t.Setenv("TMPDIR", dir)
	bin, err := buildRLServer(cfg, dir)
	if err != nil {
		t.Fatal(err)
	}
	cfg.rlserver = bin
	t.Cleanup(benchproc.StopAll)
	return cfg
}

// TestSmoke runs make bench-kv's driver in its -smoke mode against both
// servers and checks what they hold afterwards: every key of both
// patterns read back equals what the generator was acknowledged adding to
// it, and the memory load left exactly the counters loaded. Rates are
// not checked: this machine is shared.
func TestSmoke(t *testing.T) {
	needRedis(t)
	cfg := smokeConfig(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.failed(); err != nil {
		t.Error(err)
	}
	if len(rep.cases) != 2*len(cfg.depths) {
		t.Fatalf("%d cases, want %d", len(rep.cases), 2*len(cfg.depths))
	}
	for _, c := range rep.cases {
		for s, runs := range c.runs {
			if len(runs) != cfg.rounds {
				t.Errorf("%s -P %d on %s: %d runs, want %d", c.pat.name, c.depth, serverNames[s], len(runs), cfg.rounds)
			}
			for _, r := range runs {
				if r.ops <= 0 {
					t.Errorf("%s -P %d on %s: a run completed no operation", c.pat.name, c.depth, serverNames[s])
				}
			}
		}
	}
	if len(rep.verified) != 4 {
		t.Fatalf("%d read-backs, want 4 (2 servers, 2 patterns)", len(rep.verified))
	}
	for _, v := range rep.verified {
		// Smoke mode reads every key back; each pattern's measured runs
		// alone added at least one per operation.
		var ops int64
		for _, c := range rep.cases {
			if c.pat == v.pat {
				for _, r := range c.runs[serverIndex(v.server)] {
					ops += r.ops
				}
			}
		}
		if v.keys != cfg.keys || v.written == 0 || v.total < ops || len(v.mismatch) > 0 {
			t.Errorf("%s, %s: %d keys read back (want %d), %d written, counters sum to %d (want at least %d), mismatches %v",
				v.server, v.pat.name, v.keys, cfg.keys, v.written, v.total, ops, v.mismatch)
		}
	}
	for s, m := range rep.mem {
		if m == nil || m.dbsize != int64(cfg.memKeys) {
			t.Errorf("%s: memory load %+v, want DBSIZE %d", serverNames[s], m, cfg.memKeys)
		}
	}
	var out strings.Builder
	rep.print(&out)
	for _, want := range []string{
		"| INCRBY+EXPIRE, pairs/s, -P 1 |", "| INCRBY+EXPIRE, pairs/s, -P 32 |",
		"| MULTI INCR EXPIRE EXEC, tx/s, -P 1 |", "| MULTI INCR EXPIRE EXEC, tx/s, -P 32 |",
		"| RSS growth, bytes/key |", "| INFO used_memory growth, bytes/key |", "rlserver INFO memory, growth per key: ",
	} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "DIFFER") {
		t.Errorf("the report has a difference:\n%s", out.String())
	}
}

// TestKnownKey drives one key per pattern on each server: after the run
// the key holds exactly the number of transactions acknowledged (each
// INCR adds one), and the INCRBY key what the pairs added.
func TestKnownKey(t *testing.T) {
	needRedis(t)
	cfg := smokeConfig(t)
	srv, err := startBoth(cfg, t.TempDir(), "known")
	if err != nil {
		t.Fatal(err)
	}
	for s := range srv {
		for _, pat := range []pattern{seeds, envoy} {
			tl := make(tally, 1)
			l := load{addr: srv[s].Addr, pid: srv[s].Pid(), pat: pat, conns: 4, depth: 8, keys: 1, ttl: cfg.ttl,
				ramp: 50 * time.Millisecond, duration: 150 * time.Millisecond, tally: tl, seed: 7}
			res, err := l.run(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			c, err := respio.Dial(srv[s].Addr)
			if err != nil {
				t.Fatal(err)
			}
			got, err := c.Do("GET", pat.prefix+"0")
			c.Close()
			if err != nil {
				t.Fatal(err)
			}
			want := tl[0].Load()
			if pat.multi && want != res.all {
				t.Errorf("%s: the generator counted %d transactions and %d increments", serverNames[s], res.all, want)
			}
			if res.all == 0 || got != strconv.FormatInt(want, 10) {
				t.Errorf("%s, %s: GET %s0 = %v after %d operations adding %d", serverNames[s], pat.name, pat.prefix, got, res.all, want)
			}
		}
	}
}

func serverIndex(name string) int {
	for i, n := range serverNames {
		if n == name {
			return i
		}
	}
	return -1
}

// TestScriptsSmoke runs make bench-lua's driver (-scripts) in its -smoke
// mode against both servers: the token-bucket script by EVALSHA on
// rlserver and Redis and RL.ALLOW on rlserver. No call may get an error
// reply, every reply the generator read is in range (it ends the run
// otherwise), the keys read back hold tokens within the capacity, and the
// same calls with the clock given answer the same on both servers and
// leave the same hashes. Rates are not checked: this machine is shared.
func TestScriptsSmoke(t *testing.T) {
	needRedis(t)
	cfg := smokeConfig(t)
	cfg.scripts, cfg.memKeys = true, 0
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	rep, err := run(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := rep.failed(); err != nil {
		t.Error(err)
	}
	if len(rep.cases) != len(cfg.depths) {
		t.Fatalf("%d cases, want %d", len(rep.cases), len(cfg.depths))
	}
	for _, c := range rep.cases {
		for tg := range scriptTargets {
			runs, name := *c.of(tg), scriptTargets[tg].name
			if c.warmErrs[tg] != 0 {
				t.Errorf("%s -P %d: %d error replies in the warm-up, the first %q", name, c.depth, c.warmErrs[tg], c.warmFirst[tg])
			}
			if len(runs) != cfg.rounds {
				t.Errorf("%s -P %d: %d runs, want %d", name, c.depth, len(runs), cfg.rounds)
			}
			for _, r := range runs {
				if r.ops <= 0 || r.errs != 0 || r.denied < 0 || r.denied > r.all {
					t.Errorf("%s -P %d: a run of %d calls (%d measured) with %d denied and %d error replies (%q)",
						name, c.depth, r.all, r.ops, r.denied, r.errs, r.firstErr)
				}
			}
		}
	}
	sr := rep.scripts
	if sr == nil {
		t.Fatal("no script checks in the report")
	}
	for tg, kc := range sr.keys {
		// Smoke mode reads every key back; the script's keys live 11 s
		// after a call (RL.ALLOW's only until the bucket is full again,
		// which may be 0.1 s: they need not be present).
		if kc.keys != cfg.keys || kc.called == 0 || kc.present == 0 && tg != 2 || len(kc.bad) > 0 ||
			kc.tokens < 0 || kc.tokens > float64(kc.present)*float64(cfg.capacity) {
			t.Errorf("%s: %d keys read back (want %d), %d called, %d present holding %g tokens, wrong: %v",
				scriptTargets[tg].name, kc.keys, cfg.keys, kc.called, kc.present, kc.tokens, kc.bad)
		}
	}
	// 6 buckets of 60 calls; costs up to 7 drain them, so some calls are
	// denied whatever the machine's speed.
	if sr.seq.calls != 360 || sr.seq.denied == 0 || sr.seq.denied == sr.seq.calls || len(sr.seq.diffs) > 0 {
		t.Errorf("the call sequence: %d calls, %d denied, differences %v", sr.seq.calls, sr.seq.denied, sr.seq.diffs)
	}
	if !sr.exists[0] || !sr.exists[1] {
		t.Errorf("SCRIPT EXISTS after the run: rlserver %v, Redis %v", sr.exists[0], sr.exists[1])
	}
	var out strings.Builder
	rep.print(&out)
	for _, want := range []string{"| -P 1 |", "| -P 32 |", "checked rlserver EVALSHA:", "checked Redis EVALSHA:", "checked rlserver RL.ALLOW:", "hashes left: identical"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the report has no %q:\n%s", want, out.String())
		}
	}
	for _, bad := range []string{"DIFFER", "WRONG"} {
		if strings.Contains(out.String(), bad) {
			t.Errorf("the report has %q:\n%s", bad, out.String())
		}
	}
}
