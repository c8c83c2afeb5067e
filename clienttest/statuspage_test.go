package clienttest

import (
	"context"
	"encoding/json"
	"math"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// The status page, rendered by headless Chromium (Debian's chromium
// package, which .ci/run installs), against real servers: the chart and
// the tables must show the numbers the traffic produced.

// chromium returns the browser's path, skipping the test when it is not
// installed (CI installs it).
func chromium(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Fatal("chromium is not installed (apt-get install chromium); make test installs it")
	return ""
}

// renderDOM loads url in headless Chromium, lets the page run for a few
// seconds of virtual time (its fetches complete meanwhile) and returns the
// DOM as serialized then.
func renderDOM(t *testing.T, browser, url string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
		"--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--disable-dev-shm-usage", "--user-data-dir="+t.TempDir(), "--virtual-time-budget=5000", "--dump-dom", url)
	var stderr syncBuffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("chromium: %v\n%s", err, stderr.String())
	}
	return string(out)
}

// pageStatus is the part of /api/status the tests read.
type pageStatus struct {
	Totals struct {
		Allowed, Denied int64
	}
	Series []struct {
		T               int64
		Allowed, Denied float64
	}
	Top []struct {
		Key    string
		Denied float64
	}
	Cluster *struct {
		NodeID   string `json:"node_id"`
		LeaderID string `json:"leader_id"`
		Members  []struct {
			ID      string
			Leader  bool
			Applied *uint64 `json:"applied_index"`
		}
	}
}

func apiStatus(t *testing.T, base string) pageStatus {
	t.Helper()
	code, body := httpGet(t, base+"/api/status")
	if code != 200 {
		t.Fatalf("/api/status: HTTP %d %s", code, body)
	}
	var st pageStatus
	if err := json.Unmarshal([]byte(body), &st); err != nil {
		t.Fatalf("/api/status: %v\n%s", err, body)
	}
	return st
}

// attr returns the value of attribute name in the first tag of dom that
// has id="id".
func attr(dom, id, name string) string {
	re := regexp.MustCompile(`<[^>]*\bid="` + regexp.QuoteMeta(id) + `"[^>]*>`)
	tag := re.FindString(dom)
	m := regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `="([^"]*)"`).FindStringSubmatch(tag)
	if m == nil {
		return ""
	}
	return m[1]
}

// text returns the text of the element with id="id" (no nested tags).
func text(dom, id string) string {
	m := regexp.MustCompile(`id="` + regexp.QuoteMeta(id) + `"[^>]*>([^<]*)<`).FindStringSubmatch(dom)
	if m == nil {
		return ""
	}
	return m[1]
}

