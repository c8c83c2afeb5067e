package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestCompareReport runs make bench-compare's driver end to end with tiny
// runs (real redis-server, redis-benchmark, rlserver and the no-work
// server): it must print every row of the table, every target with a
// verdict, and the reference lines. The figures themselves are not
// checked; this machine is shared.
func TestCompareReport(t *testing.T) {
	if _, err := exec.LookPath("redis-server"); err != nil {
		// CI installs it (.ci/run); make test does not, as Debian's
		// package starts a Redis on port 6379, where make run listens.
		if os.Getenv("CI") != "" {
			t.Fatal("redis-server is not installed")
		}
		t.Skip("redis-server is not installed (apt-get install redis-server)")
	}
	dir := t.TempDir()
	bins := map[string]string{}
	for _, pkg := range []string{"compare", "noopserver", "rlserver"} {
		src := "./bench/" + pkg
		if pkg == "rlserver" {
			src = "./cmd/rlserver"
		}
		bins[pkg] = filepath.Join(dir, pkg)
		cmd := exec.Command("go", "build", "-o", bins[pkg], src)
		cmd.Dir = "../.."
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", src, err, out)
		}
	}
	cmd := exec.Command(bins["compare"], "-rlserver", bins["rlserver"], "-noopserver", bins["noopserver"],
		"-script", "../lua/token_bucket.lua", "-seconds", "0.05", "-warm", "2000", "-clients", "4",
		"-keyspace", "1000", "-mem-keys", "5000", "-timeout", "5m")
	cmd.Env = append(cmd.Environ(), "TMPDIR="+dir)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("compare: %v\n%s", err, out)
	}
	report := string(out)
	for _, want := range []string{
		"| PING, -P 1: req/s ", "| RL.ALLOW, random keys, -P 32: p99 ms ", "| RL.ALLOW, one hot key, -P 32: CPU ns/req, server + client ",
		"| memory per key, 5,000 keys: RSS bytes ", "| SAVE: peak RSS over RSS before, bytes per key ",
		"Reference: Redis's native INCRBY", "Same shape on Redis: SMISMEMBER", "Ceiling: a server that does no work",
		"its RL.ALLOW rate is ",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("the report has no %q", want)
		}
	}
	targets := regexp.MustCompile(`(?m)^  \S.*  (met|NOT MET) \((>=|<=) [0-9.]+(x|%| B)\)$`).FindAllString(report, -1)
	if len(targets) != 7 {
		t.Errorf("the report has %d targets with a verdict, want 7:\n%s", len(targets), report)
	}
	if strings.Contains(report, "WARNING") {
		t.Errorf("the report has a warning:\n%s", report)
	}
}
