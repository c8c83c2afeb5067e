package server

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/command"
	"github.com/rlserver/rlserver/slots"
)

func TestRoutingMovedNeverReachesBackend(t *testing.T) {
	b := newSlotBackend(t, threeNodes())
	addr, srv := serveBackend(t, b)
	mine := keyIn("mine:", 0, 5460)
	theirs := keyIn("theirs:", 5461, 10922)
	rc := dialProto(t, addr, 2)
	// One pipeline: the redirect's error keeps its place among the
	// batched replies.
	for _, cmd := range [][]string{
		{"RL.ALLOW", mine, "10", "1"},
		{"RL.ALLOW", theirs, "10", "1"},
		{"RL.PEEK", theirs, "10", "1"},
		{"PING"},
		{"TTL", theirs},
		{"RL.ALLOW", mine, "10", "1"},
	} {
		rc.send(cmd...)
	}
	moved := "-MOVED " + itoa(slotOf(theirs)) + " 127.0.0.1:7002"
	want := []string{"*[:1 :9 :0 :", moved, moved, "+PONG", moved, "*[:1 :8 :0 :"} // prefixes
	for i, w := range want {
		if got := readValue(t, rc.r).String(); !strings.HasPrefix(got, w) {
			t.Errorf("reply %d = %s, want %s...", i, got, w)
		}
	}
	if got := b.reachedKeys(); !slices.Equal(got, []string{mine, mine}) {
		t.Errorf("keys that reached the backend = %q, want only %q twice", got, mine)
	}
	if r := srv.ClusterRedirects(); r != (ClusterRedirects{Moved: 3}) {
		t.Errorf("ClusterRedirects = %+v, want 3 MOVED", r)
	}
	info := infoFields(rc.do("INFO", "stats").text)
	if info["cluster_moved_replies"] != "3" || info["cluster_crossslot_replies"] != "0" || info["cluster_down_replies"] != "0" {
		t.Errorf("INFO stats cluster_*: %v", info)
	}
	errs := infoFields(rc.do("INFO", "errorstats").text)
	if errs["errorstat_MOVED"] != "count=3" {
		t.Errorf("INFO errorstats = %v, want errorstat_MOVED:count=3", errs)
	}
	cs := infoFields(rc.do("INFO", "commandstats").text)
	if !strings.Contains(cs["cmdstat_rl.peek"], "rejected_calls=1") || !strings.Contains(cs["cmdstat_ttl"], "rejected_calls=1") {
		t.Errorf("INFO commandstats: redirects should count as rejected calls: %v", cs)
	}
}

