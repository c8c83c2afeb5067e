package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/rlserver/rlserver/metrics"
	"github.com/rlserver/rlserver/server"
	"github.com/rlserver/rlserver/status"
	"github.com/rlserver/rlserver/statuspage"
)

// Operations: the metrics address (Prometheus, status page, health), the
// log format, the config file and the health check.
type opsOptions struct {
	metricsAddr string
	logFormat   string
	configFile  string
	healthcheck bool

	settings map[string]string // every flag's effective value, for CONFIG GET
}

func addOpsFlags(fs *flag.FlagSet, o *opsOptions) {
	fs.StringVar(&o.metricsAddr, "metrics-addr", "", "serve Prometheus metrics (/metrics), the status page (/), /healthz and /readyz on this address (empty: off)")
	fs.StringVar(&o.logFormat, "log-format", "text", "log format: text or json")
	fs.StringVar(&o.configFile, "config", "", "config file: one setting per line, 'name value' with the flags' names, quoted as in redis.conf (\"a b\", 'a b'), # comments; the environment and flags override it")
	fs.BoolVar(&o.healthcheck, "healthcheck", false, "check that the server on --addr answers PING (with --requirepass), exit 0 if so, 1 if not; for Docker and Kubernetes probes")
}

func (o opsOptions) check() error {
	switch o.logFormat {
	case "text", "json":
	default:
		return fmt.Errorf("invalid value %q for --log-format: use text or json", o.logFormat)
	}
	return nil
}

// configPath finds --config on the command line (it wins) or RL_CONFIG,
// before the flags are parsed, since the file's values must be set first.
func configPath(args []string) string {
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			break
		}
		name, value, hasValue := strings.Cut(strings.TrimLeft(a, "-"), "=")
		if !strings.HasPrefix(a, "-") || name != "config" {
			continue
		}
		if hasValue {
			return value
		}
		if i+1 < len(args) {
			return args[i+1]
		}
	}
	return os.Getenv("RL_CONFIG")
}

// boolWord turns redis.conf's yes/no into true/false for a boolean flag.
func boolWord(fl *flag.Flag, v string) string {
	if b, ok := fl.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
		switch strings.ToLower(v) {
		case "yes":
			return "true"
		case "no":
			return "false"
		}
	}
	return v
}

// flagSettings lists every flag's effective value under its name, for
// CONFIG GET (secrets are not shown).
func flagSettings(fs *flag.FlagSet) map[string]string {
	out := map[string]string{}
	fs.VisitAll(func(f *flag.Flag) {
		switch f.Name {
		case "requirepass", "join-password", "healthcheck", "version": // secrets are not shown
			return
		}
		v := f.Value.String()
		if b, ok := f.Value.(interface{ IsBoolFlag() bool }); ok && b.IsBoolFlag() {
			v = map[string]string{"true": "yes", "false": "no"}[v]
		}
		out[f.Name] = v
	})
	return out
}

// newLogger returns the process's logger, whose level CONFIG SET loglevel
// changes through level.
func newLogger(w io.Writer, format string, level *slog.LevelVar) *slog.Logger {
	opts := &slog.HandlerOptions{Level: level}
	if format == "json" {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// opsState is what CONFIG SET changes outside the server package.
type opsState struct {
	level *slog.LevelVar
	snaps *snapshots // nil in cluster mode
}

// configSet applies a CONFIG SET of a setting that lives outside the
// server package; ok is false for a name it does not handle.
func (st *opsState) configSet(name, value string) (ok bool, err error) {
	switch name {
	case "loglevel", "log-level":
		l, err := parseLevel(value)
		if err != nil {
			return true, err
		}
		st.level.Set(l)
		return true, nil
	case "save-interval":
		if st.snaps == nil {
			return true, errors.New("no snapshots in cluster mode")
		}
		d, err := time.ParseDuration(value)
		if err != nil || d < 0 {
			return true, errors.New("must be a duration such as 1s or 500ms, or 0 (off)")
		}
		st.snaps.saver.SetInterval(d)
		return true, nil
	case "stop-writes-on-bgsave-error":
		on, err := parseYesNo(value)
		if err != nil {
			return true, err
		}
		if st.snaps != nil { // cluster mode: accepted, means nothing (docs/persistence.md)
			st.snaps.stopWritesOn.Store(on)
		}
		return true, nil
	}
	return false, nil
}

// opsServer is the HTTP server on --metrics-addr.
type opsServer struct {
	srv  *http.Server
	page *statuspage.Page
	addr string
	done chan struct{}
}

// clusterView is what the ops server reads from a cluster node: a
// cluster.Node, or a sharded node's groups.Host.
type clusterView interface {
	ClusterStatus() status.Cluster
	RaftSnapshotStatus() status.RaftSnapshots
	Removed() bool
}

// groupsView is what the ops server reads from a sharded node
// (*groups.Host) besides its clusterView.
type groupsView interface {
	Topology() status.Topology
}

// notReady says why /readyz answers 503, or "" when the node can answer
// commands: standalone always; in a cluster once it knows a leader (of the
// meta group on a sharded node) and was not removed; on a sharded node
// also while every data group it hosts knows a leader (a group it has not
// opened yet, Role "", does not count).
func notReady(node clusterView) string {
	if node == nil {
		return ""
	}
	if node.Removed() {
		return "this node was removed from the cluster"
	}
	if node.ClusterStatus().LeaderID == "" {
		return "no leader known"
	}
	if g, ok := node.(groupsView); ok {
		for _, gr := range g.Topology().Groups {
			if gr.Role != "" && gr.Leader == "" {
				return fmt.Sprintf("no leader known for group %d", gr.ID)
			}
		}
	}
	return ""
}

// startOps listens on --metrics-addr and serves /metrics, /healthz,
// /readyz and the status page until stop. It returns nil when the address
// is empty. node is nil standalone, snaps nil in cluster mode.
func startOps(ctx context.Context, addr string, srv *server.Server, keys metrics.KeyCounter, node clusterView, snaps *snapshots, password string, log *slog.Logger) (*opsServer, error) {
	if addr == "" {
		return nil, nil
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		var op *net.OpError
		if errors.As(err, &op) && op.Err != nil {
			err = op.Err
		}
		return nil, fmt.Errorf("cannot listen on %s (--metrics-addr): %v (--metrics-addr or RL_METRICS_ADDR picks another address)", addr, err)
	}
	pageSrc := statuspage.Source{Server: srv, Version: version, Password: password}
	metricSrc := metrics.Sources{Server: srv, Memory: srv, Engine: keys, Version: version}
	if node != nil {
		pageSrc.Cluster, metricSrc.Cluster = node, node
	}
	if g, ok := node.(groupsView); ok { // a sharded node; a *cluster.Node has no groups
		pageSrc.Groups, metricSrc.Groups = g, g
	}
	if snaps != nil {
		metricSrc.Persistence = snaps
	}
	page := statuspage.New(pageSrc)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(metricSrc))
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if why := notReady(node); why != "" {
			http.Error(w, why, http.StatusServiceUnavailable)
			return
		}
		io.WriteString(w, "ok\n")
	})
	mux.Handle("/", page.Handler())
	o := &opsServer{
		srv:  &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second},
		page: page,
		addr: ln.Addr().String(),
		done: make(chan struct{}),
	}
	go page.Run(ctx)
	go func() {
		defer close(o.done)
		if err := o.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "addr", o.addr, "err", err)
		}
	}()
	log.Info("listening", "what", "metrics, status page, health", "addr", o.addr,
		"metrics", "http://"+o.addr+"/metrics", "status", "http://"+o.addr+"/")
	return o, nil
}

