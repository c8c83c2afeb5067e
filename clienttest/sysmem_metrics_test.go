package clienttest

import (
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestMetricsDecisionSeriesOnlyForLimiters: /metrics exports the allowed
// and denied series of rlserver_commands_total for commands that decide
// (RL.ALLOW, RL.PEEK), and none for commands that never do (PING, DEL,
// EXISTS, RL.RESET), which had them, always 0.
func TestMetricsDecisionSeriesOnlyForLimiters(t *testing.T) {
	s, base := startWithMetrics(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	for _, args := range [][]any{
		{"PING"}, {"RL.ALLOW", "k", 1, 1}, {"RL.ALLOW", "k", 1, 0.001}, {"RL.PEEK", "k", 1, 1},
		{"EXISTS", "k"}, {"DEL", "k"}, {"RL.RESET", "k"},
	} {
		if err := c.Do(ctx, args...).Err(); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
	}
	fams := scrape(t, base)
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.allow", "outcome", "allowed")
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.allow", "outcome", "denied")
	wantMetric(t, fams, 0, "rlserver_commands_total", "command", "rl.peek", "outcome", "allowed")
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.peek", "outcome", "denied")
	for _, cmd := range []string{"ping", "exists", "del", "rl.reset"} {
		if v, _ := metricValue(fams, "rlserver_commands_total", "command", cmd, "outcome", "ok"); v < 1 {
			t.Errorf("rlserver_commands_total{command=%q,outcome=\"ok\"} = %v, want at least 1", cmd, v)
		}
		for _, outcome := range []string{"allowed", "denied"} {
			if v, ok := metricValue(fams, "rlserver_commands_total", "command", cmd, "outcome", outcome); ok {
				t.Errorf("rlserver_commands_total{command=%q,outcome=%q} = %v: %s never decides", cmd, outcome, v, cmd)
			}
		}
	}
}

// TestInfoTotalSystemMemory: INFO memory reports total_system_memory in
// bytes (it said 0) and its _human form, as a real redis-server on the
// same machine does.
func TestInfoTotalSystemMemory(t *testing.T) {
	s := start(t, opts{})
	got := infoMemory(t, newGoRedis(t, s, nil))
	n, err := strconv.ParseUint(got["total_system_memory"], 10, 64)
	if err != nil || n < 64<<20 {
		t.Fatalf("total_system_memory %q, want the machine's memory in bytes", got["total_system_memory"])
	}
	if got["total_system_memory_human"] == "" {
		t.Errorf("no total_system_memory_human")
	}

	rc := startRedisForInfo(t)
	if rc == nil {
		return
	}
	want := infoMemory(t, rc)
	for _, k := range []string{"total_system_memory", "total_system_memory_human"} {
		if got[k] != want[k] {
			t.Errorf("%s: rlserver %q, redis-server %q", k, got[k], want[k])
		}
	}
}

func infoMemory(t *testing.T, c *redis.Client) map[string]string {
	t.Helper()
	m, err := c.InfoMap(context.Background(), "memory").Result()
	if err != nil {
		t.Fatalf("INFO memory: %v", err)
	}
	for _, sec := range m {
		return sec
	}
	t.Fatal("INFO memory: no section")
	return nil
}

// startRedisForInfo starts a real redis-server (no persistence) on a free
// loopback port and returns a client of it, stopped at cleanup. Without
// redis-server it skips (returns nil), or fails under CI=true.
func startRedisForInfo(t *testing.T) *redis.Client {
	t.Helper()
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Log("redis-server is not installed: not compared")
		return nil
	}
	port := freePort(t)
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", t.TempDir())
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting redis-server: %v", err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	c := redis.NewClient(&redis.Options{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port))})
	t.Cleanup(func() { c.Close() })
	deadline := time.Now().Add(10 * time.Second)
	for c.Ping(context.Background()).Err() != nil {
		if time.Now().After(deadline) {
			t.Fatal("redis-server did not answer PING within 10s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	return c
}
