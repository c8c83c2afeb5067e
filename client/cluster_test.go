package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/client/internal/rltest"
)

func TestKeyPos(t *testing.T) {
	for _, tc := range []struct {
		args []any
		want int8
	}{
		{[]any{"RL.ALLOW", "k", int64(1), "1", int64(1)}, 1},
		{[]any{"RL.RESET", "a", "b"}, 1},
		{[]any{"RL.CHECK", "p", "k"}, 2},
		{[]any{"rl.check", "p", "k", "q", "k2"}, 2},
		{[]any{"RL.CHECK", "COST", int64(3), "p", "k"}, 4},
		{[]any{"RL.CHECK", "cost", int64(0), "p", "k"}, 4},
		{[]any{"RL.POLICY", "SET", "p", "ALLOW", int64(1), "1"}, 0},
	} {
		if got := keyPos(tc.args); got != tc.want {
			t.Errorf("keyPos(%v) = %d, want %d", tc.args, got, tc.want)
		}
	}
}

// clusterKeys returns n keys spread over every group, and how many fall
// in each of the cluster's slot ranges.
func clusterKeys(t *testing.T, c *rltest.Cluster, prefix string, n int) []string {
	t.Helper()
	slots, err := c.Slots(c.Nodes[0].Addr)
	if err != nil {
		t.Fatal(err)
	}
	perRange := make([]int, len(slots))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%s:%d", prefix, i)
		s := hashSlot(keys[i])
		for j, r := range slots {
			if r.Start <= s && s <= r.End {
				perRange[j]++
			}
		}
	}
	for j, k := range perRange {
		if k == 0 {
			t.Fatalf("no key in slots %d-%d", slots[j].Start, slots[j].End)
		}
	}
	return keys
}

