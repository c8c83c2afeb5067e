package clienttest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"

	"github.com/rlserver/rlserver/slots"
)

// TestShardedClients drives one three-process, three-group cluster (the
// Redis Cluster protocol, --cluster-redirect moved) with real cluster
// clients: go-redis in RESP2 and RESP3, rueidis in RESP3 and RESP2,
// redis-cli -c, redis-py's RedisCluster and ioredis's Cluster. Every
// RL.ALLOW and RL.CHECK answer is exact (a rate of one token per 10^6 s,
// so buckets are counters), hash-tagged RL.CHECK tiers work and untagged
// ones get CROSSSLOT, DBSIZE over the masters counts every key once, and
// the clients that know RL.*'s keys (go-redis and redis-py from COMMAND,
// rueidis from Keys) cause no MOVED once warm: the sum of
// cluster_moved_replies over the nodes does not grow over a pass. ioredis
// sends RL.* to a random master (it knows only Redis's own commands'
// keys), so its answers are checked and its MOVED are only logged. A node
// that does not lead a key's group answers MOVED and never charges the
// key.
//
// The subtests share the cluster and run in order, each with its own key
// prefix. The commit timeout is 10 s rather than the harness's 2 s, so a
// loaded machine slows the test instead of turning replies into UNKNOWN;
// the few UNKNOWN (or CLUSTERDOWN, TRYAGAIN) replies a leader change can
// still cause are tolerated and tracked (see ledger).
func TestShardedClients(t *testing.T) {
	started := time.Now()
	c := startSharded(t, 3, "--commit-timeout", "10s")
	c.waitPreferred(3, 20*time.Second)
	sc := &shardedClients{c: c, book: newLedger()}
	t.Logf("cluster up in %v", time.Since(started).Round(time.Millisecond))

	// One policy for the RL.CHECK tiers, through any node: the node
	// applies it to every group.
	if v, err := rawDo(c.nodes[0].respAddr, 15*time.Second, "RL.POLICY", "SET", "tier", "ALLOW", strconv.Itoa(shardedCap), shardedRate); err != nil || v.str != "OK" {
		t.Fatalf("RL.POLICY SET tier: %v, %v", v, err)
	}

	for _, proto := range []int{2, 3} {
		t.Run(fmt.Sprintf("GoRedisRESP%d", proto), func(t *testing.T) { sc.goRedis(t, proto) })
	}
	t.Run("Rueidis", sc.rueidis)
	t.Run("RedisCLI", sc.redisCLI)
	t.Run("NonOwnerNeverCharges", sc.nonOwner)
	t.Run("RedisPy", sc.redisPy)
	t.Run("IORedis", sc.ioredis)

	// Every key created above lives in exactly one group, on every replica.
	sc.checkDBSize(t)
	c.converge(20 * time.Second)
	total := 0
	for _, g := range groupsOf(c.nodes[0]) {
		total += g.keys
	}
	if sure, maybe := sc.book.created(); total < sure || total > sure+maybe {
		t.Errorf("RL.CLUSTER GROUPS counts %d keys over the groups; %d were created (and %d perhaps)", total, sure, maybe)
	}
	t.Logf("MOVED per warm pass: %s; total runtime %v", strings.Join(sc.summary, ", "), time.Since(started).Round(time.Millisecond))
}

// shardedClients is the state the subtests of TestShardedClients share.
type shardedClients struct {
	c       *pcluster
	book    *ledger
	mu      sync.Mutex
	summary []string // "client: MOVED n" for the final log
}

func (sc *shardedClients) note(format string, args ...any) {
	sc.mu.Lock()
	sc.summary = append(sc.summary, fmt.Sprintf(format, args...))
	sc.mu.Unlock()
}

// Every bucket here: capacity shardedCap, one token per 10^6 s, so
// remaining counts are exact for the test's lifetime. The RL.CHECK policy
// "tier" is the same bucket.
const (
	shardedCap  = 20
	shardedRate = "0.000001"
)

