package deploy

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rlserver/rlserver/metrics"
	"go.yaml.in/yaml/v2"
)

// metricNames lists every metric rlserver exports: its own collector's,
// and the Go runtime and process collectors' prefixes.
func metricNames(t *testing.T) map[string]bool {
	t.Helper()
	ch := make(chan *prometheus.Desc, 100)
	go func() { metrics.New(metrics.Sources{}).Describe(ch); close(ch) }()
	names := map[string]bool{}
	re := regexp.MustCompile(`fqName: "([^"]+)"`)
	for d := range ch {
		m := re.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("descriptor without a name: %s", d)
		}
		names[m[1]] = true
	}
	return names
}

func TestGrafanaDashboard(t *testing.T) {
	src, err := os.ReadFile("grafana/rlserver.json")
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Title  string
		UID    string
		Panels []struct {
			Title   string
			Type    string
			Targets []struct{ Expr string }
		}
	}
	if err := json.Unmarshal(src, &dash); err != nil {
		t.Fatalf("grafana/rlserver.json: %v", err)
	}
	if dash.Title != "rlserver" || dash.UID == "" || len(dash.Panels) < 10 {
		t.Fatalf("dashboard %q uid %q with %d panels", dash.Title, dash.UID, len(dash.Panels))
	}
	known := metricNames(t)
	used := map[string]bool{}
	metric := regexp.MustCompile(`\b(rlserver_[a-z_]+|go_[a-z_]+|process_[a-z_]+)`)
	for _, p := range dash.Panels {
		if p.Type != "row" && len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if strings.Count(tg.Expr, "(") != strings.Count(tg.Expr, ")") {
				t.Errorf("panel %q: unbalanced parentheses in %s", p.Title, tg.Expr)
			}
			for _, name := range metric.FindAllString(tg.Expr, -1) {
				base := name
				for _, suf := range []string{"_bucket", "_sum", "_count"} {
					if b, ok := strings.CutSuffix(name, suf); ok && known[b] {
						base = b
					}
				}
				if strings.HasPrefix(base, "rlserver_") && !known[base] {
					t.Errorf("panel %q queries %s, which rlserver does not export", p.Title, name)
				}
				used[base] = true
			}
		}
	}
	for _, must := range []string{"rlserver_commands_total", "rlserver_command_duration_seconds", "rlserver_keys",
		"rlserver_top_denied_keys", "rlserver_snapshot_age_seconds", "rlserver_raft_applied_index", "rlserver_raft_apply_lag"} {
		if !used[must] {
			t.Errorf("the dashboard does not show %s", must)
		}
	}
}

