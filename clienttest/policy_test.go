package clienttest

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/engine"
)

// Named policies and tiered checks (issue 9): RL.POLICY, RL.CHECK's exact
// replies, all-or-nothing across shards under concurrency, policy changes
// on live keys, the policy file (start, refusal, SIGHUP), persistence
// across restarts, and a three-node cluster across a leader kill and
// restarts. Rates are slowRate (a token per 1000 s): nothing refills
// during a test; countdowns are checked against ranges.

const policyShards = 8

// keysOnShards returns n keys with the prefix that live on n different
// shards of an engine with policyShards shards.
func keysOnShards(prefix string, n int) []string {
	var out []string
	used := map[int]bool{}
	for i := 0; len(out) < n; i++ {
		k := fmt.Sprintf("%s%d", prefix, i)
		if s := engine.ShardOf([]byte(k), policyShards); !used[s] {
			used[s] = true
			out = append(out, k)
		}
	}
	return out
}

// tier is an expected tier of an RL.CHECK reply.
type tier struct {
	policy, key      string
	allowed          int64
	limit, remaining int64
	retry, reset     span
	delay            span
}

// check is an expected RL.CHECK reply.
type check struct {
	allowed, decider int64
	tiers            []tier
}

func wantCheck(t *testing.T, c *redis.Client, want check, args ...any) {
	t.Helper()
	v, err := c.Do(context.Background(), append([]any{"RL.CHECK"}, args...)...).Slice()
	if err != nil {
		t.Fatalf("RL.CHECK %v: %v", args, err)
	}
	bad := func() { t.Errorf("RL.CHECK %v = %v, want %+v", args, v, want) }
	if len(v) != 2+len(want.tiers) || v[0] != want.allowed || v[1] != want.decider {
		bad()
		return
	}
	for i, w := range want.tiers {
		tv, ok := v[2+i].([]any)
		if !ok || len(tv) != 8 || tv[0] != w.policy || tv[1] != w.key {
			bad()
			return
		}
		n := make([]int64, 6)
		for j := range n {
			if n[j], ok = tv[2+j].(int64); !ok {
				bad()
				return
			}
		}
		if n[0] != w.allowed || n[1] != w.limit || n[2] != w.remaining || !w.retry.has(n[3]) || !w.reset.has(n[4]) || !w.delay.has(n[5]) {
			bad()
			return
		}
	}
}