// ledger tracks, per key, the tokens spent: exact after every answered
// call, and widened by the cost of a call answered UNKNOWN (the server
// could not tell whether it was applied: a leader change or a commit
// timeout), until the next answer pins it again.
type ledger struct {
	mu     sync.Mutex
	lo, hi map[string]int64
}

func newLedger() *ledger { return &ledger{lo: map[string]int64{}, hi: map[string]int64{}} }

// answered records an allowed call of cost 1 on key that left remaining.
func (l *ledger) answered(key string, remaining int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	spent := shardedCap - remaining
	if lo, hi := l.lo[key]+1, l.hi[key]+1; spent < lo || spent > hi {
		if lo == hi {
			return fmt.Errorf("%s: %d remaining; want %d", key, remaining, shardedCap-lo)
		}
		return fmt.Errorf("%s: %d remaining; want %d to %d", key, remaining, shardedCap-hi, shardedCap-lo)
	}
	l.lo[key], l.hi[key] = spent, spent
	return nil
}

// unknown records a call of cost 1 on key that may have been applied.
func (l *ledger) unknown(key string) {
	l.mu.Lock()
	l.hi[key]++
	l.mu.Unlock()
}

// created returns how many keys surely hold state (a call on them was
// applied; nothing refills, so they never expire) and how many perhaps do.
func (l *ledger) created() (sure, maybe int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for k, hi := range l.hi {
		if l.lo[k] > 0 {
			sure++
		} else if hi > 0 {
			maybe++
		}
	}
	return sure, maybe
}

// movedTotal sums cluster_moved_replies over every node's INFO stats.
func (sc *shardedClients) movedTotal(t *testing.T) int64 {
	t.Helper()
	var sum int64
	for _, n := range sc.c.nodes {
		v, err := rawDo(n.respAddr, 5*time.Second, "INFO", "stats")
		if err != nil || v.kind == '-' {
			t.Fatalf("INFO stats on %s: %v, %v", n.id, v, err)
		}
		found := false
		for _, line := range strings.Split(v.str, "\r\n") {
			if val, ok := strings.CutPrefix(line, "cluster_moved_replies:"); ok {
				m, err := strconv.ParseInt(val, 10, 64)
				if err != nil {
					t.Fatalf("INFO stats on %s: %q", n.id, line)
				}
				sum += m
				found = true
			}
		}
		if !found {
			t.Fatalf("INFO stats on %s has no cluster_moved_replies:\n%s", n.id, v.str)
		}
	}
	return sum
}

// owner returns the node CLUSTER SLOTS (asked of every node, which must
// agree) names as the leader of key's slot, and the slot.
func (sc *shardedClients) owner(t *testing.T, key string) (*cnode, int) {
	t.Helper()
	slot := slots.OfString(key)
	var owner *cnode
	for _, n := range sc.c.nodes {
		v, err := rawDo(n.respAddr, 5*time.Second, "CLUSTER", "SLOTS")
		if err != nil || v.kind != '*' {
			t.Fatalf("CLUSTER SLOTS on %s: %v, %v", n.id, v, err)
		}
		var addr string
		for _, r := range v.elems {
			if len(r.elems) >= 3 && r.elems[0].num <= int64(slot) && int64(slot) <= r.elems[1].num && len(r.elems[2].elems) >= 2 {
				addr = fmt.Sprintf("%s:%d", r.elems[2].elems[0].str, r.elems[2].elems[1].num)
			}
		}
		var o *cnode
		for _, m := range sc.c.nodes {
			if m.respAddr == addr {
				o = m
			}
		}
		if o == nil || (owner != nil && o != owner) {
			t.Fatalf("slot %d of %q: %s says %q, another node said %v", slot, key, n.id, addr, owner)
		}
		owner = o
	}
	return owner, slot
}