// One sharded cluster of three processes and three groups: the hash slot
// the client computes is the server's, decisions are exact for keys in
// every group, RL.CHECK works in both forms with hash-tagged tiers, Reset
// takes keys of several slots, and no call pays a -MOVED.
func TestClusterDecisions(t *testing.T) {
	// Exact decisions need stable leaders: on a loaded machine a stall
	// past the heartbeat timeout (the default 400 ms, even 1 s at a load
	// average of 20) starts an election, and the commands in flight then
	// get UNKNOWN (the client fails open).
	cl := rltest.StartCluster(t, serverBin, 3, "--heartbeat-timeout", "2s", "--election-timeout", "2s")
	ctx := context.Background()
	movedAtStart := cl.Moved()

	for _, k := range []string{"", "a", "user:42", "{user:42}:ip", "{}x", "x{}", "{a", "a}{b}", "{{a}}", "\xff\x00é"} {
		v, err := rltestDo(cl, "CLUSTER", "KEYSLOT", k)
		if err != nil || v != int64(hashSlot(k)) {
			t.Errorf("hashSlot(%q) = %d, server says %v %v", k, hashSlot(k), v, err)
		}
	}

	c := newClient(t, Options{Addrs: cl.Addrs()[:1], Cluster: true, Timeout: 5 * time.Second})
	keys := clusterKeys(t, cl, "user", 300)
	users := clusterKeys(t, cl, "u", 100)
	if err := c.DefinePolicy(ctx, "per-ip", TokenBucket(5, slow)); err != nil {
		t.Fatal(err)
	}
	if err := c.DefinePolicy(ctx, "per-user", FixedWindow(4, time.Hour)); err != nil {
		t.Fatal(err)
	}
	tiers := func(u string) []Tier { return []Tier{{"per-ip", "{" + u + "}:ip"}, {"per-user", "{" + u + "}:user"}} }

	// pass makes the calls of round r (0 or 1) and checks their exact
	// results.
	pass := func(r int64) {
		t.Helper()
		for _, k := range keys {
			for i := int64(1); i <= 2; i++ {
				d, err := c.Allow(ctx, k, 4, slow)
				if err != nil || !d.Allowed || d.Remaining != 4-2*r-i || d.Source != FromServer {
					t.Fatalf("round %d, %s call %d: %+v %v", r, k, i, d, err)
				}
			}
		}
		for _, u := range users {
			// Plain form, then the COST form: 1 + 1 per round on
			// per-user (limit 4), 1 + 1 on per-ip (capacity 5).
			d, err := c.Check(ctx, tiers(u))
			if err != nil || !d.Allowed || d.Tier != 2 || d.Remaining != 3-2*r || d.Tiers[0].Remaining != 4-2*r {
				t.Fatalf("round %d, check %s: %+v %v", r, u, d, err)
			}
			d, err = c.Check(ctx, tiers(u), WithCost(1+r))
			switch r {
			case 0:
				if err != nil || !d.Allowed || d.Remaining != 2 || d.Tiers[0].Remaining != 3 {
					t.Fatalf("check %s COST 1: %+v %v", u, d, err)
				}
			case 1: // cost 2: fits per-ip (2 left), not per-user (1 left)
				if err != nil || d.Allowed || d.Tier != 2 || !d.Tiers[0].Allowed || d.Tiers[0].Remaining != 0 || d.Tiers[1].Remaining != 1 {
					t.Fatalf("check %s COST 2: %+v %v", u, d, err)
				}
				// Nothing was charged (COST 0, the other form again).
				if d, err := c.Check(ctx, tiers(u), WithCost(0)); err != nil || d.Tiers[0].Remaining != 2 || d.Tiers[1].Remaining != 1 {
					t.Fatalf("check %s COST 0: %+v %v", u, d, err)
				}
			}
		}
	}
	pass(0)
	movedWarm := cl.Moved()
	pass(1)
	movedAfter := cl.Moved()
	t.Logf("MOVED replies: %d during the first pass (%d calls), %d during the second (%d calls)",
		movedWarm-movedAtStart, 2*len(keys)+2*len(users), movedAfter-movedWarm, 2*len(keys)+3*len(users))
	if movedAfter != movedWarm {
		t.Errorf("%d MOVED replies after warm-up, want 0", movedAfter-movedWarm)
	}
	// The control: go-redis's cluster client on its own takes COMMAND's
	// first key position (2), which in the COST form is the cost.
	raw := redis.NewClusterClient(&redis.ClusterOptions{Addrs: cl.Addrs()})
	defer raw.Close()
	for _, u := range users[:20] {
		if err := raw.Do(ctx, "RL.CHECK", "COST", 0, "per-ip", "{"+u+"}:ip").Err(); err != nil {
			t.Fatal(err)
		}
	}
	if moved := cl.Moved() - movedAfter; moved == 0 {
		t.Error("RL.CHECK COST without SetFirstKeyPos(4) paid no MOVED: the count proves nothing")
	} else {
		t.Logf("the control: %d MOVED replies for 20 RL.CHECK COST calls without SetFirstKeyPos(4)", moved)
	}

	// Every key holds state; Reset takes them all, in every group.
	if n, err := c.Reset(ctx, keys...); err != nil || n != int64(len(keys)) {
		t.Errorf("reset: %d %v, want %d", n, err, len(keys))
	}
	if d, _ := c.Allow(ctx, keys[0], 4, slow); d.Remaining != 3 {
		t.Errorf("after reset: %+v", d)
	}
	// Tiers in different slots are the caller's bug.
	_, err := c.Check(ctx, []Tier{{"per-ip", users[0]}, {"per-user", users[1] + "x"}})
	if !errors.Is(err, ErrCommand) || !strings.Contains(err.Error(), "CROSSSLOT") {
		t.Errorf("tiers across slots: %v, want CROSSSLOT", err)
	}
}

// rltestDo sends one command to the cluster's first node.
func rltestDo(cl *rltest.Cluster, args ...any) (any, error) {
	rdb := redis.NewClient(&redis.Options{Addr: cl.Nodes[0].Addr, DisableIdentity: true})
	defer rdb.Close()
	return rdb.Do(context.Background(), args...).Result()
}