func TestPolicyCommandsAndCheckReplies(t *testing.T) {
	s, metricsURL := startWithMetrics(t, opts{args: []string{"--shards", fmt.Sprint(policyShards)}})
	c := newGoRedis(t, s, nil)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "login", "allow", 3, slowRate)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "ip", "FIXED", 5, "1000000000000")
	wantReply(t, c, "OK", "RL.POLICY", "SET", "q", "SHAPE", 2, slowRate)
	wantReply(t, c, []any{"login", "ALLOW", "3", "0.001"}, "RL.POLICY", "GET", "login")
	wantReply(t, c, []any{[]any{"ip", "FIXED", "5", "1000000000000"}, []any{"login", "ALLOW", "3", "0.001"}, []any{"q", "SHAPE", "2", "0.001"}}, "RL.POLICY", "LIST")
	if v, err := c.Do(context.Background(), "RL.POLICY", "GET", "none").Result(); err != redis.Nil {
		t.Errorf("GET of a missing policy: %v %v", v, err)
	}
	wantErr(t, c, "ERR capacity must be an integer >= 1", "RL.POLICY", "SET", "x", "ALLOW", 0, 1)
	wantErr(t, c, "ERR unknown policy 'nope'", "RL.CHECK", "nope", "k")

	k := keysOnShards("k", 3) // three shards
	// Allowed: every tier charged; the decider is the tier with the
	// fewest remaining.
	wantCheck(t, c, check{1, 2, []tier{
		{"ip", k[0], 1, 5, 4, exactly(0), span{1, 1_000_000_000_000}, exactly(0)},
		{"login", k[1], 1, 3, 2, exactly(0), aged(periodMs), exactly(0)},
	}}, "ip", k[0], "login", k[1])
	// COST 2: login has 2 left, q 2: both go to 0; q's delay is its
	// queue's wait.
	wantCheck(t, c, check{1, 1, []tier{
		{"login", k[1], 1, 3, 0, exactly(0), aged(3 * periodMs), exactly(0)},
		{"q", k[2], 1, 2, 0, exactly(0), aged(2 * periodMs), exactly(0)},
	}}, "COST", 2, "login", k[1], "q", k[2])
	// Rejected by the second tier: the first is not charged (ip stays at
	// 4 used... 1 used), retry is login's wait.
	wantCheck(t, c, check{0, 2, []tier{
		{"ip", k[0], 1, 5, 3, exactly(0), span{1, 1_000_000_000_000}, exactly(0)},
		{"login", k[1], 0, 3, 0, aged(periodMs), aged(3 * periodMs), exactly(0)},
	}}, "ip", k[0], "login", k[1])
	wantCheck(t, c, check{1, 1, []tier{
		{"ip", k[0], 1, 5, 4, exactly(0), span{1, 1_000_000_000_000}, exactly(0)},
	}}, "COST", 0, "ip", k[0])
	// A cost above every capacity can never succeed: retry -1.
	wantCheck(t, c, check{0, 1, []tier{
		{"login", "fresh", 0, 3, 3, exactly(-1), exactly(0), exactly(0)},
	}}, "COST", 4, "login", "fresh")

	// In a pipeline with other commands, in order.
	pipe := c.Pipeline()
	a1 := pipe.Do(context.Background(), "RL.ALLOW", "plain", 2, slowRate)
	c1 := pipe.Do(context.Background(), "RL.CHECK", "ip", "p1", "ip", "p2")
	e1 := pipe.Do(context.Background(), "RL.CHECK", "ip", "p1", "gone", "p2")
	pg := pipe.Do(context.Background(), "PING")
	c2 := pipe.Do(context.Background(), "RL.CHECK", "COST", 0, "ip", "p1", "ip", "p2")
	a2 := pipe.Do(context.Background(), "RL.ALLOW", "plain", 2, slowRate)
	pipe.Exec(context.Background())
	if v, _ := a1.Int64Slice(); v[1] != 1 {
		t.Errorf("pipeline RL.ALLOW 1: %v", v)
	}
	if v, _ := c1.Slice(); v[0] != int64(1) {
		t.Errorf("pipeline RL.CHECK: %v", v)
	}
	if err := e1.Err(); err == nil || err.Error() != "ERR unknown policy 'gone'" {
		t.Errorf("pipeline RL.CHECK with an unknown policy: %v", err)
	}
	if pg.Val() != "PONG" {
		t.Errorf("pipeline PING: %v", pg.Val())
	}
	if v, _ := c2.Slice(); len(v) != 4 || v[2].([]any)[4] != int64(4) || v[3].([]any)[4] != int64(4) {
		t.Errorf("pipeline peek after a failed check: %v", v)
	}
	if v, _ := a2.Int64Slice(); v[1] != 0 {
		t.Errorf("pipeline RL.ALLOW 2: %v", v)
	}
	wantErr(t, c, "ERR key 'k' appears twice in one RL.CHECK", "RL.CHECK", "ip", "k", "login", "k")
	wantErr(t, c, "WRONGTYPE Operation against a key holding the wrong kind of value", "RL.CHECK", "login", k[2], "ip", "zz")
	wantReply(t, c, int64(1), "RL.POLICY", "DEL", "login")
	wantReply(t, c, int64(0), "RL.POLICY", "DEL", "login")
	wantErr(t, c, "ERR unknown policy 'login'", "RL.CHECK", "ip", "zz", "login", k[1])
	wantCheck(t, c, check{1, 1, []tier{
		{"ip", "zz", 1, 5, 5, exactly(0), span{0, 1_000_000_000_000}, exactly(0)},
	}}, "COST", 0, "ip", "zz")
	wantErr(t, c, "ERR no policy file is configured (start rlserver with --policies FILE)", "RL.POLICY", "LOAD")

	info, err := c.Info(context.Background(), "policies").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"# Policies", "policies:2", "policy_ip:allowed=7,denied=0", "policy_q:allowed=1,denied=0"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO policies lacks %q:\n%s", want, info)
		}
	}
	fams := scrape(t, metricsURL)
	for _, m := range []struct {
		policy, outcome string
		want            float64
	}{{"ip", "allowed", 7}, {"ip", "denied", 0}, {"q", "allowed", 1}} {
		if v, ok := metricValue(fams, "rlserver_policy_decisions_total", "policy", m.policy, "outcome", m.outcome); !ok || v != m.want {
			t.Errorf("rlserver_policy_decisions_total{policy=%q,outcome=%q} = %v (%v), want %v", m.policy, m.outcome, v, ok, m.want)
		}
	}
}