// checkDBSize sums DBSIZE over the masters go-redis finds (each counts the
// groups it leads; a process that leads two groups is one master) and
// wants every key created so far. It asks again for a while if the sum is
// off, as a leader change between two masters' answers can count a group
// twice or not at all.
func (sc *shardedClients) checkDBSize(t *testing.T) {
	t.Helper()
	ctx := context.Background()
	sure, maybe := sc.book.created()
	var sum int64
	var masters int
	var err error
	ok := pollFor(10*time.Second, func() bool {
		cc := newClusterClient(t, sc.c, 2)
		defer cc.Close()
		var mu sync.Mutex
		sum, masters = 0, 0
		err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
			n, err := m.DBSize(ctx).Result()
			mu.Lock()
			sum += n
			masters++
			mu.Unlock()
			return err
		})
		return err == nil && sum >= int64(sure) && sum <= int64(sure+maybe)
	})
	if !ok {
		t.Fatalf("DBSIZE over %d masters: %d, %v; want %d (+%d perhaps)", masters, sum, err, sure, maybe)
	}
}

// newClusterClient is a go-redis cluster client seeded with every node.
// Its read timeout is above the commit timeout, so it never retries a
// command the server is still committing.
func newClusterClient(t *testing.T, c *pcluster, proto int) *redis.ClusterClient {
	var addrs []string
	for _, n := range c.nodes {
		addrs = append(addrs, n.respAddr)
	}
	cc := redis.NewClusterClient(&redis.ClusterOptions{
		Addrs:        addrs,
		Protocol:     proto,
		DialTimeout:  2 * time.Second,
		ReadTimeout:  15 * time.Second,
		WriteTimeout: 5 * time.Second,
	})
	t.Cleanup(func() { cc.Close() })
	return cc
}

// parallelDo runs f(0..n-1) on a few goroutines.
func parallelDo(n int, f func(i int)) {
	const workers = 8
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := w; i < n; i += workers {
				f(i)
			}
		}()
	}
	wg.Wait()
}

// asInt reads an integer out of a go-redis, rueidis or JSON-decoded reply.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int64:
		return x, true
	case json.Number:
		n, err := x.Int64()
		return n, err == nil
	}
	return 0, false
}

// allowRemaining checks an RL.ALLOW reply (allowed, retry 0, a reset time)
// and returns its remaining count.
func allowRemaining(v any) (int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 4 {
		return 0, fmt.Errorf("reply %v (%T); want 4 integers", v, v)
	}
	var r [4]int64
	for i, e := range a {
		if r[i], ok = asInt(e); !ok {
			return 0, fmt.Errorf("reply %v: element %d is %T", v, i+1, e)
		}
	}
	if r[0] != 1 || r[2] != 0 || r[3] <= 0 {
		return 0, fmt.Errorf("reply %v; want [1 remaining 0 reset>0]", r)
	}
	return r[1], nil
}

// tiersRemaining checks an allowed RL.CHECK reply over tiers of policy
// "tier" on keys, and returns each tier's remaining count.
func tiersRemaining(v any, keys []string) ([]int64, error) {
	a, ok := v.([]any)
	if !ok || len(a) != 2+len(keys) {
		return nil, fmt.Errorf("RL.CHECK reply %v; want allowed, deciding tier and %d tiers", v, len(keys))
	}
	if n, _ := asInt(a[0]); n != 1 {
		return nil, fmt.Errorf("RL.CHECK reply %v: not allowed", v)
	}
	var out []int64
	for i, k := range keys {
		tier, ok := a[2+i].([]any)
		if !ok || len(tier) != 8 || tier[0] != "tier" || tier[1] != k {
			return nil, fmt.Errorf("RL.CHECK reply %v: tier %d; want tier %s", v, i+1, k)
		}
		allowed, _ := asInt(tier[2])
		limit, _ := asInt(tier[3])
		rem, ok := asInt(tier[4])
		if allowed != 1 || limit != shardedCap || !ok {
			return nil, fmt.Errorf("RL.CHECK reply %v: tier %d; want allowed, limit %d", v, i+1, shardedCap)
		}
		out = append(out, rem)
	}
	return out, nil
}

