package clienttest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/redis/go-redis/v9"
)

// Operations end to end: Prometheus metrics, INFO through go-redis, RL.TOP,
// CONFIG GET/SET, the config file's precedence, the health check.

// startWithMetrics starts a server with --metrics-addr on a free port and
// returns it with the metrics base URL.
func startWithMetrics(t *testing.T, o opts) (*server, string) {
	t.Helper()
	maddr := net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))
	o.args = append([]string{"--metrics-addr", maddr}, o.args...)
	s := start(t, o)
	return s, "http://" + maddr
}

func httpGet(t testing.TB, url string) (int, string) {
	t.Helper()
	c := &http.Client{Timeout: 10 * time.Second}
	r, err := c.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return r.StatusCode, string(b)
}

// scrape fetches and parses /metrics.
func scrape(t testing.TB, base string) map[string]*dto.MetricFamily {
	t.Helper()
	code, body := httpGet(t, base+"/metrics")
	if code != 200 {
		t.Fatalf("/metrics: HTTP %d: %s", code, body)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(body))
	if err != nil {
		t.Fatalf("parsing /metrics: %v\n%s", err, body)
	}
	return fams
}

// metricValue finds the sample of family name whose labels include want
// (name=value pairs); ok is false when there is none. Histograms report
// their sample count.
func metricValue(fams map[string]*dto.MetricFamily, name string, want ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		labels := map[string]string{}
		for _, l := range m.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		for i := 0; i+1 < len(want); i += 2 {
			if labels[want[i]] != want[i+1] {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		case m.Untyped != nil:
			return m.Untyped.GetValue(), true
		}
	}
	return 0, false
}

func wantMetric(t *testing.T, fams map[string]*dto.MetricFamily, want float64, name string, labels ...string) {
	t.Helper()
	got, ok := metricValue(fams, name, labels...)
	if !ok {
		t.Errorf("%s%v: missing", name, labels)
		return
	}
	if got != want {
		t.Errorf("%s%v = %v, want %v", name, labels, got, want)
	}
}