// stop ends the HTTP server (nil: nothing to do).
func (o *opsServer) stop() {
	if o == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	o.srv.Shutdown(ctx)
	<-o.done
}

// healthcheck PINGs the server on --addr (127.0.0.1 when it listens on
// every interface), authenticating with --requirepass, and reports
// whether it answered PONG. With TLS on --addr and no --tls-addr it speaks
// TLS, presenting the server's own certificate (accepted by a CA that
// requires client certificates) and not checking the server's name.
func healthcheck(o options, out io.Writer) int {
	addr := o.addr
	host, port, err := net.SplitHostPort(addr)
	if err == nil && (host == "" || net.ParseIP(host) != nil && net.ParseIP(host).IsUnspecified()) {
		addr = net.JoinHostPort("127.0.0.1", port)
	}
	var c net.Conn
	d := net.Dialer{Timeout: 2 * time.Second}
	if o.security.tlsOn() && o.security.tlsAddr == "" {
		cfg := &tls.Config{InsecureSkipVerify: true}
		if cert, err := tls.LoadX509KeyPair(o.security.tlsCertFile, o.security.tlsKeyFile); err == nil {
			cfg.Certificates = []tls.Certificate{cert}
		}
		c, err = tls.DialWithDialer(&d, "tcp", addr, cfg)
	} else {
		c, err = d.Dial("tcp", addr)
	}
	if err != nil {
		fmt.Fprintln(out, "unhealthy:", err)
		return 1
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(3 * time.Second))
	req := "*1\r\n$4\r\nPING\r\n"
	if o.requirePass != "" {
		req = fmt.Sprintf("*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(o.requirePass), o.requirePass) + req
	}
	if _, err := io.WriteString(c, req); err != nil {
		fmt.Fprintln(out, "unhealthy:", err)
		return 1
	}
	r := bufio.NewReader(c)
	if o.requirePass != "" {
		if line, err := r.ReadString('\n'); err != nil || line != "+OK\r\n" {
			fmt.Fprintln(out, "unhealthy: AUTH:", replyOrErr(line, err))
			return 1
		}
	}
	line, err := r.ReadString('\n')
	if err != nil || line != "+PONG\r\n" {
		fmt.Fprintln(out, "unhealthy: PING:", replyOrErr(line, err))
		return 1
	}
	fmt.Fprintln(out, "healthy")
	return 0
}

// replyOrErr describes what the health check read instead of the reply it
// wanted: the read error, or the reply line (quoted, without its RESP
// type byte when it is an error).
func replyOrErr(line string, err error) string {
	if err != nil {
		if line != "" {
			return fmt.Sprintf("%v after %q", err, line)
		}
		return err.Error()
	}
	line = strings.TrimRight(line, "\r\n")
	if strings.HasPrefix(line, "-") {
		return line[1:]
	}
	return fmt.Sprintf("unexpected reply %q", line)
}

// applySettings adds every flag's value to CONFIG GET's answers, keeping
// the Redis-named ones already there.
func (o opsOptions) applySettings(cfg *server.Config) {
	names := make([]string, 0, len(o.settings))
	for k := range o.settings {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		if _, ok := cfg.Settings[k]; !ok {
			cfg.Settings[k] = o.settings[k]
		}
	}
}
