// Command checkbench measures RL.CHECK throughput through a real rlserver:
// all-or-nothing checks whose tiers live on one shard (the cheap path:
// one message to one shard) against checks whose tiers live on different
// shards (the engine holds every shard involved for the decision), with
// RL.ALLOW on one key as the baseline.
//
//	go run ./bench/checkbench -addr 127.0.0.1:6379 -shards 8 -tiers 2 -duration 5s
//
// -shards must be the server's --shards: the keys of each check are
// chosen with engine.ShardOf so that they share a shard (mode same) or
// are on different ones (mode cross), as hash-tagged keys
// ({user42}:login, {user42}:api) do in the same mode. The policy has a huge capacity, so every
// check is allowed and charged (the expensive outcome). Closed loop:
// -conns connections, each sending batches of -pipeline commands and
// waiting for the replies.
package main

import (
	"context"
	"flag"
	"fmt"
	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/rlserver/rlserver/engine"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:6379", "rlserver address")
	shards := flag.Int("shards", 8, "the server's --shards")
	tiers := flag.Int("tiers", 2, "tiers per check")
	conns := flag.Int("conns", 32, "connections")
	pipeline := flag.Int("pipeline", 16, "commands per batch")
	keys := flag.Int("keys", 4096, "key groups (distinct checks)")
	duration := flag.Duration("duration", 5*time.Second, "run time per mode")
	modes := flag.String("modes", "allow,same,cross", "modes to run, in order")
	pid := flag.Int("pid", 0, "the server's process id: also report its CPU time per command (Linux), which a busy machine disturbs less than throughput")
	flag.Parse()

	ctx := context.Background()
	c := redis.NewClient(&redis.Options{Addr: *addr, PoolSize: *conns + 2, Protocol: 2})
	defer c.Close()
	if err := c.Do(ctx, "RL.POLICY", "SET", "bench", "ALLOW", 1_000_000_000, 1_000_000).Err(); err != nil {
		fmt.Fprintln(os.Stderr, "checkbench:", err)
		os.Exit(1)
	}
	for _, mode := range splitComma(*modes) {
		groups := makeGroups(mode, *keys, *tiers, *shards)
		cpu0 := benchproc.CPUTime(*pid)
		n, elapsed := run(ctx, c, groups, *conns, *pipeline, *duration)
		cpu := benchproc.CPUTime(*pid) - cpu0
		t := (len(groups[0]) - 1) / 2
		if mode == "allow" {
			t = 1
		}
		perCmd := ""
		if *pid > 0 {
			perCmd = fmt.Sprintf(", server CPU %.2f µs/command", float64(cpu.Microseconds())/float64(n))
		}
		fmt.Printf("%-6s tiers=%d conns=%d pipeline=%d: %9.0f commands/s (%d in %v)%s\n",
			mode, t, *conns, *pipeline, float64(n)/elapsed.Seconds(), n, elapsed.Round(time.Millisecond), perCmd)
	}
}

func splitComma(s string) []string {
	var out []string
	start := 0
	for i := 0; i <= len(s); i++ {
		if i == len(s) || s[i] == ',' {
			if i > start {
				out = append(out, s[start:i])
			}
			start = i + 1
		}
	}
	return out
}

// makeGroups builds the commands: for allow, RL.ALLOW on one key; for
// same and cross, RL.CHECK with tiers keys on one shard or on different
// shards.
func makeGroups(mode string, n, tiers, shards int) [][]any {
	var out [][]any
	next := 0
	key := func(want int) string {
		for {
			k := fmt.Sprintf("%s:%d", mode, next)
			next++
			if want < 0 || engine.ShardOf([]byte(k), shards) == want {
				return k
			}
		}
	}
	for i := range n {
		if mode == "allow" {
			out = append(out, []any{"RL.ALLOW", key(-1), 1_000_000_000, 1_000_000})
			continue
		}
		cmd := []any{"RL.CHECK"}
		for t := range tiers {
			s := i % shards
			if mode == "cross" {
				s = (i + t) % shards
			}
			cmd = append(cmd, "bench", key(s))
		}
		out = append(out, cmd)
	}
	return out
}

func run(ctx context.Context, c *redis.Client, groups [][]any, conns, pipeline int, d time.Duration) (int64, time.Duration) {
	var total atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	end := start.Add(d)
	for w := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			i := w * 97
			for time.Now().Before(end) {
				p := c.Pipeline()
				for range pipeline {
					p.Do(ctx, groups[i%len(groups)]...)
					i++
				}
				cmds, err := p.Exec(ctx)
				if err != nil {
					fmt.Fprintln(os.Stderr, "checkbench:", err)
					os.Exit(1)
				}
				total.Add(int64(len(cmds)))
			}
		}()
	}
	wg.Wait()
	return total.Load(), time.Since(start)
}