func TestMetricsExactCounts(t *testing.T) {
	s, base := startWithMetrics(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	// rl.allow: 3 allowed and 2 denied on a bucket of 3, one refused for
	// its arity. rl.fixed: 1 allowed, 1 WRONGTYPE.
	for range 5 {
		do(t, c, "RL.ALLOW", "hot", 3, slowRate)
	}
	wantErr(t, c, "ERR wrong number of arguments for 'rl.allow' command", "RL.ALLOW", "hot")
	do(t, c, "RL.FIXED", "win", 5, 60000)
	wantErr(t, c, "WRONGTYPE Operation against a key holding the wrong kind of value", "RL.FIXED", "hot", 5, 60000)
	wantReply(t, c, "PONG", "PING")

	fams := scrape(t, base)
	wantMetric(t, fams, 3, "rlserver_commands_total", "command", "rl.allow", "outcome", "allowed")
	wantMetric(t, fams, 2, "rlserver_commands_total", "command", "rl.allow", "outcome", "denied")
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.allow", "outcome", "error")
	wantMetric(t, fams, 0, "rlserver_commands_total", "command", "rl.allow", "outcome", "ok")
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.fixed", "outcome", "allowed")
	wantMetric(t, fams, 1, "rlserver_commands_total", "command", "rl.fixed", "outcome", "error")
	// The harness's readiness probe sent a PING too.
	wantMetric(t, fams, 2, "rlserver_commands_total", "command", "ping", "outcome", "ok")
	// Latency: one observation per executed command (the rejected one
	// never ran).
	wantMetric(t, fams, 5, "rlserver_command_duration_seconds", "command", "rl.allow")
	wantMetric(t, fams, 2, "rlserver_command_duration_seconds", "command", "rl.fixed")
	wantMetric(t, fams, 2, "rlserver_error_replies_total", "code", "ERR")
	wantMetric(t, fams, 1, "rlserver_error_replies_total", "code", "WRONGTYPE")
	wantMetric(t, fams, 1, "rlserver_keys", "kind", "gcra")
	wantMetric(t, fams, 1, "rlserver_keys", "kind", "fixed")
	wantMetric(t, fams, 0, "rlserver_keys", "kind", "log")
	wantMetric(t, fams, 1, "rlserver_connected_clients")
	wantMetric(t, fams, 10000, "rlserver_max_clients")
	wantMetric(t, fams, 1, "rlserver_build_info", "version", testVersion)
	if v, _ := metricValue(fams, "rlserver_top_denied_keys", "key", "hot"); v < 1.9 || v > 2 {
		t.Errorf("rlserver_top_denied_keys{key=hot} = %v, want about 2", v)
	}
	if v, ok := metricValue(fams, "rlserver_pipeline_duration_seconds"); !ok || v < 9 {
		t.Errorf("rlserver_pipeline_duration_seconds count = %v, want at least the 9 commands' batches", v)
	}
	for _, name := range []string{"rlserver_snapshot_age_seconds", "rlserver_snapshot_last_success_timestamp_seconds",
		"rlserver_expired_keys_total", "go_goroutines", "process_resident_memory_bytes"} {
		if _, ok := metricValue(fams, name); !ok {
			t.Errorf("%s missing", name)
		}
	}
	if _, ok := fams["rlserver_raft_term"]; ok {
		t.Errorf("raft metrics exported by a standalone server")
	}

	// A SAVE shows in the snapshot metrics.
	if err := c.Do(ctx, "SAVE").Err(); err != nil {
		t.Fatal(err)
	}
	fams = scrape(t, base)
	wantMetric(t, fams, 1, "rlserver_snapshot_saves_total", "result", "ok")
	wantMetric(t, fams, 2, "rlserver_snapshot_last_keys")
	if v, _ := metricValue(fams, "rlserver_snapshot_age_seconds"); v > 30 {
		t.Errorf("snapshot age %v s right after SAVE", v)
	}

	code, body := httpGet(t, base+"/healthz")
	if code != 200 || body != "ok\n" {
		t.Errorf("/healthz = %d %q", code, body)
	}
	if code, _ := httpGet(t, base+"/readyz"); code != 200 {
		t.Errorf("/readyz = %d", code)
	}
}

func TestMetricsOffByDefault(t *testing.T) {
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	if got := configGet(t, c, "metrics-addr"); got != "" {
		t.Errorf("metrics-addr = %q by default, want empty (off)", got)
	}
}

// configGet returns a setting's CONFIG GET value.
func configGet(t testing.TB, c *redis.Client, name string) string {
	t.Helper()
	m, err := c.ConfigGet(context.Background(), name).Result()
	if err != nil {
		t.Fatalf("CONFIG GET %s: %v", name, err)
	}
	v, ok := m[name]
	if !ok {
		t.Fatalf("CONFIG GET %s: not found in %v", name, m)
	}
	return v
}

func TestInfoSectionsGoRedis(t *testing.T) {
	s := start(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	for range 3 {
		do(t, c, "RL.ALLOW", "k", 2, slowRate)
	}
	wantErr(t, c, "WRONGTYPE Operation against a key holding the wrong kind of value", "RL.LOG", "k", 5, 1000)

	def, err := c.InfoMap(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, sec := range []string{"Server", "Clients", "Memory", "Persistence", "Stats", "Replication", "CPU", "Errorstats", "Keyspace"} {
		if _, ok := def[sec]; !ok {
			t.Errorf("INFO: section %q missing (got %v)", sec, keysOf(def))
		}
	}
	if _, ok := def["Commandstats"]; ok {
		t.Errorf("INFO without arguments has Commandstats; Redis leaves it to INFO all")
	}
	wantField := func(m map[string]map[string]string, sec, field, want string) {
		t.Helper()
		if got := m[sec][field]; got != want {
			t.Errorf("INFO %s %s = %q, want %q", sec, field, got, want)
		}
	}
	wantField(def, "Server", "redis_version", "7.4.0")
	wantField(def, "Server", "rlserver_version", testVersion)
	wantField(def, "Server", "process_id", strconv.Itoa(s.cmd.Process.Pid))
	wantField(def, "Clients", "connected_clients", "1")
	wantField(def, "Stats", "rl_allowed", "2")
	wantField(def, "Stats", "rl_denied", "1")
	wantField(def, "Errorstats", "errorstat_WRONGTYPE", "count=1")
	wantField(def, "Keyspace", "db0", "keys=1,expires=1,avg_ttl=0")
	wantField(def, "Replication", "role", "master")
	for _, f := range []string{"used_cpu_sys", "used_cpu_user"} {
		if _, err := strconv.ParseFloat(def["CPU"][f], 64); err != nil {
			t.Errorf("INFO CPU %s = %q, want a number", f, def["CPU"][f])
		}
	}
	if _, err := strconv.Atoi(def["Stats"]["instantaneous_ops_per_sec"]); err != nil {
		t.Errorf("instantaneous_ops_per_sec = %q", def["Stats"]["instantaneous_ops_per_sec"])
	}

	all, err := c.InfoMap(ctx, "all").Result()
	if err != nil {
		t.Fatal(err)
	}
	line := all["Commandstats"]["cmdstat_rl.allow"]
	fields := map[string]string{}
	for _, kv := range strings.Split(line, ",") {
		k, v, _ := strings.Cut(kv, "=")
		fields[k] = v
	}
	if fields["calls"] != "3" || fields["rejected_calls"] != "0" || fields["failed_calls"] != "0" ||
		fields["rl_allowed"] != "2" || fields["rl_denied"] != "1" {
		t.Errorf("cmdstat_rl.allow = %q", line)
	}
	if _, err := strconv.ParseFloat(fields["usec_per_call"], 64); err != nil {
		t.Errorf("cmdstat_rl.allow usec_per_call = %q", fields["usec_per_call"])
	}
	if !strings.HasPrefix(all["Commandstats"]["cmdstat_rl.log"], "calls=1,") ||
		!strings.HasSuffix(all["Commandstats"]["cmdstat_rl.log"], "failed_calls=1") {
		t.Errorf("cmdstat_rl.log = %q, want one failed call", all["Commandstats"]["cmdstat_rl.log"])
	}
	// go-redis sent CLIENT SETINFO: subcommands count by their full name.
	if !strings.HasPrefix(all["Commandstats"]["cmdstat_client|setinfo"], "calls=") {
		t.Errorf("no cmdstat_client|setinfo in %v", all["Commandstats"])
	}
	one, err := c.InfoMap(ctx, "commandstats").Result()
	if err != nil || len(one) != 1 || one["Commandstats"] == nil {
		t.Errorf("INFO commandstats = %v, %v; want only that section", keysOf(one), err)
	}
}

func keysOf[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

func TestTopFindsHotKeys(t *testing.T) {
	s, base := startWithMetrics(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()
	// Cost 2 on capacity 1 is always denied and stores nothing. Three hot
	// keys (300, 150, 75 denials) among 3000 cold keys denied once each:
	// more distinct keys than the summary's 1024 counters.
	hot := map[string]int{"hot:a": 300, "hot:b": 150, "hot:c": 75}
	pipe := c.Pipeline()
	for i := range 3000 {
		pipe.Do(ctx, "RL.ALLOW", fmt.Sprintf("cold:%d", i), 1, 1, 2)
		for k, n := range hot {
			if i%(3000/n) == 0 {
				pipe.Do(ctx, "RL.ALLOW", k, 1, 1, 2)
			}
		}
		if pipe.Len() >= 500 {
			if _, err := pipe.Exec(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	v, err := c.Do(ctx, "RL.TOP", "COUNT", 3).Slice()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"hot:a", "hot:b", "hot:c"}
	if len(v) != 3 {
		t.Fatalf("RL.TOP COUNT 3 = %v", v)
	}
	for i, e := range v {
		pair, _ := e.([]any)
		if len(pair) != 2 || pair[0] != want[i] {
			t.Fatalf("RL.TOP COUNT 3 = %v, want %v first", v, want)
		}
		n, _ := pair[1].(int64)
		exact := hot[want[i]]
		// Decay takes about 1% a second; Space-Saving may add up to
		// (denials / 1024) ~ 4.
		if float64(n) < 0.9*float64(exact) || n > int64(exact)+5 {
			t.Errorf("RL.TOP %s = %d denials, want about %d", want[i], n, exact)
		}
	}
	if v, err := c.Do(ctx, "RL.TOP").Slice(); err != nil || len(v) != 10 {
		t.Errorf("RL.TOP = %d entries, %v; want the default 10", len(v), err)
	}
	wantErr(t, c, "ERR value is not an integer or out of range", "RL.TOP", "COUNT", 0)
	wantErr(t, c, "ERR syntax error", "RL.TOP", "LIMIT", 3)
	fams := scrape(t, base)
	if n := len(fams["rlserver_top_denied_keys"].GetMetric()); n != 10 {
		t.Errorf("rlserver_top_denied_keys has %d keys, want 10", n)
	}
	if v, _ := metricValue(fams, "rlserver_top_denied_keys", "key", "hot:a"); v < 270 {
		t.Errorf("rlserver_top_denied_keys{key=hot:a} = %v", v)
	}
}

func TestConfigSetTakesEffect(t *testing.T) {
	s := start(t, opts{args: []string{"--save-interval", "0", "--log-level", "info"}})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()

	// maxclients: with 2, a third connection is refused.
	wantReply(t, c, "OK", "CONFIG", "SET", "maxclients", "2")
	if got := configGet(t, c, "maxclients"); got != "2" {
		t.Errorf("maxclients = %q after CONFIG SET", got)
	}
	second := s.raw(t)
	second.do("PING\r\n", "+PONG\r\n")
	third := s.raw(t)
	third.expect("-ERR max number of clients reached\r\n")
	second.c.Close()
	wantReply(t, c, "OK", "CONFIG", "SET", "maxclients", "100")

	// max-key-len.
	wantReply(t, c, "OK", "CONFIG", "SET", "max-key-len", "4")
	wantErr(t, c, "ERR key is too long: 5 bytes, the limit is 4 (max-key-len)", "RL.ALLOW", "abcde", 1, 1)
	wantReply(t, c, "OK", "CONFIG", "SET", "max-key-len", "100")

	// save-interval: off at start, so changes wait; set, they are saved.
	do(t, c, "RL.ALLOW", "saved", 5, slowRate)
	wantReply(t, c, "OK", "CONFIG", "SET", "save-interval", "20ms")
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := c.InfoMap(ctx, "persistence").Result()
		if err != nil {
			t.Fatal(err)
		}
		if info["Persistence"]["rdb_changes_since_last_save"] == "0" && info["Persistence"]["rdb_saves"] != "0" {
			if got := info["Persistence"]["rl_save_interval_ms"]; got != "20" {
				t.Errorf("rl_save_interval_ms = %s, want 20", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no periodic save after CONFIG SET save-interval: %v", info["Persistence"])
		}
		time.Sleep(20 * time.Millisecond)
	}

	// log-level (and Redis's loglevel): debug shows the periodic saves.
	wantReply(t, c, "OK", "CONFIG", "SET", "loglevel", "debug")
	if got := configGet(t, c, "log-level"); got != "debug" {
		t.Errorf("log-level = %q after CONFIG SET loglevel debug", got)
	}
	do(t, c, "RL.ALLOW", "saved", 5, slowRate)
	waitFor(t, "a debug line in the log", func() bool {
		return strings.Contains(s.stderr.String(), "level=DEBUG")
	})

	wantErr(t, c, "ERR CONFIG SET failed (possibly related to argument 'maxclients') - argument must be an integer of at least 1", "CONFIG", "SET", "maxclients", "0")
	wantErr(t, c, "ERR CONFIG SET failed (possibly related to argument 'log-level') - invalid value \"loud\" for --log-level: use debug, info, warn or error", "CONFIG", "SET", "log-level", "loud")
	wantErr(t, c, "ERR CONFIG SET failed (possibly related to argument 'port') - can't set immutable config", "CONFIG", "SET", "port", "1")
	wantErr(t, c, "ERR Unknown option or number of arguments for CONFIG SET - 'nosuch'", "CONFIG", "SET", "nosuch", "1")
	if !strings.Contains(s.stderr.String(), `msg="config set" name=maxclients value=2`) {
		t.Errorf("no log line for CONFIG SET maxclients:\n%s", s.stderr)
	}
}

// TestConfigPrecedence: the file sets four settings, the environment
// overrides two of them, a flag overrides one of those: file < env < flags.
func TestConfigPrecedence(t *testing.T) {
	dir := t.TempDir()
	conf := filepath.Join(dir, "rlserver.conf")
	os.WriteFile(conf, []byte(`# rlserver test config
maxclients 111
max-key-len 112
max-args = 113
proto-max-bulk-len "114000"
protected-mode no
log-format json
`), 0o644)
	s := start(t, opts{
		args: []string{"--config", conf, "--max-args", "333"},
		env:  []string{"RL_MAX_KEY_LEN=222", "RL_MAX_ARGS=223"},
	})
	c := newGoRedis(t, s, nil)
	for name, want := range map[string]string{
		"maxclients":         "111",    // file
		"proto-max-bulk-len": "114000", // file
		"protected-mode":     "no",     // file, a boolean as yes/no
		"max-key-len":        "222",    // env over file
		"max-args":           "333",    // flag over env over file
		"log-format":         "json",
		"config":             conf,
	} {
		if got := configGet(t, c, name); got != want {
			t.Errorf("CONFIG GET %s = %q, want %q", name, got, want)
		}
	}
	wantErr(t, c, "ERR key is too long: 223 bytes, the limit is 222 (max-key-len)", "RL.ALLOW", strings.Repeat("k", 223), 1, 1)

	// A bad file stops the start with the file and line named.
	bad := filepath.Join(dir, "bad.conf")
	os.WriteFile(bad, []byte("maxclients 5\nno-such-setting 1\n"), 0o644)
	out, err := exec.Command(binary(), "--config", bad, "--dir", dir).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "bad.conf line 2: unknown setting \"no-such-setting\"") {
		t.Errorf("start with a bad config: %v\n%s", err, out)
	}
}

func TestLogFormatJSON(t *testing.T) {
	s := start(t, opts{args: []string{"--log-format", "json", "--log-level", "info"}})
	c := newGoRedis(t, s, nil)
	// Failed AUTHs are warned about, at most once per 10 s.
	for range 3 {
		c.Do(context.Background(), "AUTH", "nobody", "wrong")
	}
	waitFor(t, "the auth warning", func() bool {
		return strings.Contains(s.stderr.String(), `"msg":"authentication failed"`)
	})
	s.stop()
	lines := strings.Split(strings.TrimSpace(s.stderr.String()), "\n")
	var msgs []string
	for _, l := range lines {
		if !strings.HasPrefix(l, "{") {
			continue
		}
		var m struct{ Msg string }
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Errorf("log line is not JSON: %q", l)
		}
		msgs = append(msgs, m.Msg)
	}
	joined := strings.Join(msgs, "|")
	for _, want := range []string{"rlserver started", "shutting down: finishing in-flight commands", "rlserver stopped"} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %q line in the JSON log: %v", want, msgs)
		}
	}
	if n := strings.Count(joined, "authentication failed"); n != 1 {
		t.Errorf("%d authentication warnings for 3 failures in a burst, want 1 (rate-limited)", n)
	}
}

func TestHealthcheck(t *testing.T) {
	s := start(t, opts{args: []string{"--requirepass", "sekrit"}, authPass: "sekrit"})
	run := func(args ...string) (int, string) {
		cmd := exec.Command(binary(), append([]string{"--healthcheck"}, args...)...)
		cmd.Env = cleanEnv()
		out, _ := cmd.CombinedOutput()
		return cmd.ProcessState.ExitCode(), string(out)
	}
	if code, out := run("--addr", s.addr, "--requirepass", "sekrit"); code != 0 || out != "healthy\n" {
		t.Errorf("healthcheck of a running server: exit %d, %q", code, out)
	}
	if code, out := run("--addr", s.addr, "--requirepass", "wrong"); code != 1 || !strings.Contains(out, "AUTH") {
		t.Errorf("healthcheck with a wrong password: exit %d, %q", code, out)
	}
	if code, out := run("--addr", net.JoinHostPort("127.0.0.1", strconv.Itoa(freePort(t)))); code != 1 || !strings.HasPrefix(out, "unhealthy") {
		t.Errorf("healthcheck of nothing: exit %d, %q", code, out)
	}
	// The environment works as for the server (RL_ADDR as in the image).
	cmd := exec.Command(binary(), "--healthcheck")
	cmd.Env = cleanEnv("RL_ADDR=0.0.0.0:"+strconv.Itoa(s.port), "RL_REQUIREPASS=sekrit")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Errorf("healthcheck from the environment: %v %s", err, out)
	}
}