// TestCheckAllOrNothingAcrossShards runs concurrent multi-tier checks on
// overlapping keys on different shards, with single-key RL.ALLOW calls on
// the same keys, and checks the final state against the decisions: each
// key was charged exactly once per allowed call that names it, never for
// a rejected check.
func TestCheckAllOrNothingAcrossShards(t *testing.T) {
	s := start(t, opts{args: []string{"--shards", fmt.Sprint(policyShards)}})
	c := newGoRedis(t, s, &redis.Options{PoolSize: 16})
	const capacity = 40
	wantReply(t, c, "OK", "RL.POLICY", "SET", "p", "ALLOW", capacity, "0.000001")
	keys := keysOnShards("ak", 6)
	var mu sync.Mutex
	charged := map[string]int64{}
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for range 60 {
				ctx := context.Background()
				if rng.IntN(4) == 0 {
					// A single-key command on the same keys: RL.ALLOW
					// on a policy's key is the same token bucket.
					k := keys[rng.IntN(len(keys))]
					v, err := c.Do(ctx, "RL.ALLOW", k, capacity, "0.000001").Int64Slice()
					if err != nil {
						t.Error(err)
						return
					}
					if v[0] == 1 {
						mu.Lock()
						charged[k]++
						mu.Unlock()
					}
					continue
				}
				perm := rng.Perm(len(keys))[:1+rng.IntN(3)]
				args := []any{"RL.CHECK"}
				for _, i := range perm {
					args = append(args, "p", keys[i])
				}
				v, err := c.Do(ctx, args...).Slice()
				if err != nil {
					t.Error(err)
					return
				}
				allowed := v[0] == int64(1)
				for i, tv := range v[2:] {
					ta := tv.([]any)[2] == int64(1)
					if allowed && !ta {
						t.Errorf("allowed check with a rejecting tier: %v", v)
					}
					if allowed {
						mu.Lock()
						charged[keys[perm[i]]]++
						mu.Unlock()
					}
				}
			}
		}()
	}
	wg.Wait()
	rejected := 0
	for _, k := range keys {
		v := int64s(t, do(t, c, "RL.PEEK", k, capacity, "0.000001"))
		if v[1] != capacity-charged[k] {
			t.Errorf("%s: %d remaining, but %d calls charged it (capacity %d)", k, v[1], charged[k], capacity)
		}
		if charged[k] == capacity {
			rejected++
		}
	}
	if rejected == 0 {
		t.Error("no key was exhausted: the test checked no rejection")
	}
}

