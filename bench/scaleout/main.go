// Command scaleout measures what more machines add to a placed cluster
// (docs/cluster-mode.md, "Replicas on a subset of the nodes"): N rlserver
// processes on loopback with --groups N --replicas 3, each held to the
// same share of a core (a cgroup v1 CPU quota per process; the load
// generator, this program, stays outside), fsync on, data in a temporary
// folder, only the processes it started stopped at the end. Needs root
// and the cgroup v1 cpu controller at /sys/fs/cgroup/cpu. Linux.
//
// Part 1, scale: for each run and each of -nodes (in turn, so every
// configuration sees the same machine over the run), it starts N nodes,
// waits until RL.CLUSTER GROUPS shows every group with three replicas and
// no learner and RL.CLUSTER NODES shows the leaders spread, warms up,
// then drives RL.ALLOW on random keys for -duration: -workers goroutines
// each sending pipelines of -depth through a go-redis ClusterClient
// (which splits each pipeline by node). It reports decisions per second,
// the ratio to the first node count's mean, CPU per decision summed over
// every rlserver process (/proc/<pid>/stat), the load generator's own CPU
// per decision, and how often the cgroups hit their quota (throttled
// periods: near 100% means the quota bounded the nodes, lower means the
// shared machine did).
//
// Part 2, heal: six nodes with --node-dead-after -dead-after under a light
// load (a quarter of -workers); kill -9 of -kill; the time until RL.CLUSTER
// NODES marks it dead, and until every group again has three replicas on
// live nodes and no learner, minus -dead-after.
//
// Part 3, move: four nodes, four groups; one group (held by the node to
// drain, a meta non-voter, and not led by it) is filled with -move-keys
// keys; then RL.CLUSTER REMOVE of that node, which moves its replicas
// off first. It reports how long that group's replica move took (from
// the RL.CLUSTER REMOVE to the group having three replicas without the
// node), the whole drain, and the latency of single RL.ALLOWs on the
// group's keys before and during the move.
//
//	go run ./bench/scaleout                       # all parts, -nodes 3,6,9, -quota 0.1
//	go run ./bench/scaleout -parts scale -runs 3 -duration 15s
//	make bench-scaleout ARGS='-parts heal,move'
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
)

type config struct {
	bin           string
	parts         string
	nodes         []int
	quota         float64
	runs          int
	duration      time.Duration
	warmup        time.Duration
	idle          time.Duration
	workers       int
	depth         int
	keys          int
	commitTimeout time.Duration
	deadAfter     time.Duration
	kill          string
	moveKeys      int
	keep          bool
}

// live tracks the clusters started, so an interrupt stops them.
var live struct {
	sync.Mutex
	list []*cluster
}

func track(c *cluster) {
	live.Lock()
	live.list = append(live.list, c)
	live.Unlock()
}

func stopAll() {
	live.Lock()
	defer live.Unlock()
	for _, c := range live.list {
		c.stop()
	}
	live.list = nil
}

func main() {
	var cfg config
	var nodes string
	flag.StringVar(&cfg.bin, "bin", "", "rlserver binary (default: go build ./cmd/rlserver into the temporary folder)")
	flag.StringVar(&cfg.parts, "parts", "scale,heal,move", "parts to run: scale, heal, move")
	flag.StringVar(&nodes, "nodes", "3,6,9", "part 1: node counts (as many groups as nodes); the first is the base of the ratios")
	flag.Float64Var(&cfg.quota, "quota", 0.1, "CPU quota per process in cores (0: none)")
	flag.DurationVar(&benchproc.QuotaPeriod, "quota-period", benchproc.QuotaPeriod, "the quota's CFS period: a process runs quota times this, then waits for the next")
	flag.IntVar(&cfg.runs, "runs", 2, "part 1: rounds over every node count; part 2: kills")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "part 1: measured load per configuration")
	flag.DurationVar(&cfg.warmup, "warmup", 3*time.Second, "part 1: load before the measurement")
	flag.DurationVar(&cfg.idle, "idle", 5*time.Second, "part 1: CPU measured without load before it (0: skip)")
	flag.IntVar(&cfg.workers, "workers", 32, "goroutines sending pipelines")
	flag.IntVar(&cfg.depth, "depth", 32, "RL.ALLOWs per pipeline")
	flag.IntVar(&cfg.keys, "keys", 1000000, "random keys the load chooses from")
	flag.DurationVar(&cfg.commitTimeout, "commit-timeout", 2*time.Second, "the servers' --commit-timeout (the clients' read timeout is 3 s above it)")
	flag.DurationVar(&cfg.deadAfter, "dead-after", 5*time.Second, "part 2: the servers' --node-dead-after")
	flag.StringVar(&cfg.kill, "kill", "n6", "part 2: the node killed")
	flag.IntVar(&cfg.moveKeys, "move-keys", 1000000, "part 3: keys filled into the moved group")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the temporary folder (logs, data)")
	flag.Parse()
	// go-redis logs every failed dial; the killed node's make many.
	redis.SetLogger(quiet{})
	for _, s := range strings.Split(nodes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 3 {
			log.Fatalf("bad -nodes %q (each at least 3)", nodes)
		}
		cfg.nodes = append(cfg.nodes, n)
	}

	tmp, err := os.MkdirTemp("", "rl-scaleout.")
	if err != nil {
		log.Fatal(err)
	}
	cleanup, fail := benchproc.Scratch(tmp, cfg.keep, stopAll)

	if cfg.bin == "" {
		logf("building rlserver")
		if cfg.bin, err = benchproc.BuildServer(tmp); err != nil {
			fail("%v", err)
		}
	}
	fmt.Printf("command: %s\n", strings.Join(os.Args, " "))
	fmt.Printf("host: %d CPUs (%s), load average %s\n", runtime.NumCPU(), benchproc.CPUModel(), benchproc.LoadAvg())
	fmt.Printf("quota per node: %.2f core per %v period\n", cfg.quota, benchproc.QuotaPeriod)

	for i, part := range strings.Split(cfg.parts, ",") {
		dir := filepath.Join(tmp, fmt.Sprintf("part%d", i))
		var err error
		switch strings.TrimSpace(part) {
		case "scale":
			err = runScale(cfg, dir)
		case "heal":
			err = runHeal(cfg, dir)
		case "move":
			err = runMove(cfg, dir)
		default:
			err = fmt.Errorf("unknown part %q", part)
		}
		if err != nil {
			fail("%s: %v", part, err)
		}
		fmt.Printf("\nload average after %s: %s\n", strings.TrimSpace(part), benchproc.LoadAvg())
	}
	cleanup()
}

type quiet struct{}

func (quiet) Printf(context.Context, string, ...any) {}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

func ms(d time.Duration) string {
	return strconv.FormatFloat(float64(d)/1e6, 'f', 1, 64)
}

func errText(m map[string]int) string {
	if len(m) == 0 {
		return "0"
	}
	var parts []string
	for k, v := range m {
		parts = append(parts, fmt.Sprintf("%s:%d", k, v))
	}
	return strings.Join(parts, ",")
}