func TestStatusPageChromium(t *testing.T) {
	browser := chromium(t)
	s, base := startWithMetrics(t, opts{})
	c := newGoRedis(t, s, nil)
	ctx := context.Background()

	// Traffic over a few seconds, so the one-second series has several
	// points: each round 20 allowed on fresh keys and 10 denied on a hot
	// key (cost 2 > capacity 1 is always denied).
	var allowed, denied int64
	began := time.Now()
	round := 0
	deadline := time.Now().Add(30 * time.Second)
	for {
		pipe := c.Pipeline()
		for i := range 20 {
			pipe.Do(ctx, "RL.ALLOW", "page:"+strconv.Itoa(round)+":"+strconv.Itoa(i), 5, slowRate)
		}
		for range 10 {
			pipe.Do(ctx, "RL.ALLOW", "hot:page", 1, 1, 2)
		}
		cmds, err := pipe.Exec(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, cmd := range cmds {
			if r, _ := cmd.(interface{ Slice() ([]any, error) }).Slice(); len(r) == 4 && r[0] == int64(1) {
				allowed++
			} else {
				denied++
			}
		}
		round++
		st := apiStatus(t, base)
		busy := 0
		for _, p := range st.Series {
			if p.Allowed > 0 && p.Denied > 0 {
				busy++
			}
		}
		if busy >= 3 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the series has %d busy points after 30 s: %+v", busy, st.Series)
		}
		time.Sleep(50 * time.Millisecond)
	}

	dom := renderDOM(t, browser, base+"/")
	if attr(dom, "line-denied", "data-count") == "" {
		t.Fatalf("no chart in the rendered page:\n%s", dom)
	}
	if n, _ := strconv.Atoi(attr(dom, "line-denied", "data-count")); n < 3 {
		t.Errorf("chart has %d points, want at least 3", n)
	}
	for _, line := range []string{"line-allowed", "line-denied"} {
		if peak, _ := strconv.Atoi(attr(dom, line, "data-max")); peak <= 0 {
			t.Errorf("%s peaks at %q, want a positive rate", line, attr(dom, line, "data-max"))
		}
		if pts := strings.Fields(attr(dom, line, "points")); len(pts) < 3 {
			t.Errorf("%s has points %q", line, attr(dom, line, "points"))
		}
	}
	// No traffic since the loop: the totals on the page are exact.
	if got := text(dom, "total-allowed"); got != strconv.FormatInt(allowed, 10) {
		t.Errorf("page shows %q allowed, want %d", got, allowed)
	}
	if got := text(dom, "total-denied"); got != strconv.FormatInt(denied, 10) {
		t.Errorf("page shows %q denied, want %d", got, denied)
	}
	row := regexp.MustCompile(`<tr class="top-row"><td class="key">([^<]*)</td><td class="num">(\d+)</td></tr>`).FindStringSubmatch(dom)
	if row == nil || row[1] != "hot:page" {
		t.Fatalf("top table's first row = %v, want hot:page\n%s", row, dom)
	}
	// Counts decay with a one-minute half-life: the oldest denial weighs
	// at least 2^(-elapsed/60s).
	lo := float64(denied)*math.Exp2(-time.Since(began).Minutes()) - 1
	if n, _ := strconv.ParseFloat(row[2], 64); n < lo || n > float64(denied) {
		t.Errorf("top table: hot:page has %s denials, want between %.0f and %d", row[2], lo, denied)
	}
	if !strings.Contains(dom, `data-loaded="1"`) || !strings.Contains(dom, `class="state ok"`) {
		t.Errorf("page did not load its data")
	}
	if !strings.Contains(dom, `id="cluster-section" hidden`) {
		t.Errorf("cluster section shown on a standalone server")
	}
}

// metricsAddrOf finds the metrics address a node logged (--metrics-addr
// 127.0.0.1:0 takes any free port).
func metricsAddrOf(t *testing.T, n *cnode) string {
	t.Helper()
	re := regexp.MustCompile(`msg=listening what="metrics, status page, health" addr=(\S+)`)
	var addr string
	waitFor(t, "node "+n.id+"'s metrics address in its log", func() bool {
		m := re.FindStringSubmatch(n.srv.stderr.String())
		if m != nil {
			addr = m[1]
		}
		return m != nil
	})
	return "http://" + addr
}