// TestPolicyChangeOnLiveKeys: a token bucket keeps the tokens in use,
// capped at the new capacity, when its policy changes; a window keeps its
// count.
func TestPolicyChangeOnLiveKeys(t *testing.T) {
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "b", "ALLOW", 10, slowRate)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "w", "FIXED", 10, "1000000000000")
	remaining := func(p, k string) int64 {
		t.Helper()
		v, err := c.Do(context.Background(), "RL.CHECK", "COST", 0, p, k).Slice()
		if err != nil {
			t.Fatal(err)
		}
		return v[2].([]any)[4].(int64)
	}
	do(t, c, "RL.CHECK", "COST", 5, "b", "kb", "w", "kw")
	// Raised to 20: the 5 in use are kept, 15 left at once.
	wantReply(t, c, "OK", "RL.POLICY", "SET", "b", "ALLOW", 20, slowRate)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "w", "FIXED", 20, "1000000000000")
	if r := remaining("b", "kb"); r != 15 {
		t.Errorf("bucket raised 10 -> 20 with 5 used: %d remaining, want 15", r)
	}
	if r := remaining("w", "kw"); r != 15 {
		t.Errorf("window raised 10 -> 20 with 5 used: %d remaining, want 15", r)
	}
	do(t, c, "RL.CHECK", "COST", 12, "b", "kb") // 17 of 20 used
	// Lowered to 5: capped at one full bucket of 5, none left.
	wantReply(t, c, "OK", "RL.POLICY", "SET", "b", "ALLOW", 5, slowRate)
	if r := remaining("b", "kb"); r != 0 {
		t.Errorf("bucket lowered 20 -> 5 with 17 used: %d remaining, want 0", r)
	}
	// A denied check stores the capped state (a peek stores nothing), so
	// raised back to 10 it has 5 in use, not 17: 5 left.
	do(t, c, "RL.CHECK", "b", "kb")
	wantReply(t, c, "OK", "RL.POLICY", "SET", "b", "ALLOW", 10, slowRate)
	if r := remaining("b", "kb"); r != 5 {
		t.Errorf("bucket raised 5 -> 10 after the cap: %d remaining, want 5", r)
	}
	wantReply(t, c, "OK", "RL.POLICY", "SET", "w", "FIXED", 4, "1000000000000")
	if r := remaining("w", "kw"); r != 0 {
		t.Errorf("window lowered to 4 with 5 used: %d remaining, want 0", r)
	}
	wantCheck(t, c, check{0, 1, []tier{
		{"w", "kw", 0, 4, 0, span{1, 1_000_000_000_000}, span{1, 1_000_000_000_000}, exactly(0)},
	}}, "w", "kw")
}

// execServer is an rlserver command with args, not started.
func execServer(t *testing.T, args ...string) *exec.Cmd {
	cmd := exec.Command(binary(), args...)
	cmd.Env = cleanEnv()
	return cmd
}