func TestRoutingCrossSlot(t *testing.T) {
	b := newSlotBackend(t, threeNodes())
	addr, srv := serveBackend(t, b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	if err := rdb.Do(ctx, "RL.POLICY", "SET", "p", "ALLOW", "10", "1").Err(); err != nil {
		t.Fatal(err)
	}
	// Two keys of slots this node leads, but different ones: CROSSSLOT
	// all the same, as Redis (a later move could split them).
	x := keyIn("x", 0, 5460)
	y := keyIn("y", 0, 5460)
	for slotOf(y) == slotOf(x) {
		y += "y"
	}
	for _, cmd := range [][]any{
		{"DEL", x, y},
		{"UNLINK", x, y},
		{"EXISTS", x, x, y},
		{"RL.RESET", x, y},
		{"RL.CHECK", "p", x, "p", y},
		{"RL.CHECK", "COST", "2", "p", x, "p", y},
		// A key of another node among them: still CROSSSLOT, not MOVED.
		{"DEL", x, keyIn("z", 5461, 16383)},
	} {
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || err.Error() != command.ErrCrossSlot {
			t.Errorf("%v: %v, want %s", cmd, err, command.ErrCrossSlot)
		}
	}
	if got := b.reachedKeys(); len(got) != 0 {
		t.Errorf("keys that reached the backend: %q, want none", got)
	}
	// Hash tags put keys in one slot: served, all of them.
	var tagged string
	for n := 0; ; n++ {
		tagged = "user" + itoa(n)
		if s := slotOf(tagged); s <= 5460 {
			break
		}
	}
	k1, k2 := "{"+tagged+"}:login", "{"+tagged+"}:api"
	if r, err := rdb.Do(ctx, "RL.CHECK", "COST", "2", "p", k1, "p", k2).Slice(); err != nil || r[0] != int64(1) {
		t.Errorf("RL.CHECK COST 2 on one tag = %v, %v, want allowed", r, err)
	}
	if n, err := rdb.Do(ctx, "EXISTS", k1, k2, k1).Int(); err != nil || n != 3 {
		t.Errorf("EXISTS on one tag = %d, %v, want 3", n, err)
	}
	if n, err := rdb.Do(ctx, "DEL", k1, k2).Int(); err != nil || n != 2 {
		t.Errorf("DEL on one tag = %d, %v, want 2", n, err)
	}
	if got := b.reachedKeys(); !slices.Equal(got, []string{k1, k2, k1, k2, k1, k1, k2}) {
		t.Errorf("keys that reached the backend = %q", got)
	}
	// Tiers led by another node move together.
	other := "{" + keyIn("o", 10923, 16383) + "}"
	err := rdb.Do(ctx, "RL.CHECK", "p", other+"a", "p", other+"b").Err()
	if want := "MOVED " + itoa(slotOf(other)) + " 127.0.0.1:7003"; err == nil || err.Error() != want {
		t.Errorf("RL.CHECK on another node's tag: %v, want %s", err, want)
	}
	if r := srv.ClusterRedirects(); r != (ClusterRedirects{CrossSlot: 7, Moved: 1}) {
		t.Errorf("ClusterRedirects = %+v, want 7 CROSSSLOT and 1 MOVED", r)
	}
	info := infoFields(rdb.Info(ctx, "stats").Val())
	if info["cluster_crossslot_replies"] != "7" || info["cluster_moved_replies"] != "1" {
		t.Errorf("INFO stats cluster_*: %v", info)
	}
	// CONFIG RESETSTAT starts INFO's counts again, not the getter's.
	rdb.ConfigResetStat(ctx)
	info = infoFields(rdb.Info(ctx, "stats").Val())
	if info["cluster_crossslot_replies"] != "0" || srv.ClusterRedirects().CrossSlot != 7 {
		t.Errorf("after RESETSTAT: INFO %v, getter %+v", info, srv.ClusterRedirects())
	}
}

// TestRoutingDestinationKey pins a bug: the destination of ZUNIONSTORE
// and its kin lies before numkeys, outside the range of keys that moves
// with it, and routing skipped it: a destination in another slot (or
// another node's) reached the backend with the sources.
func TestRoutingDestinationKey(t *testing.T) {
	b := newSlotBackend(t, threeNodes())
	addr, _ := serveBackend(t, b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	x := keyIn("x", 0, 5460)
	y := keyIn("y", 0, 5460)
	for slotOf(y) == slotOf(x) {
		y += "y"
	}
	for _, cmd := range [][]any{
		{"ZUNIONSTORE", y, "1", x},
		{"ZINTERSTORE", y, "2", x, x},
		{"ZDIFFSTORE", keyIn("z", 5461, 16383), "1", x},
		{"ZRANGESTORE", y, x, "0", "-1"},
	} {
		if err := rdb.Do(ctx, cmd...).Err(); err == nil || err.Error() != command.ErrCrossSlot {
			t.Errorf("%v: %v, want %s", cmd, err, command.ErrCrossSlot)
		}
	}
	if got := b.reachedKeys(); len(got) != 0 {
		t.Errorf("keys that reached the backend: %q, want none", got)
	}
	other := "{" + keyIn("o", 10923, 16383) + "}"
	err := rdb.Do(ctx, "ZUNIONSTORE", other+"d", "2", other+"a", other+"b").Err()
	if want := "MOVED " + itoa(slotOf(other)) + " 127.0.0.1:7003"; err == nil || err.Error() != want {
		t.Errorf("ZUNIONSTORE on another node's tag: %v, want %s", err, want)
	}
	keys, err := rdb.Do(ctx, "COMMAND", "GETKEYS", "ZUNIONSTORE", "d", "2", "a", "b", "WEIGHTS", "1", "2").StringSlice()
	if err != nil || !slices.Equal(keys, []string{"d", "a", "b"}) {
		t.Errorf("COMMAND GETKEYS ZUNIONSTORE = %q, %v", keys, err)
	}
	keys, err = rdb.Do(ctx, "COMMAND", "GETKEYS", "ZINTER", "2", "a", "b").StringSlice()
	if err != nil || !slices.Equal(keys, []string{"a", "b"}) {
		t.Errorf("COMMAND GETKEYS ZINTER = %q, %v", keys, err)
	}
}

func TestRoutingClusterDown(t *testing.T) {
	topo := threeNodes()
	topo.Ranges[3].Leader = "" // c's group has no leader
	topo.Ranges[2].End = 9000  // 9001-10922 are assigned to no group
	b := newSlotBackend(t, topo)
	addr, srv := serveBackend(t, b)
	rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
	defer rdb.Close()
	ctx := context.Background()
	for _, key := range []string{keyIn("k", 10923, 16383), keyIn("k", 9001, 10922)} {
		if err := rdb.Do(ctx, "RL.ALLOW", key, "1", "1").Err(); err == nil || err.Error() != command.ErrClusterDown {
			t.Errorf("RL.ALLOW %s: %v, want %s", key, err, command.ErrClusterDown)
		}
	}
	if got := b.reachedKeys(); len(got) != 0 {
		t.Errorf("keys that reached the backend: %q", got)
	}
	if r := srv.ClusterRedirects(); r != (ClusterRedirects{Down: 2}) {
		t.Errorf("ClusterRedirects = %+v, want 2 CLUSTERDOWN", r)
	}
	if v := infoFields(rdb.Info(ctx, "stats").Val())["cluster_down_replies"]; v != "2" {
		t.Errorf("INFO cluster_down_replies = %s, want 2", v)
	}
}

// TestKeylessCommandsAreNotRouted: a node that leads no slot still
// answers keyless commands itself.
func TestKeylessCommandsAreNotRouted(t *testing.T) {
	topo := threeNodes()
	topo.Ranges[0].Leader = topo.Nodes[1].ID // a leads nothing
	b := newSlotBackend(t, topo)
	addr, _ := serveBackend(t, b)
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	ctx := context.Background()
	for _, cmd := range [][]any{
		{"PING"}, {"DBSIZE"}, {"FLUSHALL"}, {"INFO", "server"}, {"RL.POLICY", "LIST"},
		{"RL.POLICY", "SET", "p", "ALLOW", "1", "1"}, {"TIME"}, {"COMMAND", "COUNT"}, {"RL.TOP"},
	} {
		if err := rdb.Do(ctx, cmd...).Err(); err != nil {
			t.Errorf("%v: %v", cmd, err)
		}
	}
	if err := rdb.Do(ctx, "RL.ALLOW", "k", "1", "1").Err(); err == nil || !strings.HasPrefix(err.Error(), "MOVED ") {
		t.Errorf("RL.ALLOW on a node that leads nothing: %v, want MOVED", err)
	}
}

// TestNoRouterNoRouting: without a SlotRouter, keys in different slots
// are one command as always.
func TestNoRouterNoRouting(t *testing.T) {
	addr, srv := startServer(t, Config{})
	rdb := redis.NewClient(&redis.Options{Addr: addr})
	defer rdb.Close()
	if n, err := rdb.Do(context.Background(), "EXISTS", "a", "b", "c").Int(); err != nil || n != 0 {
		t.Errorf("EXISTS a b c = %d, %v", n, err)
	}
	if r := srv.ClusterRedirects(); r != (ClusterRedirects{}) {
		t.Errorf("ClusterRedirects = %+v", r)
	}
}

func slotOf(key string) int { return slots.OfString(key) }

func itoa(n int) string { return strconv.Itoa(n) }
