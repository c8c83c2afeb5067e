// Command moves measures online slot moves and rebalancing of a sharded
// rlserver deployment (docs/cluster-mode.md): three processes on loopback,
// fsync on, data in a temporary folder, only the processes it started
// stopped at the end.
//
// Part 1, moves (three processes, --groups 2: group 1 owns slots 0-8191,
// group 2 8192-16383). It fills one range of -width slots of group 1
// with each of -sizes keys (RL.ALLOW through a go-redis ClusterClient,
// keys chosen by CRC16 slot to land in the range), then moves each range
// to group 2 and back (-runs moves per size, alternating direction)
// while two loads run through go-redis ClusterClients:
//
//   - "in range": -in-workers goroutines each sending one RL.ALLOW at a
//     time on a random key of the moving range. A request the move
//     freezes waits on the server (at most --commit-timeout) and is then
//     served or answered MOVED, which go-redis follows; each sample is
//     the latency the caller sees, redirects and retries included.
//   - "outside": -out-workers goroutines each sending pipelines of
//     -depth RL.ALLOWs on random keys of both groups outside every
//     range being moved.
//
// Each move is timed from RL.CLUSTER MOVE to the directory's "committed"
// (the range answers from the target) and "released" (the source dropped
// it), polled every 10 ms, with the directory's own took= and keys=. The
// table sets the in-range latency during the move (requests that started
// between MOVE and released) beside the same before it, and the outside
// throughput during the move beside the -before seconds before it.
//
// Part 2, rebalance (for each of -quotas; 0 is no limit): three processes,
// --groups 2 (n1 leads group 1, n2 group 2, n3 leads nothing), filled
// with -rebalance-keys random keys; throughput rounds; RL.CLUSTER
// ADDGROUP (n3 comes to lead group 3, which owns no slots); rounds again;
// RL.CLUSTER REBALANCE, polled until every group owns its share; rounds
// again. A round is redis-benchmark --cluster (-c 50 -P 32, keys
// key:{tag}:rand, one slot per master, as bench/sharded-compare.sh) and a
// go-redis ClusterClient load on random keys over every slot. Each round
// reads every process's CPU time from /proc: CPU per decision. Idle CPU
// is read over -idle with two groups, with three (one owning no slots)
// and with three balanced: the difference is what an idle group costs.
// With a quota each process runs in a cgroup of its own limited to that
// share of a core (root, cgroup v1 cpu controller), the load generators
// outside: small machines, where a third leader adds capacity.
//
//	go run ./bench/moves                              # both parts, quotas 0 and 0.3
//	go run ./bench/moves -parts moves -sizes 100000 -runs 4
//	go run ./bench/moves -parts rebalance -quotas 0.3 -rounds 3
//	make bench-moves ARGS='-runs 4'
//
// Needs redis-benchmark for part 2 (apt-get install redis-tools). Linux.
package main

import (
	"flag"
	"fmt"
	"log"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
)

type config struct {
	bin           string
	parts         string
	sizes         []int
	width         int
	runs          int
	before, after time.Duration
	inWorkers     int
	outWorkers    int
	depth         int
	commitTimeout time.Duration
	quotas        []float64
	rounds        int
	requests      int
	goLoad        time.Duration
	goWorkers     int
	benchClients  int
	rebKeys       int
	idle          time.Duration
	keep          bool
}