func writePolicyFile(t *testing.T, path, body string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestPolicyFile: loaded at start; a bad file at start stops the server
// with the line; on SIGHUP and RL.POLICY LOAD a bad file is refused whole
// and a good one replaces the policies.
func TestPolicyFile(t *testing.T) {
	file := filepath.Join(t.TempDir(), "policies.conf")
	writePolicyFile(t, file, "# comment\nlogin ALLOW 5 0.1\n\nip FIXED 100 60000\n")
	s := start(t, opts{args: []string{"--policies", file}})
	c := newGoRedis(t, s, nil)
	wantReply(t, c, []any{[]any{"ip", "FIXED", "100", "60000"}, []any{"login", "ALLOW", "5", "0.1"}}, "RL.POLICY", "LIST")

	// A bad file: refused whole, naming the line; the policies stay.
	writePolicyFile(t, file, "login ALLOW 50 0.1\nip FIXED 0 60000\n")
	wantErr(t, c, "ERR policy file line 2: limit must be an integer >= 1", "RL.POLICY", "LOAD")
	s.signal(syscall.SIGHUP)
	pollUntil(t, 10*time.Second, "the refusal in the log", func() bool {
		return strings.Contains(s.stderr.String(), "line 2")
	})
	wantReply(t, c, []any{"login", "ALLOW", "5", "0.1"}, "RL.POLICY", "GET", "login")

	// A good file on SIGHUP replaces them all.
	writePolicyFile(t, file, "login ALLOW 50 0.1\napi SLIDING 10 1000\n")
	s.signal(syscall.SIGHUP)
	pollUntil(t, 10*time.Second, "the reloaded policies", func() bool {
		v, err := c.Do(context.Background(), "RL.POLICY", "LIST").Result()
		return err == nil && reflect.DeepEqual(v, []any{[]any{"api", "SLIDING", "10", "1000"}, []any{"login", "ALLOW", "50", "0.1"}})
	})
	writePolicyFile(t, file, "only FIXED 1 1000\n")
	wantReply(t, c, "OK", "RL.POLICY", "LOAD")
	wantReply(t, c, []any{[]any{"only", "FIXED", "1", "1000"}}, "RL.POLICY", "LIST")

	// A bad file at start: the server does not start, and says where.
	writePolicyFile(t, file, "a ALLOW 1 1\nb ALLOW 1 1\nc NOPE 1 1\n")
	cmd := execServer(t, "--addr", fmt.Sprintf("127.0.0.1:%d", freePort(t)), "--dir", t.TempDir(), "--policies", file)
	out, err := cmd.CombinedOutput()
	var ee interface{ ExitCode() int }
	if !errors.As(err, &ee) || ee.ExitCode() == 0 || !strings.Contains(string(out), "line 3") {
		t.Errorf("bad policy file at start: %v\n%s", err, out)
	}
}

// TestPoliciesSurviveRestart: the policies are saved with the snapshot
// and loaded at start, with the keys' state; a policy file given at
// start replaces them.
func TestPoliciesSurviveRestart(t *testing.T) {
	dir := t.TempDir()
	s := startIn(t, dir, opts{})
	c := goRedis(t, s)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "p", "ALLOW", 4, slowRate)
	wantReply(t, c, "OK", "RL.POLICY", "SET", "w", "LOG", 3, "1000000000000")
	do(t, c, "RL.CHECK", "COST", 3, "p", "k", "w", "kw")
	s.stopClean(t)

	s = startIn(t, dir, opts{})
	c = goRedis(t, s)
	wantReply(t, c, []any{[]any{"p", "ALLOW", "4", "0.001"}, []any{"w", "LOG", "3", "1000000000000"}}, "RL.POLICY", "LIST")
	wantCheck(t, c, check{0, 2, []tier{
		{"p", "k", 1, 4, 0, exactly(0), span{3*periodMs - slackMs, 4 * periodMs}, exactly(0)},
		{"w", "kw", 0, 3, 0, span{1, 1_000_000_000_000}, span{1, 1_000_000_000_000}, exactly(0)},
	}}, "p", "k", "w", "kw")
	// A policy change alone is saved (kill -9 after the periodic save).
	wantReply(t, c, int64(1), "RL.POLICY", "DEL", "w")
	pollUntil(t, 10*time.Second, "a save after the policy change", func() bool {
		info, _ := c.Info(context.Background(), "persistence").Result()
		return strings.Contains(info, "rdb_changes_since_last_save:0")
	})
	s.kill9()
	file := filepath.Join(t.TempDir(), "p.conf")
	s = startIn(t, dir, opts{})
	c = goRedis(t, s)
	wantReply(t, c, []any{[]any{"p", "ALLOW", "4", "0.001"}}, "RL.POLICY", "LIST")
	s.stopClean(t)
	writePolicyFile(t, file, "f FIXED 1 1000\n")
	s = startIn(t, dir, opts{args: []string{"--policies", file}})
	c = goRedis(t, s)
	wantReply(t, c, []any{[]any{"f", "FIXED", "1", "1000"}}, "RL.POLICY", "LIST")
}