// crossSlotPair returns two keys in different slots.
func crossSlotPair(prefix string) (string, string) {
	a := prefix + "a"
	for i := 0; ; i++ {
		b := fmt.Sprintf("%sb%d", prefix, i)
		if slots.OfString(b) != slots.OfString(a) {
			return a, b
		}
	}
}

const crossSlotText = "CROSSSLOT Keys in request don't hash to the same slot"

// workload is one pass's commands: RL.ALLOW on keys keys and RL.CHECK on
// users pairs of hash-tagged tiers, under prefix.
func workload(prefix string, keys, users int) [][]any {
	var cmds [][]any
	for i := range keys {
		cmds = append(cmds, []any{"RL.ALLOW", fmt.Sprintf("%sk%d", prefix, i), strconv.Itoa(shardedCap), shardedRate, "1"})
	}
	for i := range users {
		cmds = append(cmds, []any{"RL.CHECK", "tier", fmt.Sprintf("{%su%d}:a", prefix, i), "tier", fmt.Sprintf("{%su%d}:b", prefix, i)})
	}
	return cmds
}

// cmdKeys lists the keys of a workload command.
func cmdKeys(cmd []any) []string {
	if cmd[0] == "RL.CHECK" {
		return []string{cmd[2].(string), cmd[4].(string)}
	}
	return []string{cmd[1].(string)}
}

// runPass runs cmds through run (which returns each command's reply or
// error) and checks every answer against the ledger. UNKNOWN replies widen
// the ledger; UNKNOWN, CLUSTERDOWN and TRYAGAIN are tolerated on up to 5%
// of the commands (a leader change under load); any other error fails.
func (sc *shardedClients) runPass(t *testing.T, client string, cmds [][]any, run func([][]any) []any) (tolerated int) {
	t.Helper()
	out := run(cmds)
	for i, v := range out {
		keys := cmdKeys(cmds[i])
		if err, ok := v.(error); ok {
			msg := err.Error()
			switch {
			case strings.Contains(msg, "UNKNOWN "):
				for _, k := range keys {
					sc.book.unknown(k)
				}
			case strings.Contains(msg, "CLUSTERDOWN") || strings.Contains(msg, "TRYAGAIN"):
			default:
				t.Fatalf("%s: %v: %v", client, cmds[i], err)
			}
			tolerated++
			t.Logf("%s: %v: %v (tolerated)", client, cmds[i], err)
			continue
		}
		var err error
		if cmds[i][0] == "RL.CHECK" {
			var rems []int64
			if rems, err = tiersRemaining(v, keys); err == nil {
				for j, k := range keys {
					if err = sc.book.answered(k, rems[j]); err != nil {
						break
					}
				}
			}
		} else {
			var rem int64
			if rem, err = allowRemaining(v); err == nil {
				err = sc.book.answered(keys[0], rem)
			}
		}
		if err != nil {
			t.Fatalf("%s: %v: %v", client, cmds[i], err)
		}
	}
	if tolerated > len(cmds)/20 {
		t.Fatalf("%s: %d of %d commands failed with UNKNOWN, CLUSTERDOWN or TRYAGAIN", client, tolerated, len(cmds))
	}
	return tolerated
}

