// Command kvcompare measures rlserver's Redis data commands against Redis
// 7 on the patterns existing limiters send, side by side in one run, and
// prints one table (issue 20, "Figures to report"). make bench-kv runs it:
//
//	go run ./bench/kvcompare               # builds rlserver from this checkout
//	go run ./bench/kvcompare -rlserver /tmp/rlserver -duration 5s -rounds 5
//	go run ./bench/kvcompare -smoke        # seconds: tiny counts, same checks
//	go run ./bench/kvcompare -scripts      # make bench-lua: the Lua token bucket
//
// -scripts (issue 21, "Figures to report") measures instead the token
// bucket teams run on Redis as a Lua script (token_bucket.lua: HMGET,
// HSET, PEXPIRE, the caller's clock), loaded by SCRIPT LOAD on both
// servers and called by EVALSHA, and RL.ALLOW on rlserver with the same
// capacity and rate, at each depth on random keys out of 100,000 by
// default, the three targets in rotating rounds; error replies are
// counted, every reply is range-checked, the keys are read back (tokens
// within the capacity), and the same calls with the clock given are sent
// to both servers, whose replies and hashes must be equal (scripts.go).
//
// It starts redis-server and rlserver, each with its default settings
// (rlserver saves snapshots to a temporary folder every second, Redis
// keeps its built-in save rules there), on free loopback ports, then:
//
//  1. Throughput: its own RESP load generator (one goroutine per
//     connection, the same code against both servers) sends, on -conns
//     connections and random keys out of -keys:
//     - envoy's pattern: INCRBY key n + EXPIRE key s, the pair written
//     together, as envoy's radix client pipelines it; -P 1 is one pair
//     per round trip, -P 32 thirty-two;
//     - the seeds' pattern (Rack::Attack, Laravel...): MULTI, INCR key,
//     EXPIRE key s, EXEC; -P 1 is one transaction per round trip.
//     Each case first runs -warmup on each server (filling the keyspace),
//     then -rounds measured runs of -duration on each, alternating
//     between the servers (and which goes first). Every reply is checked
//     (INCRBY's result at least the amount added, EXPIRE's 1, the
//     transaction's replies), the CPU time of the server (/proc, with its
//     reaped children: Redis's BGSAVE) and of the generator (rusage) is
//     recorded per operation. Last, -verify-keys keys of each pattern are
//     read back from each server (GET, TTL) and compared with what the
//     generator counted for them.
//  2. Memory: fresh processes; -mem-keys counters with a TTL (INCR
//     counter:<n>, EXPIRE counter:<n> 3600) loaded into each, one server
//     at a time; the growth of the resident set (VmRSS) and of INFO
//     memory's used_memory over the baseline, per key.
//
// Every process it starts is stopped on every exit path (and killed by the
// kernel if kvcompare dies). Linux only: it reads /proc.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/bench/internal/benchproc"
	"github.com/rlserver/rlserver/bench/internal/respio"
)

type config struct {
	rlserver, redisServer string
	rlArgs, redisArgs     string // extra flags, space separated
	goCmd                 string
	pin                   bool
	conns, keys, ttl      int
	depths                []int
	rounds                int
	warmup, duration      time.Duration
	verifyKeys, memKeys   int
	scripts               bool    // -scripts: the Lua token bucket and RL.ALLOW
	capacity              int64   // -scripts: the bucket's capacity
	rate                  float64 // -scripts: tokens per second
	timeout               time.Duration
	progress              io.Writer // progress lines (stderr)
}

// defaults is the full run; smoke the -smoke one.
func defaults() config {
	return config{
		redisServer: "redis-server", goCmd: cmp.Or(os.Getenv("GO"), "go"),
		conns: 50, keys: 1_000_000, ttl: 3600, depths: []int{1, 32},
		rounds: 5, warmup: time.Second, duration: 2 * time.Second,
		verifyKeys: 20_000, memKeys: 1_000_000, timeout: 10 * time.Minute,
		capacity: 100, rate: 10,
		progress: os.Stderr,
	}
}