// TestClusterPolicies: policies set on one node are in force on the
// others, survive a leader kill, reach a restarted node, and survive a
// restart of the whole cluster; a policy file is adopted by the cluster.
func TestClusterPolicies(t *testing.T) {
	file := filepath.Join(t.TempDir(), "cluster.conf")
	writePolicyFile(t, file, "filed FIXED 7 1000000000000\n")
	c := startCluster(t, serverBin, "--policies", file, "--log-level", "info")
	ctx := context.Background()
	// Every node proposes the file once a leader is known; wait for all
	// three, so none replaces the policies set below.
	for _, n := range c.nodes {
		pollUntil(t, 15*time.Second, "the file applied by "+n.id, func() bool {
			return strings.Contains(n.srv.stderr.String(), "policy file loaded")
		})
	}
	retry := func(n *cnode, args ...any) any {
		t.Helper()
		cl := clusterClient(t, n.respAddr)
		var v any
		var err error
		pollUntil(t, 15*time.Second, fmt.Sprintf("%v via %s", args, n.id), func() bool {
			v, err = cl.Do(ctx, args...).Result()
			return classify(err) != opNotApplied
		})
		if err != nil {
			t.Fatalf("%v via %s: %v", args, n.id, err)
		}
		return v
	}
	getOn := func(n *cnode, name string, want []any) {
		t.Helper()
		cl := clusterClient(t, n.respAddr)
		pollUntil(t, 15*time.Second, fmt.Sprintf("policy %s on %s", name, n.id), func() bool {
			v, err := cl.Do(ctx, "RL.POLICY", "GET", name).Result()
			if want == nil {
				return err == redis.Nil
			}
			return err == nil && reflect.DeepEqual(v, want)
		})
	}
	for _, n := range c.nodes {
		getOn(n, "filed", []any{"filed", "FIXED", "7", "1000000000000"})
	}
	leader := c.waitLeader(10 * time.Second)
	var follower *cnode
	for _, n := range c.nodes {
		if n != leader {
			follower = n
		}
	}
	retry(follower, "RL.POLICY", "SET", "login", "ALLOW", 3, slowRate)
	// In force on every node: the checks go through the log.
	for i, n := range c.nodes {
		v := retry(n, "RL.CHECK", "login", "u", "filed", "ip").([]any)
		if v[0] != int64(1) || v[2].([]any)[4] != int64(2-i) {
			t.Fatalf("check %d via %s: %v", i, n.id, v)
		}
	}
	v := retry(leader, "RL.CHECK", "filed", "ip", "login", "u").([]any)
	if v[0] != int64(0) || v[1] != int64(2) || v[2].([]any)[4] != int64(3) {
		t.Fatalf("rejected check: %v", v)
	}

	// Kill the leader: the survivors keep the policies and the state.
	c.kill9(leader)
	nl := c.waitLeader(10 * time.Second)
	v = retry(nl, "RL.CHECK", "COST", 0, "filed", "ip", "login", "u").([]any)
	if v[2].([]any)[4] != int64(4) || v[3].([]any)[4] != int64(0) {
		t.Fatalf("after the leader kill: %v", v)
	}
	retry(nl, "RL.POLICY", "SET", "login", "ALLOW", 6, slowRate)
	retry(nl, "RL.POLICY", "DEL", "filed")
	// The killed node catches up when it comes back (without the file,
	// which would replace them).
	c.extra = nil
	c.launch(leader)
	getOn(leader, "login", []any{"login", "ALLOW", "6", "0.001"})
	getOn(leader, "filed", nil)
	c.converge(20 * time.Second)

	// The whole cluster restarts: the policies come back from the log and
	// snapshots.
	for _, n := range c.nodes {
		c.stop(n)
	}
	for _, n := range c.nodes {
		c.launch(n)
	}
	c.waitLeader(20 * time.Second)
	for _, n := range c.nodes {
		getOn(n, "login", []any{"login", "ALLOW", "6", "0.001"})
		getOn(n, "filed", nil)
	}
	// 3 of 3 used, raised to 6: the 3 in use carry over, 3 are left.
	v = retry(c.nodes[0], "RL.CHECK", "COST", 0, "login", "u").([]any)
	if v[2].([]any)[3] != int64(6) || v[2].([]any)[4] != int64(3) {
		t.Fatalf("after the restart: %v", v)
	}
	c.converge(20 * time.Second)
}