// SIGKILL the leader of one group: calls for that group's keys are served
// again within a few seconds (an election, then the client's slot-map
// reload), and the state survives. The default election timeouts run, so
// the gap logged is the shipped one.
func TestClusterLeaderKilled(t *testing.T) {
	cl := rltest.StartCluster(t, serverBin, 3)
	ctx := context.Background()
	const timeout = 100 * time.Millisecond
	bare := newClient(t, Options{Addrs: cl.Addrs(), Cluster: true, Timeout: timeout, Breaker: BreakerOptions{Failures: -1}})
	guarded := newClient(t, Options{Addrs: cl.Addrs(), Cluster: true, Timeout: timeout, Backstop: &BackstopOptions{}})

	victim := cl.LeaderOf(hashSlot("{g}"))
	// A key of another group, led by another process, if there is one.
	var other string
	for i := 0; other == "" && i < 1000; i++ {
		k := fmt.Sprintf("o%d", i)
		if cl.LeaderOf(hashSlot(k)) != victim {
			other = k
		}
	}
	for _, c := range []*Client{bare, guarded} {
		for range 2 {
			if d, err := c.Allow(ctx, "{g}:kept", 10, slow, WithTimeout(5*time.Second)); err != nil || d.Source != FromServer {
				t.Fatalf("before the kill: %+v %v", d, err)
			}
		}
	}

	cl.Node(victim).Kill()
	killed := time.Now()
	type result struct {
		name        string
		gap         time.Duration
		failed      int
		otherFailed int
		causes      map[string]int // degraded calls by d.Err, addresses cut
	}
	results := make([]result, 2)
	var wg sync.WaitGroup
	for i, c := range []*Client{bare, guarded} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := &results[i]
			r.name = map[int]string{0: "breaker off", 1: "default breaker"}[i]
			r.causes = map[string]int{}
			for n := 0; time.Since(killed) < 15*time.Second; n++ {
				d, err := c.Allow(ctx, fmt.Sprintf("{g}:probe%d", n), 10, slow)
				if err != nil {
					t.Errorf("%s: %v", r.name, err)
					return
				}
				if other != "" {
					if od, _ := c.Allow(ctx, other, 1e6, 1e6); od.Source != FromServer {
						r.otherFailed++
					}
				}
				if d.Source == FromServer {
					r.gap = time.Since(killed)
					return
				}
				r.failed++
				r.causes[cause(d.Err)]++
				time.Sleep(10 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	for _, r := range results {
		t.Logf("%s: the killed leader's group answered again %v after the kill (%d degraded calls: %v; %d on another group's key)",
			r.name, r.gap.Round(time.Millisecond), r.failed, r.causes, r.otherFailed)
		if r.gap == 0 || r.gap > 5*time.Second {
			t.Errorf("%s: group not served within 5 s of its leader's kill", r.name)
		}
	}
	// The new leader has the bucket: 10 - 2 - 2 before the kill.
	if d, err := bare.Allow(ctx, "{g}:kept", 10, slow, WithTimeout(5*time.Second)); err != nil || d.Source != FromServer || d.Remaining != 5 {
		t.Errorf("after the failover: %+v %v, want 5 left", d, err)
	}
	if now := cl.LeaderOf(hashSlot("{g}")); now == victim {
		t.Errorf("slot map still names the killed node %s", victim)
	}
}

// cause shortens a degraded decision's error for a log line: its first
// words, without addresses.
func cause(err error) string {
	msg := strings.TrimPrefix(fmt.Sprint(err), ErrUnavailable.Error()+": ")
	if i := strings.Index(msg, "127.0.0.1"); i >= 0 {
		msg = msg[:i] + "..."
	}
	return msg
}

// A -MOVED that reaches the caller is a failure in cluster mode (the
// redirects ran out while the slot map changed) and a configuration error
// for a plain client pointed at a sharded cluster.
func TestRedirectLeftOver(t *testing.T) {
	plain, cluster := &Client{}, &Client{cluster: true}
	for _, msg := range []string{"MOVED 3999 127.0.0.1:6381", "ASK 3999 127.0.0.1:6381"} {
		if plain.unavailable(msg) || !cluster.unavailable(msg) {
			t.Errorf("%q: plain %v, cluster %v; want false, true", msg, plain.unavailable(msg), cluster.unavailable(msg))
		}
	}
	if cluster.unavailable("CROSSSLOT Keys in request don't hash to the same slot") {
		t.Error("CROSSSLOT is the caller's bug")
	}
}