// scriptsDefaults is -scripts' full run: random keys out of 100k (a
// warm-up fills most of them, so the script mostly updates a bucket, as a
// limiter's hot keys do), a bucket of 100 refilled at 10/s (the script's
// keys live 11 s), no memory phase.
func scriptsDefaults(cfg config) config {
	cfg.scripts, cfg.keys, cfg.memKeys = true, 100_000, 0
	return cfg
}

func smoke(cfg config) config {
	cfg.conns, cfg.keys = 4, 300
	cfg.warmup, cfg.duration = 100*time.Millisecond, 200*time.Millisecond
	cfg.verifyKeys, cfg.memKeys = cfg.keys, 3000
	return cfg
}

func main() {
	// -smoke changes the defaults the other flags start from, so it is
	// read first; flags given explicitly still win.
	def := defaults()
	isSet := func(name string) bool {
		for _, a := range os.Args[1:] {
			if a == "--" {
				break
			}
			if v, ok := strings.CutPrefix(strings.TrimLeft(a, "-"), name); ok && (v == "" || v == "=true" || v == "=1") {
				return true
			}
		}
		return false
	}
	// -scripts too.
	if isSet("scripts") {
		def = scriptsDefaults(def)
	}
	if isSet("smoke") {
		def = smoke(def)
	}
	cfg := def
	flag.Bool("scripts", false, "measure the Lua token bucket (bench/kvcompare/token_bucket.lua) by EVALSHA on both servers and RL.ALLOW on rlserver instead of the data commands (make bench-lua); keys default to 100,000, no memory phase")
	flag.Int64Var(&cfg.capacity, "capacity", def.capacity, "-scripts: the bucket's capacity, tokens")
	flag.Float64Var(&cfg.rate, "rate", def.rate, "-scripts: the bucket's refill rate, tokens per second")
	flag.Bool("smoke", false, "tiny counts (4 connections, 300 keys, 0.2 s runs, 3,000 counters for memory), every key checked: seconds, for tests")
	flag.StringVar(&cfg.rlserver, "rlserver", "", "path to a built rlserver binary (empty: go build ./cmd/rlserver from this checkout into the temporary folder)")
	flag.StringVar(&cfg.redisServer, "redis-server", def.redisServer, "redis-server binary")
	flag.StringVar(&cfg.rlArgs, "rlserver-args", "", "extra rlserver flags, space separated (default: its defaults)")
	flag.StringVar(&cfg.redisArgs, "redis-args", "", "extra redis-server flags, space separated (default: its defaults; --save '' would turn its snapshots off)")
	flag.BoolVar(&cfg.pin, "pin", false, "run the servers on CPU 0 and the generator on CPU 1 (taskset)")
	flag.IntVar(&cfg.conns, "conns", def.conns, "connections of the load generator")
	flag.IntVar(&cfg.keys, "keys", def.keys, "random keys per pattern")
	flag.IntVar(&cfg.ttl, "ttl", def.ttl, "EXPIRE seconds")
	depths := flag.String("depths", "1,32", "pipeline depths: operations per round trip, comma separated")
	flag.IntVar(&cfg.rounds, "rounds", def.rounds, "measured runs per case and server, alternating")
	flag.DurationVar(&cfg.warmup, "warmup", def.warmup, "unmeasured run per case and server before its rounds")
	flag.DurationVar(&cfg.duration, "duration", def.duration, "length of each measured run")
	flag.IntVar(&cfg.verifyKeys, "verify-keys", def.verifyKeys, "keys per pattern read back from each server and checked")
	flag.IntVar(&cfg.memKeys, "mem-keys", def.memKeys, "counters loaded for the memory measurement (0: skip it)")
	flag.DurationVar(&cfg.timeout, "timeout", def.timeout, "limit for the whole run")
	flag.Parse()
	cfg.depths = nil
	for _, d := range strings.Split(*depths, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(d))
		if err != nil || n < 1 || n > 10_000 {
			fmt.Fprintf(os.Stderr, "kvcompare: bad -depths %q\n", *depths)
			os.Exit(2)
		}
		cfg.depths = append(cfg.depths, n)
	}
	if err := cfg.check(); err != nil || flag.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "kvcompare:", err, "(see -help)")
		os.Exit(2)
	}
	if cfg.pin {
		pinSelf()
	}

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	ctx, cancel := context.WithTimeout(ctx, cfg.timeout)
	rep, err := run(ctx, cfg)
	cancel()
	stop()
	benchproc.StopAll()
	if rep != nil {
		rep.print(os.Stdout)
	}
	if err == nil {
		err = rep.failed()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvcompare:", err)
		os.Exit(1)
	}
}