// passes runs a cold pass, then warm passes, and records the MOVED counts.
// With mustBeWarm a warm pass must cause no MOVED. Elections on a loaded
// machine move groups between nodes, and then MOVED is the right answer,
// so a pass with MOVED fails the test only if it was calm: no group leader
// changed between its start and its end (as every node sees them) and no
// command was answered UNKNOWN, CLUSTERDOWN or TRYAGAIN. Otherwise another
// warm pass runs, up to five. Without mustBeWarm one warm pass runs and
// its MOVED are logged.
func (sc *shardedClients) passes(t *testing.T, client string, cmds [][]any, run func([][]any) []any, mustBeWarm bool) {
	t.Helper()
	m0 := sc.movedTotal(t)
	sc.runPass(t, client, cmds, run)
	cold := sc.movedTotal(t) - m0
	for attempt := 1; ; attempt++ {
		before := sc.allLeaders()
		m0 = sc.movedTotal(t)
		tolerated := sc.runPass(t, client, cmds, run)
		warm := sc.movedTotal(t) - m0
		after := sc.allLeaders()
		t.Logf("%s: MOVED %d in the cold pass, %d in warm pass %d (%d commands each)", client, cold, warm, attempt, len(cmds))
		calm := tolerated == 0 && reflect.DeepEqual(before, after)
		switch {
		case !mustBeWarm:
			sc.note("%s %d of %d (cold %d)", client, warm, len(cmds), cold)
			return
		case warm == 0:
			sc.note("%s %d (cold %d, warm pass %d)", client, warm, cold, attempt)
			return
		case calm:
			t.Errorf("%s caused %d MOVED in a warm pass while every group kept its leader (%v); want 0", client, warm, after)
			return
		case attempt == 5:
			t.Fatalf("%s: no calm warm pass in 5: group leaders kept changing (the machine is too loaded?)", client)
		}
		t.Logf("%s: group leaders changed during the pass (%v, then %v) or %d commands failed; another warm pass", client, before, after, tolerated)
	}
}

// allLeaders lists every node's view of the group leaders.
func (sc *shardedClients) allLeaders() []map[int]string {
	var out []map[int]string
	for _, n := range sc.c.nodes {
		out = append(out, groupLeaders(n))
	}
	return out
}

// goRedis: RL.ALLOW over 300 keys and hash-tagged RL.CHECK, CROSSSLOT for
// untagged tiers, DBSIZE over the masters, no MOVED once warm.
func (sc *shardedClients) goRedis(t *testing.T, proto int) {
	ctx := context.Background()
	cc := newClusterClient(t, sc.c, proto)
	prefix := fmt.Sprintf("gr%d:", proto)
	run := func(cmds [][]any) []any {
		out := make([]any, len(cmds))
		parallelDo(len(cmds), func(i int) {
			v, err := cc.Do(ctx, cmds[i]...).Result()
			if err != nil {
				out[i] = err
			} else {
				out[i] = v
			}
		})
		return out
	}
	sc.passes(t, fmt.Sprintf("go-redis RESP%d", proto), workload(prefix, 300, 30), run, true)

	// Untagged tiers in different slots: CROSSSLOT, and nothing created.
	a, b := crossSlotPair(prefix + "x")
	err := cc.Do(ctx, "RL.CHECK", "tier", a, "tier", b).Err()
	if err == nil || err.Error() != crossSlotText {
		t.Fatalf("RL.CHECK across slots %d and %d: %v; want %s", slots.OfString(a), slots.OfString(b), err, crossSlotText)
	}
	if n, err := cc.Exists(ctx, a, a).Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS %s after CROSSSLOT: %d, %v; want 0", a, n, err)
	}
	sc.checkDBSize(t)
}

// rueidis: the same workload through Arbitrary().Keys(), in RESP3 (its
// default) and with AlwaysRESP2.
func (sc *shardedClients) rueidis(t *testing.T) {
	var addrs []string
	for _, n := range sc.c.nodes {
		addrs = append(addrs, n.respAddr)
	}
	ctx := context.Background()
	for _, resp2 := range []bool{false, true} {
		rc, err := rueidis.NewClient(rueidis.ClientOption{InitAddress: addrs, DisableCache: true, AlwaysRESP2: resp2})
		if err != nil {
			t.Fatalf("rueidis.NewClient(%v): %v", addrs, err)
		}
		defer rc.Close()
		run := func(cmds [][]any) []any {
			out := make([]any, len(cmds))
			parallelDo(len(cmds), func(i int) {
				c := cmds[i]
				var cmd rueidis.Completed
				if c[0] == "RL.CHECK" {
					cmd = rc.B().Arbitrary("RL.CHECK", "tier").Keys(c[2].(string)).Args("tier", c[4].(string)).Build()
				} else {
					cmd = rc.B().Arbitrary("RL.ALLOW").Keys(c[1].(string)).Args(c[2].(string), c[3].(string), c[4].(string)).Build()
				}
				v, err := rc.Do(ctx, cmd).ToAny()
				if err != nil {
					out[i] = err
				} else {
					out[i] = v
				}
			})
			return out
		}
		proto := map[bool]int{false: 3, true: 2}[resp2]
		sc.passes(t, fmt.Sprintf("rueidis RESP%d", proto), workload(fmt.Sprintf("rue%d:", proto), 300, 30), run, true)
	}
	sc.checkDBSize(t)
}

