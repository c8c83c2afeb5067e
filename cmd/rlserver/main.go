// Command rlserver is a rate-limiter server that speaks the Redis protocol.
//
// It parses flags (each also settable as RL_<NAME> in the environment),
// wires the engine to the network edge, and shuts down gracefully on
// SIGINT or SIGTERM. All logic lives in the packages it wires.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rlserver/rlserver/cluster"
	"github.com/rlserver/rlserver/engine"
	"github.com/rlserver/rlserver/groups"
	"github.com/rlserver/rlserver/internal/sysmon"
	"github.com/rlserver/rlserver/policy"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/standalone"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

type options struct {
	addr        string
	shards      int
	dir         string
	requirePass string
	logLevel    string
	pidFile     string
	showVersion bool
	cluster     clusterOptions
	persist     persistOptions
	limits      limitOptions
	security    securityOptions
	ops         opsOptions
	policies    policyOptions
}

func main() {
	tuneGC() // gc.go: GOGC=25 at a large heap, more room at a small one
	opts, err := parseFlags(os.Args[1:])
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(0)
	}
	if err != nil {
		fatal(err)
	}
	if opts.showVersion {
		fmt.Println("rlserver", version)
		return
	}
	limitHeap(opts.limits.maxMemoryBytes) // gc.go
	if opts.ops.healthcheck {
		os.Exit(healthcheck(opts, os.Stdout))
	}
	sysmon.KeepAwake()
	if err := run(opts); err != nil {
		fatal(err)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "rlserver:", err)
	os.Exit(1)
}

func parseFlags(args []string) (options, error) {
	var o options
	fs := flag.NewFlagSet("rlserver", flag.ContinueOnError)
	fs.StringVar(&o.addr, "addr", "127.0.0.1:6379", "address to listen on for Redis-protocol clients (host:port)")
	fs.IntVar(&o.shards, "shards", defaultShards(runtime.NumCPU()), "number of engine shards, each owned by one goroutine; the default shown is a quarter of this machine's CPUs, at least 1")
	fs.StringVar(&o.dir, "dir", "./data", "data folder (snapshots, Raft state); created if missing")
	fs.StringVar(&o.requirePass, "requirepass", "", "password clients must give with AUTH or HELLO ... AUTH (empty: none)")
	fs.StringVar(&o.pidFile, "pidfile", "", "write the process's pid to this file at start and remove it on a clean exit, as Redis's pidfile (empty: none)")
	fs.StringVar(&o.logLevel, "log-level", "info", "log level: debug, info, warn or error")
	fs.BoolVar(&o.showVersion, "version", false, "print the version and exit")
	addLimitFlags(fs, &o.limits)
	addSecurityFlags(fs, &o.security)
	addClusterFlags(fs, &o.cluster)
	addPersistFlags(fs, &o.persist)
	addOpsFlags(fs, &o.ops)
	addPolicyFlags(fs, &o.policies)
	fs.Usage = func() {
		out := fs.Output()
		fmt.Fprintf(out, "rlserver %s: a rate-limiter server that speaks the Redis protocol.\n\n", version)
		fmt.Fprintf(out, "Usage: rlserver [flags]\n\nEvery flag can also be set in the environment as RL_<NAME>\n(upper case, '-' as '_', e.g. RL_ADDR, RL_LOG_LEVEL), and in a config\nfile (--config) as 'name value' lines, quoted as in redis.conf. Flags\noverride the environment, which overrides the file.\n\nFlags:\n")
		fs.PrintDefaults()
	}
	// The config file first, then the environment, so flags on the
	// command line override both and the environment overrides the file.
	if err := applyConfigFile(fs, configPath(args)); err != nil {
		return o, err
	}
	var envErr error
	fs.VisitAll(func(f *flag.Flag) {
		name := "RL_" + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && envErr == nil {
			if err := f.Value.Set(v); err != nil {
				envErr = fmt.Errorf("invalid value %q for %s: %v", v, name, err)
			}
		}
	})
	if envErr != nil {
		return o, envErr
	}
	// The flag package would print its error and the whole usage on stderr
	// for a bad flag; main reports the error once, in one line, instead.
	// --help prints the usage on stdout.
	fs.SetOutput(io.Discard)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(os.Stdout)
			fs.Usage()
			return o, err
		}
		return o, fmt.Errorf("%v (see rlserver --help)", err)
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q (see rlserver --help)", fs.Arg(0))
	}
	if err := o.limits.check(); err != nil {
		return o, err
	}
	if err := o.security.check(); err != nil {
		return o, err
	}
	if err := o.cluster.check(); err != nil {
		return o, err
	}
	if err := o.persist.check(); err != nil {
		return o, err
	}
	if err := o.ops.check(); err != nil {
		return o, err
	}
	o.ops.settings = flagSettings(fs)
	if o.shards < 1 || o.shards > 4096 {
		return o, fmt.Errorf("invalid value %d for --shards: must be between 1 and 4096", o.shards)
	}
	if _, err := parseLevel(o.logLevel); err != nil {
		return o, err
	}
	return o, nil
}