func TestClusterMetricsAndStatusPage(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a three-node cluster")
	}
	c := startCluster(t, binary(), "--metrics-addr", "127.0.0.1:0", "--log-level", "info")
	client := clusterClient(t, c.nodes[0].respAddr)
	ctx := context.Background()
	// 20 keys, each allowed once; an election under load may refuse or
	// leave a command's outcome unknown: retry until it is answered (the
	// key still allows: capacity 5).
	for i := range 20 {
		waitFor(t, "an answer to RL.ALLOW", func() bool {
			return client.Do(ctx, "RL.ALLOW", "c:"+strconv.Itoa(i), 5, slowRate).Err() == nil
		})
	}
	leaders := 0
	changes := 0.0
	for _, n := range c.nodes {
		base := metricsAddrOf(t, n)
		var fams = scrape(t, base)
		// Followers apply asynchronously: wait until this one has all 20
		// keys (the applied index alone also counts configuration entries).
		waitFor(t, "node "+n.id+" to apply the writes", func() bool {
			fams = scrape(t, base)
			v, _ := metricValue(fams, "rlserver_raft_applied_index")
			commit, _ := metricValue(fams, "rlserver_raft_commit_index")
			keys, _ := metricValue(fams, "rlserver_keys", "kind", "gcra")
			return v >= 20 && v == commit && keys == 20
		})
		if v, _ := metricValue(fams, "rlserver_raft_state", "state", "leader"); v == 1 {
			leaders++
		}
		wantMetric(t, fams, 1, "rlserver_raft_has_leader")
		wantMetric(t, fams, 3, "rlserver_raft_peers")
		wantMetric(t, fams, 0, "rlserver_raft_apply_lag")
		wantMetric(t, fams, 20, "rlserver_keys", "kind", "gcra")
		v, ok := metricValue(fams, "rlserver_raft_leader_changes_total")
		if !ok {
			t.Errorf("node %s: no rlserver_raft_leader_changes_total", n.id)
		}
		changes += v
		if v, _ := metricValue(fams, "rlserver_raft_term"); v < 1 {
			t.Errorf("node %s term %v", n.id, v)
		}
		if code, _ := httpGet(t, base+"/readyz"); code != 200 {
			t.Errorf("node %s /readyz = %d with a leader", n.id, code)
		}
	}
	if changes < 1 {
		t.Errorf("no node counted a leader change; the first election is one")
	}
	if leaders != 1 {
		t.Fatalf("%d nodes report raft_state{state=leader} 1, want 1", leaders)
	}
	// Decisions are counted where clients sent them: all 20 at node n1.
	wantMetric(t, scrape(t, metricsAddrOf(t, c.nodes[0])), 20, "rlserver_commands_total", "command", "rl.allow", "outcome", "allowed")

	// Every member's applied index, as node n2 sees them (it asks the
	// others; under load an election may intervene, so poll).
	base2 := metricsAddrOf(t, c.nodes[1])
	var st pageStatus
	waitFor(t, "n2's status page to show three members with their applied indexes", func() bool {
		st = apiStatus(t, base2)
		if st.Cluster == nil || len(st.Cluster.Members) != 3 || st.Cluster.LeaderID == "" {
			return false
		}
		for _, m := range st.Cluster.Members {
			if m.Applied == nil || *m.Applied < 20 {
				return false
			}
		}
		return true
	})

	browser := chromium(t)
	dom := renderDOM(t, browser, base2+"/")
	summary := text(dom, "cluster-summary")
	m := regexp.MustCompile(`leader: (n\d)`).FindStringSubmatch(summary)
	if m == nil {
		t.Fatalf("cluster summary %q names no leader", summary)
	}
	leader := m[1]
	rows := regexp.MustCompile(`<tr class="member( leader)?" data-id="(n\d)"><td>[^<]*</td><td>(\w+)</td><td class="num applied">(\d+)</td>`).FindAllStringSubmatch(dom, -1)
	if len(rows) != 3 {
		t.Fatalf("members table has %d rows with applied indexes, want 3:\n%s", len(rows), dom)
	}
	leaderRows := 0
	for _, r := range rows {
		if r[1] != "" {
			leaderRows++
			if r[2] != leader || r[3] != "leader" {
				t.Errorf("leader row %v, want %s as the summary says", r[1:], leader)
			}
		}
		if n, _ := strconv.Atoi(r[4]); n < 20 {
			t.Errorf("member %s shows applied index %d", r[2], n)
		}
	}
	if leaderRows != 1 {
		t.Errorf("%d leader rows, want 1", leaderRows)
	}
	if !strings.HasPrefix(summary, "this node: n2 (") {
		t.Errorf("cluster summary %q", summary)
	}
}