// redisCLI: plain redis-cli at a node that does not lead the key's group
// gets the MOVED error and charges nothing; redis-cli -c there follows it
// and gets the decision.
func (sc *shardedClients) redisCLI(t *testing.T) {
	path, err := exec.LookPath("redis-cli")
	if err != nil {
		t.Fatalf("redis-cli is needed (apt-get install redis-tools): %v", err)
	}
	run := func(n *cnode, args ...string) (string, int) {
		t.Helper()
		_, port, _ := strings.Cut(n.respAddr, ":")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cmd := exec.CommandContext(ctx, path, append([]string{"-h", "127.0.0.1", "-p", port}, args...)...)
		out, err := cmd.CombinedOutput()
		if ctx.Err() != nil {
			t.Fatalf("redis-cli %q: timed out", args)
		}
		if err != nil {
			if _, ok := err.(*exec.ExitError); !ok {
				t.Fatalf("redis-cli %q: %v", args, err)
			}
		}
		return string(out), cmd.ProcessState.ExitCode()
	}
	key := "cli:k"
	owner, slot := sc.owner(t, key)
	var other *cnode
	for _, n := range sc.c.nodes {
		if n != owner {
			other = n
		}
	}
	capacity := strconv.Itoa(shardedCap)
	moved := fmt.Sprintf("MOVED %d %s", slot, owner.respAddr)
	if out, _ := run(other, "RL.ALLOW", key, capacity, shardedRate); strings.TrimSpace(out) != moved {
		t.Fatalf("redis-cli -p (%s, not the leader of slot %d) RL.ALLOW: %q; want %q", other.id, slot, out, moved)
	}
	if out, _ := run(other, "--no-raw", "RL.ALLOW", key, capacity, shardedRate); strings.TrimSpace(out) != "(error) "+moved {
		t.Fatalf("redis-cli --no-raw -p (%s) RL.ALLOW: %q; want %q", other.id, out, "(error) "+moved)
	}
	// -c follows the MOVED (one more in INFO) to the leader; the refused
	// calls charged nothing.
	for _, n := range []*cnode{other, owner} {
		out, code := run(n, "-c", "RL.ALLOW", key, capacity, shardedRate)
		lines := strings.Fields(out)
		if code != 0 || len(lines) != 4 || lines[0] != "1" || lines[2] != "0" {
			t.Fatalf("redis-cli -c -p (%s) RL.ALLOW %s: %q (exit %d); want allowed", n.id, key, out, code)
		}
		rem, _ := strconv.ParseInt(lines[1], 10, 64)
		if err := sc.book.answered(key, rem); err != nil {
			t.Fatalf("redis-cli -c -p (%s) RL.ALLOW: %v", n.id, err)
		}
	}
}