func (cfg config) check() error {
	switch {
	case cfg.conns < 1 || cfg.conns > 10_000:
		return fmt.Errorf("-conns must be in [1, 10000]")
	case cfg.keys < 1 || cfg.keys > 100_000_000:
		return fmt.Errorf("-keys must be in [1, 100000000]")
	case cfg.ttl < 1:
		return fmt.Errorf("-ttl must be at least 1")
	case cfg.rounds < 1:
		return fmt.Errorf("-rounds must be at least 1")
	case cfg.duration <= 0 || cfg.warmup < 0:
		return fmt.Errorf("-duration must be positive, -warmup not negative")
	case cfg.verifyKeys < 0 || cfg.memKeys < 0 || cfg.memKeys > 50_000_000:
		return fmt.Errorf("-verify-keys must not be negative, -mem-keys in [0, 50000000]")
	case cfg.capacity < 1 || !(cfg.rate > 0) || math.IsInf(cfg.rate, 0):
		return fmt.Errorf("-capacity must be at least 1, -rate positive")
	}
	return nil
}

// pinSelf runs this process again under taskset on CPU 1 (the servers go
// on CPU 0), unless it already is that process.
func pinSelf() {
	if os.Getenv("KVCOMPARE_PINNED") != "" {
		return
	}
	if runtime.NumCPU() < 2 {
		fmt.Fprintln(os.Stderr, "kvcompare: -pin needs at least 2 CPUs")
		os.Exit(2)
	}
	taskset, err := exec.LookPath("taskset")
	if err != nil {
		fmt.Fprintln(os.Stderr, "kvcompare: -pin needs taskset (util-linux)")
		os.Exit(2)
	}
	self, err := os.Executable()
	if err == nil {
		err = syscall.Exec(taskset, append([]string{"taskset", "-c", "1", self}, os.Args[1:]...),
			append(os.Environ(), "KVCOMPARE_PINNED=1"))
	}
	fmt.Fprintln(os.Stderr, "kvcompare: -pin:", err)
	os.Exit(1)
}

// onCPU is the command line that runs bin with args, bound to CPU 0 with
// -pin (taskset execs bin: the process and its CPU time are bin's).
func (cfg config) onCPU(bin string, args ...string) []string {
	if !cfg.pin {
		return append([]string{bin}, args...)
	}
	return append([]string{"taskset", "-c", "0", bin}, args...)
}

func (cfg config) logf(format string, args ...any) {
	if cfg.progress != nil {
		fmt.Fprintf(cfg.progress, "kvcompare: "+format+"\n", args...)
	}
}

// servers is one rlserver and one redis-server, in this order.
type servers [2]*benchproc.Server

var serverNames = [2]string{"rlserver", "Redis"}