func parseLevel(s string) (slog.Level, error) {
	switch strings.ToLower(s) {
	case "debug":
		return slog.LevelDebug, nil
	case "info":
		return slog.LevelInfo, nil
	case "warn", "warning":
		return slog.LevelWarn, nil
	case "error":
		return slog.LevelError, nil
	}
	return 0, fmt.Errorf("invalid value %q for --log-level: use debug, info, warn or error", s)
}

// ensureDir creates dir if missing and checks that files can be written in it.
func ensureDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("data folder %s: %v", dir, errors.Unwrap(err))
	}
	f, err := os.CreateTemp(dir, ".write-check-*")
	if err != nil {
		return fmt.Errorf("data folder %s is not writable: %v", dir, errors.Unwrap(err))
	}
	f.Close()
	return os.Remove(f.Name())
}

func run(o options) error {
	level := new(slog.LevelVar)
	if l, err := parseLevel(o.logLevel); err == nil {
		level.Set(l)
	}
	log := newLogger(os.Stderr, o.ops.logFormat, level)

	sec, err := o.security.load(o.requirePass)
	if err != nil {
		return err
	}
	if err := ensureDir(o.dir); err != nil {
		return err
	}
	lock, err := lockDir(o.dir) // before anything reads or writes the folder
	if err != nil {
		return err
	}
	defer lock.Close()
	ln, err := net.Listen("tcp", o.addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return fmt.Errorf("cannot listen on %s: %v (--addr or RL_ADDR picks another address)", o.addr, err)
	}
	removePid, err := writePidFile(o.pidFile)
	if err != nil {
		ln.Close()
		return err
	}
	defer removePid()
	lns, err := o.security.listen(sec, ln)
	if err != nil {
		ln.Close()
		return err
	}

	// The engine of a one-group node or a standalone server; a sharded
	// node's groups each have their own (groups.Host).
	var eng *engine.Engine
	if o.cluster.nodeID == "" || o.cluster.groups == 0 {
		eng = engine.New(o.shards)
		defer eng.Close()
	}
	var backend server.Backend
	var node *cluster.Node
	var sharded *groups.Host
	var replicated interface {
		clusterView
		Close() error
		ReplacePolicies(context.Context, []*policy.Policy) error
		Sweep(context.Context, time.Duration, int)
	}
	switch {
	case o.cluster.nodeID != "" && o.cluster.groups > 0:
		sharded, err = openHost(context.Background(), o.cluster, o.shards, o.dir, ln.Addr(), o.requirePass, sec, log)
		if err != nil {
			return err
		}
		backend, replicated = sharded, sharded
	case o.cluster.nodeID != "":
		node, err = openCluster(context.Background(), o.cluster, eng, o.dir, ln.Addr(), o.requirePass, sec, log)
		if err != nil {
			return err
		}
		backend, replicated = node, node
	}
	if replicated != nil {
		// The policy file is checked before serving; the cluster adopts
		// it once a leader applies it (policies.go).
		ps, err := o.policies.read()
		if err != nil {
			replicated.Close()
			return err
		}
		if o.policies.file != "" {
			pctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go proposePolicies(pctx, replicated, o.policies.file, ps, log)
		}
	}
	// Standalone, the state lives in snapshots: loaded here, saved by
	// snaps until its close below (deferred too, so it runs before the
	// engine closes on any return).
	var snaps *snapshots
	var alone *standalone.Backend
	if replicated == nil {
		if snaps, err = openSnapshots(o.persist, o.dir, eng, log); err != nil {
			return err
		}
		defer snaps.close()
		store, err := standalonePolicies(o.policies, snaps, log)
		if err != nil {
			return err
		}
		alone = standalone.New(eng, store)
		backend = alone
	}
	dir, _ := filepath.Abs(o.dir)
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	cfg := server.Config{
		RequirePass: o.requirePass,
		Version:     version,
		Settings: map[string]string{
			"bind":        host,
			"port":        port,
			"dir":         dir,
			"databases":   "1",
			"save":        "",
			"appendonly":  "no",
			"loglevel":    o.logLevel,
			"shards":      strconv.Itoa(o.shards),
			"requirepass": "",
		},
	}
	o.limits.apply(&cfg)
	o.security.apply(sec, &cfg)
	o.ops.applySettings(&cfg)
	cfg.ConfigSet = (&opsState{level: level, snaps: snaps}).configSet
	cfg.Logger = log
	cfg.PolicyFile = o.policies.file
	// What the backend can do beyond server.Backend (capabilities.go).
	switch {
	case sharded != nil:
		declareHost(&cfg, sharded)
	case node != nil:
		declareNode(&cfg, node)
	default:
		declareStandalone(&cfg, alone, snaps)
	}
	srv := server.New(cfg, backend)

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	// The sweeper sends to the shards' queues, so it must have returned
	// before the engine closes them (deferred above): stopSweep cancels it
	// and waits.
	swept := make(chan struct{})
	go func() {
		defer close(swept)
		if replicated != nil {
			replicated.Sweep(ctx, 100*time.Millisecond, 1000)
		} else {
			alone.Sweep(ctx, 100*time.Millisecond, 1000)
		}
	}()
	memWait := o.limits.startMemoryMonitor(ctx, srv) // maxmemory (limits.go)
	stopSweep := sync.OnceFunc(func() {
		stop()
		<-swept
		memWait()
	})
	defer stopSweep()
	go reloadOnHangup(ctx, catchHangup(), srv, o.policies.file, log)
	var view clusterView
	if replicated != nil {
		view = replicated
	}
	opsSrv, err := startOps(ctx, o.ops.metricsAddr, srv, backend, view, snaps, o.requirePass, log)
	if err != nil {
		return err
	}
	defer opsSrv.stop()

	served := make(chan error, len(lns))
	for _, l := range lns {
		go func() { served <- srv.Serve(l) }()
	}
	log.Info("rlserver started", "version", version, "addr", ln.Addr().String(), "shards", o.shards, "dir", dir, "pid", os.Getpid())
	o.security.logListeners(log, lns)

	select {
	case err := <-served:
		return fmt.Errorf("serving %s: %v", o.addr, err)
	case <-ctx.Done():
	case <-snaps.shutdownRequested():
		log.Info("SHUTDOWN received")
	}
	log.Info("shutting down: finishing in-flight commands")
	shutCtx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutCtx); err != nil {
		log.Warn("connections still open at shutdown deadline; closing them", "err", err)
	}
	for range lns {
		<-served
	}
	stopSweep()
	if err := snaps.close(); err != nil {
		return fmt.Errorf("final snapshot save failed: %v", err)
	}
	if replicated != nil {
		if err := replicated.Close(); err != nil {
			log.Warn("raft shutdown", "err", err)
		}
	}
	log.Info("rlserver stopped")
	return nil
}

// defaultShards is a quarter of the CPUs, at least one. A decision costs
// the engine about a third of what its protocol work costs the connection
// goroutines, so a quarter of the cores keeps the shards from being the
// bottleneck; every further shard adds hand-offs to every pipeline that
// spans shards. Measured on 2 cores (redis-benchmark -c 50 -P 32, random
// keys): one shard takes 600 ns of server CPU per RL.ALLOW and serves 12%
// more than two shards, which take 770 ns.
func defaultShards(cpus int) int { return max(1, cpus/4) }