func main() {
	var cfg config
	var sizes, quotas string
	flag.StringVar(&cfg.bin, "bin", "", "rlserver binary (default: go build ./cmd/rlserver into the temporary folder)")
	flag.StringVar(&cfg.parts, "parts", "moves,rebalance", "parts to run: moves, rebalance")
	flag.StringVar(&sizes, "sizes", "100000,1000000", "keys in each moved range")
	flag.IntVar(&cfg.width, "width", 1024, "slots in each moved range")
	flag.IntVar(&cfg.runs, "runs", 2, "moves per size, alternating group 1 -> 2 and 2 -> 1")
	flag.DurationVar(&cfg.before, "before", 3*time.Second, "load before each move (the baseline)")
	flag.DurationVar(&cfg.after, "after", time.Second, "load after each move is released")
	flag.IntVar(&cfg.inWorkers, "in-workers", 4, "goroutines sending single RL.ALLOWs on the moving range")
	flag.IntVar(&cfg.outWorkers, "out-workers", 4, "goroutines sending pipelines on keys outside the moving range")
	flag.IntVar(&cfg.depth, "depth", 32, "RL.ALLOWs per pipeline of the outside load")
	flag.DurationVar(&cfg.commitTimeout, "commit-timeout", 2*time.Second, "the servers' --commit-timeout (the clients' read timeout is 3 s above it)")
	flag.StringVar(&quotas, "quotas", "0,0.3", "part 2: per-process CPU quota in cores, one deployment each (0: none)")
	flag.IntVar(&cfg.rounds, "rounds", 2, "part 2: throughput rounds per stage (each: redis-benchmark, then the Go load)")
	flag.IntVar(&cfg.requests, "requests", 1000000, "part 2: redis-benchmark requests per round")
	flag.DurationVar(&cfg.goLoad, "go-load", 5*time.Second, "part 2: length of a Go load round (0: skip)")
	flag.IntVar(&cfg.benchClients, "bench-clients", 50, "part 2: redis-benchmark connections (-c)")
	flag.IntVar(&cfg.goWorkers, "go-workers", 50, "part 2: goroutines of the Go load, each sending pipelines of 32")
	flag.IntVar(&cfg.rebKeys, "rebalance-keys", 300000, "part 2: random keys filled before the rebalance (about a third move)")
	flag.DurationVar(&cfg.idle, "idle", 5*time.Second, "part 2: idle CPU measurement time")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the temporary folder (logs, data)")
	flag.Parse()
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n <= 0 {
			log.Fatalf("bad -sizes %q", sizes)
		}
		cfg.sizes = append(cfg.sizes, n)
	}
	for _, s := range strings.Split(quotas, ",") {
		q, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
		if err != nil || q < 0 {
			log.Fatalf("bad -quotas %q", quotas)
		}
		cfg.quotas = append(cfg.quotas, q)
	}
	if len(cfg.sizes)*cfg.width > 8192 {
		log.Fatalf("-sizes × -width must fit in group 1's 8192 slots")
	}

	tmp, err := os.MkdirTemp("", "rl-moves.")
	if err != nil {
		log.Fatal(err)
	}
	var current *deployment
	cleanup, fail := benchproc.Scratch(tmp, cfg.keep, func() {
		if current != nil {
			current.stop()
		}
	})

	if cfg.bin == "" {
		logf("building rlserver")
		if cfg.bin, err = benchproc.BuildServer(tmp); err != nil {
			fail("%v", err)
		}
	}
	extra := []string{"--commit-timeout", cfg.commitTimeout.String()}
	printHost()

	for _, part := range strings.Split(cfg.parts, ",") {
		switch strings.TrimSpace(part) {
		case "moves":
			d, err := startDeployment(cfg.bin, filepath.Join(tmp, "moves"), 2, 0, extra)
			if err != nil {
				fail("moves: %v", err)
			}
			current = d
			if err := runMoves(cfg, d); err != nil {
				fail("moves: %v", err)
			}
			d.stop()
			current = nil
		case "rebalance":
			if _, err := exec.LookPath("redis-benchmark"); err != nil {
				fail("rebalance: redis-benchmark not found (apt-get install redis-tools)")
			}
			for i, q := range cfg.quotas {
				d, err := startDeployment(cfg.bin, filepath.Join(tmp, fmt.Sprintf("rebalance%d", i)), 2, q, extra)
				if err != nil {
					fail("rebalance: %v", err)
				}
				current = d
				if err := runRebalance(cfg, d, q); err != nil {
					fail("rebalance: %v", err)
				}
				d.stop()
				current = nil
			}
		default:
			fail("unknown part %q", part)
		}
		la, _ := os.ReadFile("/proc/loadavg")
		fmt.Printf("\nload average after %s: %s\n", strings.TrimSpace(part), strings.Join(strings.Fields(string(la))[:3], " "))
	}
	cleanup()
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// printHost prints what the figures depend on: CPUs and the load average.
func printHost() {
	la, _ := os.ReadFile("/proc/loadavg")
	model := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "model name") {
				_, model, _ = strings.Cut(line, ": ")
				break
			}
		}
	}
	out, _ := exec.Command("nproc").Output()
	fmt.Printf("host: %s CPUs (%s), load average %s\n", strings.TrimSpace(string(out)), model,
		strings.Join(strings.Fields(string(la))[:3], " "))
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