// nonOwner: RL.ALLOW, a pipeline of them, RL.RESET and RL.CHECK at both
// nodes that do not lead a fresh key's group answer MOVED to its leader;
// the leader then sees the key's full capacity, and the replicas converge.
func (sc *shardedClients) nonOwner(t *testing.T) {
	const key = "{moved}:k"
	capacity := strconv.Itoa(shardedCap)
	owner, slot := sc.owner(t, key)
	moved := fmt.Sprintf("MOVED %d %s", slot, owner.respAddr)
	for _, n := range sc.c.nodes {
		if n == owner {
			continue
		}
		for _, args := range [][]string{
			{"RL.ALLOW", key, capacity, shardedRate, "1"},
			{"RL.ALLOW", key, capacity, shardedRate, capacity},
			{"RL.CHECK", "tier", key, "tier", "{moved}:other"},
			{"RL.RESET", key},
		} {
			v, err := rawDo(n.respAddr, 5*time.Second, args...)
			if err != nil || v.kind != '-' || v.str != moved {
				t.Fatalf("%q at %s (not the leader of slot %d): %v, %v; want -%s", args, n.id, slot, v, err, moved)
			}
		}
		// A pipeline: every command answered MOVED, in order.
		nc, err := net.DialTimeout("tcp", n.respAddr, ioTimeout)
		if err != nil {
			t.Fatal(err)
		}
		conn := &rawConn{t: t, c: nc, r: bufio.NewReader(nc)}
		var b strings.Builder
		for range 10 {
			b.WriteString("*5\r\n")
			for _, a := range []string{"RL.ALLOW", key, capacity, shardedRate, "1"} {
				fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		b.WriteString("*1\r\n$4\r\nPING\r\n")
		conn.send(b.String())
		for i := range 10 {
			if v := conn.read(); v.kind != '-' || v.str != moved {
				t.Fatalf("pipelined RL.ALLOW %d at %s: %v; want -%s", i, n.id, v, moved)
			}
		}
		if v := conn.read(); v.str != "PONG" {
			t.Fatalf("PING after the pipeline at %s: %v", n.id, v)
		}
		nc.Close()
	}
	// None of the 28 refused commands charged: the leader sees a full
	// bucket.
	v, err := rawDo(owner.respAddr, 15*time.Second, "RL.ALLOW", key, capacity, shardedRate, "1")
	if err != nil || len(v.elems) != 4 || v.elems[0].num != 1 {
		t.Fatalf("RL.ALLOW %s at its leader %s: %v, %v; want allowed", key, owner.id, v, err)
	}
	if err := sc.book.answered(key, v.elems[1].num); err != nil {
		t.Fatalf("RL.ALLOW at the leader after 28 MOVED: %v", err)
	}
	v, err = rawDo(owner.respAddr, 15*time.Second, "EXISTS", "{moved}:other")
	if err != nil || v.num != 0 {
		t.Fatalf("EXISTS {moved}:other at %s: %v, %v; want 0 (the refused RL.CHECK created nothing)", owner.id, v, err)
	}
	sc.c.converge(20 * time.Second)
}

// needCompat fails (in CI) or skips (elsewhere) when a client the test
// drives through a script is missing.
func needCompat(t *testing.T, what string, err error, out []byte) {
	t.Helper()
	if err == nil {
		return
	}
	msg := fmt.Sprintf("%s: %v\n%s", what, err, out)
	if os.Getenv("CI") != "" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}

// compatDriver is a client script in clienttest/compat driven over
// stdin/stdout: a JSON list of commands in, a JSON list of replies out.
type compatDriver struct {
	name   string
	cmd    *exec.Cmd
	in     io.WriteCloser
	out    *bufio.Reader
	stderr *syncBuffer
	done   chan struct{}
}

// startDriver starts argv in clienttest/compat and waits for its
// {"ready": version} line.
func startDriver(t *testing.T, name string, argv ...string) *compatDriver {
	t.Helper()
	d := &compatDriver{name: name, stderr: &syncBuffer{}, done: make(chan struct{})}
	d.cmd = exec.Command(argv[0], argv[1:]...)
	d.cmd.Dir = "compat"
	d.cmd.Stderr = d.stderr
	var err error
	if d.in, err = d.cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := d.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.out = bufio.NewReader(stdout)
	if err := d.cmd.Start(); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	go func() { d.cmd.Wait(); close(d.done) }()
	t.Cleanup(func() {
		d.in.Close()
		select {
		case <-d.done:
		case <-time.After(10 * time.Second):
			d.cmd.Process.Kill()
			<-d.done
		}
	})
	var ready struct{ Ready string }
	if err := json.Unmarshal(d.line(t), &ready); err != nil || ready.Ready == "" {
		t.Fatalf("%s: no ready line: %v\nstderr:\n%s", name, err, d.stderr)
	}
	t.Logf("%s %s connected", name, ready.Ready)
	return d
}

// line reads one line of output within 60 s.
func (d *compatDriver) line(t *testing.T) []byte {
	t.Helper()
	type res struct {
		b   []byte
		err error
	}
	ch := make(chan res, 1)
	go func() {
		b, err := d.out.ReadBytes('\n')
		ch <- res{b, err}
	}()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("%s: reading its output: %v\nstderr:\n%s", d.name, r.err, d.stderr)
		}
		return r.b
	case <-time.After(60 * time.Second):
		d.cmd.Process.Kill()
		t.Fatalf("%s: no answer within 60 s\nstderr:\n%s", d.name, d.stderr)
		return nil
	}
}