// yamlDocs parses every document of a YAML file.
func yamlDocs(t *testing.T, path string) []map[string]any {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dec := yaml.NewDecoder(bytes.NewReader(src))
	var docs []map[string]any
	for {
		var doc map[string]any
		err := dec.Decode(&doc)
		if errors.Is(err, io.EOF) {
			return docs
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		docs = append(docs, doc)
	}
}

func TestDockerCompose(t *testing.T) {
	docs := yamlDocs(t, "docker-compose.yml")
	if len(docs) != 1 {
		t.Fatalf("%d documents", len(docs))
	}
	services, _ := docs[0]["services"].(map[any]any)
	if len(services) != 3 {
		t.Fatalf("%d services, want 3", len(services))
	}
	for _, id := range []string{"rl1", "rl2", "rl3"} {
		svc, _ := services[id].(map[any]any)
		env, _ := svc["environment"].(map[any]any)
		if env["RL_NODE_ID"] != id || env["RL_PEERS"] != "rl1=rl1:7000,rl2=rl2:7000,rl3=rl3:7000" ||
			env["RL_METRICS_ADDR"] != "0.0.0.0:9121" || env["RL_ADVERTISE"] != id+":6379" {
			t.Errorf("service %s environment %v", id, env)
		}
		hc, _ := svc["healthcheck"].(map[any]any)
		if test, _ := hc["test"].([]any); len(test) != 3 || test[2] != "--healthcheck" {
			t.Errorf("service %s healthcheck %v", id, hc)
		}
	}
	checkEnvNames(t, "docker-compose.yml")
}

func TestKubernetesStatefulSet(t *testing.T) {
	docs := yamlDocs(t, "k8s/statefulset.yaml")
	kinds := map[string]map[string]any{}
	for _, d := range docs {
		if d["apiVersion"] == nil || d["kind"] == nil || d["metadata"] == nil {
			t.Errorf("document without apiVersion, kind or metadata: %v", d)
		}
		kinds[d["kind"].(string)+"/"+d["metadata"].(map[any]any)["name"].(string)] = d
	}
	for _, want := range []string{"Service/rlserver-peers", "Service/rlserver", "StatefulSet/rlserver"} {
		if kinds[want] == nil {
			t.Errorf("no %s", want)
		}
	}
	peers := kinds["Service/rlserver-peers"]["spec"].(map[any]any)
	if peers["clusterIP"] != "None" || peers["publishNotReadyAddresses"] != true {
		t.Errorf("the peers Service must be headless and publish unready pods: %v", peers)
	}
	spec := kinds["StatefulSet/rlserver"]["spec"].(map[any]any)
	if spec["replicas"] != 3 || spec["serviceName"] != "rlserver-peers" {
		t.Errorf("StatefulSet spec %v", spec)
	}
	pod := spec["template"].(map[any]any)["spec"].(map[any]any)
	ctr := pod["containers"].([]any)[0].(map[any]any)
	for _, probe := range []string{"livenessProbe", "readinessProbe", "startupProbe"} {
		if ctr[probe] == nil {
			t.Errorf("container has no %s", probe)
		}
	}
	if path := ctr["readinessProbe"].(map[any]any)["httpGet"].(map[any]any)["path"]; path != "/readyz" {
		t.Errorf("readiness probe path %v", path)
	}
	checkEnvNames(t, "k8s/statefulset.yaml")
}

// checkEnvNames checks that every RL_ variable a file sets names a flag.
func checkEnvNames(t *testing.T, path string) {
	t.Helper()
	src, _ := os.ReadFile(path)
	flags := flagNames(t)
	for _, m := range regexp.MustCompile(`\bRL_([A-Z_]+)`).FindAllStringSubmatch(string(src), -1) {
		name := strings.ToLower(strings.ReplaceAll(m[1], "_", "-"))
		if !flags[name] {
			t.Errorf("%s sets RL_%s, but rlserver has no --%s", path, m[1], name)
		}
	}
}

// flagNames runs `go run ./cmd/rlserver --help` once and lists its flags.
var flagCache map[string]bool

func flagNames(t *testing.T) map[string]bool {
	t.Helper()
	if flagCache != nil {
		return flagCache
	}
	bin := filepath.Join(t.TempDir(), "rlserver")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/rlserver").CombinedOutput(); err != nil {
		t.Fatalf("building rlserver: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--help").Output()
	if err != nil {
		t.Fatalf("rlserver --help: %v", err)
	}
	flagCache = map[string]bool{}
	for _, m := range regexp.MustCompile(`(?m)^  -([a-z0-9-]+)`).FindAllStringSubmatch(string(out), -1) {
		flagCache[m[1]] = true
	}
	if !flagCache["metrics-addr"] || !flagCache["addr"] {
		t.Fatalf("no flags found in --help:\n%s", out)
	}
	return flagCache
}

func TestExampleConfigFile(t *testing.T) {
	src, err := os.ReadFile("rlserver.conf")
	if err != nil {
		t.Fatal(err)
	}
	flags := flagNames(t)
	for i, line := range strings.Split(string(src), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		name, _, _ := strings.Cut(line, " ")
		if !flags[name] {
			t.Errorf("rlserver.conf line %d: %q is not a setting", i+1, name)
		}
	}
}

func TestSystemdUnit(t *testing.T) {
	src, err := os.ReadFile("systemd/rlserver.service")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"[Unit]", "[Service]", "[Install]", "ExecStart=/usr/local/bin/rlserver --config /etc/rlserver/rlserver.conf"} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("rlserver.service lacks %q", want)
		}
	}
	analyze, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Fatal("systemd-analyze is not installed (apt-get install systemd); make test installs it")
	}
	// verify insists that the binary exists: point it at one that does.
	dir := t.TempDir()
	unit := filepath.Join(dir, "rlserver.service")
	os.WriteFile(unit, bytes.ReplaceAll(src, []byte("/usr/local/bin/rlserver"), []byte("/bin/true")), 0o644)
	out, err := exec.Command(analyze, "verify", unit).CombinedOutput()
	if err != nil || len(bytes.TrimSpace(out)) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
}

func TestDockerfileHealthcheck(t *testing.T) {
	src, err := os.ReadFile("../Dockerfile")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`HEALTHCHECK`, `"--healthcheck"`, `USER 65532:65532`, `CGO_ENABLED=0`, `RL_METRICS_ADDR=0.0.0.0:9121`} {
		if !bytes.Contains(src, []byte(want)) {
			t.Errorf("Dockerfile lacks %q", want)
		}
	}
}