// run measures everything and returns the report, partial on an error.
func run(ctx context.Context, cfg config) (*report, error) {
	var err error
	if cfg.redisServer, err = exec.LookPath(cfg.redisServer); err != nil {
		return nil, fmt.Errorf("redis-server not found (Debian/Ubuntu: apt-get install redis-server): %v", err)
	}
	tmp, err := os.MkdirTemp("", "rl-kvcompare-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(tmp)
	if cfg.rlserver == "" {
		if cfg.rlserver, err = buildRLServer(cfg, tmp); err != nil {
			return nil, err
		}
	}
	rep := &report{cfg: cfg, machine: describeMachine(cfg), loadStart: benchproc.LoadAvg()}
	defer func() { rep.loadEnd = benchproc.LoadAvg() }()

	// Phase 1: throughput.
	srv, err := startBoth(cfg, tmp, "run")
	if err != nil {
		return rep, err
	}
	if cfg.scripts {
		err := runScripts(ctx, cfg, rep, srv)
		for s := range srv {
			srv[s].Stop()
		}
		return rep, err
	}
	tallies := [2]map[string]tally{}
	for i := range tallies {
		tallies[i] = map[string]tally{envoy.prefix: make(tally, cfg.keys), seeds.prefix: make(tally, cfg.keys)}
	}
	for _, pat := range []pattern{envoy, seeds} {
		for _, depth := range cfg.depths {
			c := caseResult{pat: pat, depth: depth}
			base := load{pat: pat, conns: cfg.conns, depth: depth, keys: cfg.keys, ttl: cfg.ttl,
				ramp: min(250*time.Millisecond, cfg.duration/10)}
			// A warm-up on each server: connections, the keyspace.
			for s := range srv {
				l := base
				l.addr, l.pid, l.tally = srv[s].Addr, srv[s].Pid(), tallies[s][pat.prefix]
				l.ramp, l.duration, l.seed = 0, max(cfg.warmup, time.Millisecond), uint64(1000+s)
				if _, err := l.run(ctx); err != nil {
					return rep, alive(srv, err)
				}
			}
			for r := range cfg.rounds {
				// Alternate which server goes first.
				order := []int{0, 1}
				if r%2 == 1 {
					order = []int{1, 0}
				}
				for _, s := range order {
					l := base
					l.addr, l.pid, l.tally = srv[s].Addr, srv[s].Pid(), tallies[s][pat.prefix]
					l.duration, l.seed = cfg.duration, uint64(r*10+s)
					res, err := l.run(ctx)
					if err != nil {
						return rep, alive(srv, err)
					}
					c.runs[s] = append(c.runs[s], res)
					cfg.logf("%-22s -P %-2d round %d %-8s %10.0f %s  server %4.0f ns/op  generator %4.0f ns/op, %.2f reads/round trip",
						pat.name, depth, r+1, serverNames[s], res.rate(), pat.unit,
						perOp(res.srvCPU, res.ops), perOp(res.genCPU, res.ops), float64(res.reads)/float64(max(res.trips, 1)))
				}
			}
			rep.cases = append(rep.cases, c)
		}
	}
	for s := range srv {
		for _, pat := range []pattern{envoy, seeds} {
			v, err := verify(srv[s].Addr, pat, tallies[s][pat.prefix], cfg.verifyKeys, cfg.ttl)
			if err != nil {
				return rep, alive(srv, fmt.Errorf("reading %s's keys back: %w", serverNames[s], err))
			}
			v.server = serverNames[s]
			rep.verified = append(rep.verified, v)
		}
	}
	for s := range srv {
		srv[s].Stop()
	}

	// Phase 2: memory, on fresh processes.
	if cfg.memKeys > 0 {
		srv, err := startBoth(cfg, tmp, "mem")
		if err != nil {
			return rep, err
		}
		for s := range srv {
			m, err := measureMemory(ctx, cfg, srv[s])
			if err != nil {
				return rep, alive(srv, fmt.Errorf("%s: %w", serverNames[s], err))
			}
			rep.mem[s] = m
		}
		for s := range srv {
			srv[s].Stop()
		}
	}
	return rep, nil
}

// alive adds to err the log of a server that has exited.
func alive(srv servers, err error) error {
	for _, s := range srv {
		if e := s.Alive(); e != nil {
			return fmt.Errorf("%w; %v", err, e)
		}
	}
	return err
}

func perOp(d time.Duration, ops int64) float64 {
	if ops == 0 {
		return 0
	}
	return float64(d.Nanoseconds()) / float64(ops)
}

// buildRLServer builds ./cmd/rlserver of the module this runs in.
func buildRLServer(cfg config, tmp string) (string, error) {
	out, err := exec.Command(cfg.goCmd, "env", "GOMOD").Output()
	mod := strings.TrimSpace(string(out))
	if err != nil || mod == "" || mod == os.DevNull {
		return "", fmt.Errorf("no Go module here to build rlserver from (%v): run from the checkout or give -rlserver", err)
	}
	bin := filepath.Join(tmp, "rlserver")
	cfg.logf("building rlserver (go build ./cmd/rlserver)")
	cmd := exec.Command(cfg.goCmd, "build", "-o", bin, "./cmd/rlserver")
	cmd.Dir = filepath.Dir(mod)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build ./cmd/rlserver: %v\n%s", err, out)
	}
	return bin, nil
}