// do runs cmds one after the other and returns their replies: integers as
// json.Number, strings, arrays as []any, errors as compatError.
func (d *compatDriver) do(t *testing.T, cmds [][]any) []any {
	t.Helper()
	b, err := json.Marshal(cmds)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		t.Fatalf("%s: %v\nstderr:\n%s", d.name, err, d.stderr)
	}
	dec := json.NewDecoder(bytes.NewReader(d.line(t)))
	dec.UseNumber()
	var out []any
	if err := dec.Decode(&out); err != nil || len(out) != len(cmds) {
		t.Fatalf("%s: %d replies, %v; want %d", d.name, len(out), err, len(cmds))
	}
	for i, v := range out {
		if m, ok := v.(map[string]any); ok {
			if e, ok := m["error"].(string); ok {
				out[i] = compatError(e)
			}
		}
	}
	return out
}

// compatError is an error a script's client raised for one command.
type compatError string

func (e compatError) Error() string { return string(e) }

// redisPy: Debian's python3-redis (run with /usr/bin/python3, its
// interpreter) RedisCluster: routes RL.ALLOW by COMMAND's key positions and
// RL.CHECK (movablekeys) by COMMAND GETKEYS, so nothing is MOVED once warm;
// it refuses tiers in different slots itself, before sending.
func (sc *shardedClients) redisPy(t *testing.T) {
	const python = "/usr/bin/python3"
	out, err := exec.Command(python, "-c", "import redis.cluster").CombinedOutput()
	needCompat(t, python+" with redis-py (apt-get install python3-redis)", err, out)
	host, port, _ := strings.Cut(sc.c.nodes[0].respAddr, ":")
	d := startDriver(t, "redis-py", python, "redispy_driver.py", host, port)
	run := func(cmds [][]any) []any { return d.do(t, cmds) }
	sc.passes(t, "redis-py", workload("py:", 200, 20), run, true)
	a, b := crossSlotPair("py:x")
	r := d.do(t, [][]any{{"RL.CHECK", "tier", a, "tier", b}})
	if e, ok := r[0].(compatError); !ok || !strings.Contains(string(e), "RL.CHECK - all keys must map to the same key slot") {
		t.Errorf("redis-py RL.CHECK across slots: %v; want redis-py's own refusal (it found both keys with COMMAND GETKEYS)", r[0])
	}
}

// ioredis: ioredis's Cluster (npm ci in clienttest/compat installs the
// locked version) in RESP2 and RESP3. It sends RL.* to a random master, so
// about two thirds of its calls are MOVED and followed: the answers must
// be right; the MOVED count is only logged.
func (sc *shardedClients) ioredis(t *testing.T) {
	compatNode(t, "ioredis") // limiters_test.go
	var addrs []string
	for _, n := range sc.c.nodes {
		addrs = append(addrs, n.respAddr)
	}
	for _, proto := range []string{"2", "3"} {
		d := startDriver(t, "ioredis RESP"+proto, append([]string{"node", "ioredis_driver.js", proto}, addrs...)...)
		run := func(cmds [][]any) []any { return d.do(t, cmds) }
		sc.passes(t, "ioredis RESP"+proto, workload("io"+proto+":", 150, 15), run, false)
	}
}