// startBoth starts rlserver and redis-server, each on a free loopback port
// with its own folder under tmp, each with its defaults and the extra
// flags given.
func startBoth(cfg config, tmp, phase string) (servers, error) {
	var srv servers
	ports, err := benchproc.FreePorts(2)
	if err != nil {
		return srv, err
	}
	for i, name := range []string{"rlserver", "redis"} {
		dir := filepath.Join(tmp, phase+"-"+name)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return srv, err
		}
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i])
		var cmdline []string
		if i == 0 {
			cmdline = cfg.onCPU(cfg.rlserver, append([]string{"--addr", addr, "--dir", dir}, splitArgs(cfg.rlArgs)...)...)
		} else {
			cmdline = cfg.onCPU(cfg.redisServer, append([]string{"--bind", "127.0.0.1", "--port", strconv.Itoa(ports[i]),
				"--dir", dir, "--daemonize", "no", "--logfile", ""}, splitArgs(cfg.redisArgs)...)...)
		}
		if srv[i], err = benchproc.Start(name, addr, dir, cmdline...); err != nil {
			return srv, err
		}
	}
	return srv, nil
}

// splitArgs splits extra server flags at spaces; ” or "" is an empty
// argument (--save ”).
func splitArgs(s string) []string {
	args := strings.Fields(s)
	for i, a := range args {
		if a == "''" || a == `""` {
			args[i] = ""
		}
	}
	return args
}

// verified is the read-back of one pattern's keys on one server.
type verified struct {
	server   string
	pat      pattern
	keys     int   // keys read
	written  int   // of them, keys the generator incremented
	total    int64 // the sum of their counters
	mismatch []string
}

// verify reads back n of the pattern's keys (every key when n covers
// them, else n spread evenly) with GET and TTL: each must hold exactly
// what the generator added to it, with a TTL in (0, ttl], and a key it
// never touched must not exist.
func verify(addr string, pat pattern, t tally, n, ttl int) (verified, error) {
	v := verified{pat: pat}
	n = min(n, len(t))
	if n == 0 {
		return v, nil
	}
	c, err := respio.Dial(addr)
	if err != nil {
		return v, err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Minute))
	keys := make([]int, n)
	for i := range keys {
		keys[i] = int(int64(i) * int64(len(t)) / int64(n))
	}
	for batch := range slices.Chunk(keys, 500) {
		for _, k := range batch {
			key := pat.prefix + strconv.Itoa(k)
			c.Send("GET", key)
			c.Send("TTL", key)
		}
		if err := c.Flush(); err != nil {
			return v, err
		}
		for _, k := range batch {
			got, err := c.Read()
			if err != nil {
				return v, err
			}
			left, err := c.Read()
			if err != nil {
				return v, err
			}
			want := t[k].Load()
			v.keys++
			if want > 0 {
				v.written++
				v.total += want
			}
			key := pat.prefix + strconv.Itoa(k)
			switch l, _ := left.(int64); {
			case want == 0 && (got != nil || l != -2):
				v.mismatch = append(v.mismatch, fmt.Sprintf("%s: never written, GET %v, TTL %v", key, got, left))
			case want > 0 && got != strconv.FormatInt(want, 10):
				v.mismatch = append(v.mismatch, fmt.Sprintf("%s: GET %v, want %d", key, got, want))
			case want > 0 && (l < 1 || l > int64(ttl)):
				v.mismatch = append(v.mismatch, fmt.Sprintf("%s: TTL %v, want 1..%d", key, left, ttl))
			}
		}
	}
	return v, nil
}
