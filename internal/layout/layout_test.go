package layout

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

const module = "github.com/rlserver/rlserver/"

// allowed lists, for every package of the module, every rlserver package it
// may import: its job is also what it does not see. The leaves (the wire,
// the status values, the data values, slots, the log store, the Lua
// sandbox) import nothing of rlserver's; the engine sits on the values;
// the command families and policies on the engine; the backends import no
// edge package (server, resp); server, the edge, imports no backend; only
// cmd/rlserver sees them all. A package of the module missing here, or an
// import not listed, fails TestImportRules; tests may import more (an
// external test package sits above its package).
var allowed = map[string][]string{
	// Leaves.
	"resp":             {},
	"status":           {},
	"values":           {},
	"slots":            {},
	"raftlog":          {},
	"script":           {},
	"internal/conf":    {},
	"internal/offheap": {},
	"internal/sysmon":  {},
	// The state machine and what runs on it.
	"engine":   {"internal/offheap", "values"},
	"kv":       {"engine", "values"},
	"policy":   {"engine"},
	"persist":  {"engine", "internal/offheap"},
	"memlimit": {"engine"},
	"acl":      {"internal/conf"},
	// The backends.
	"standalone": {"engine", "policy"},
	"cluster":    {"cluster/entry", "cluster/internal/codec", "cluster/ownership", "engine", "kv", "persist", "policy", "raftlog", "slots", "status"},
	"groups":     {"cluster", "cluster/ownership", "engine", "policy", "slots", "status"},
	// A replica's parts: the log entry codec, and slot ownership (the
	// slot directory, the slot-move state), below the replica and above
	// the engine; neither knows Raft.
	"cluster/entry":          {"cluster/internal/codec", "cluster/ownership", "engine", "kv", "policy"},
	"cluster/ownership":      {"cluster/internal/codec", "engine", "slots"},
	"cluster/internal/codec": {"engine"},
	// Readers of the status values, through interfaces of their own.
	"metrics":    {"engine", "internal/offheap", "memlimit", "policy", "status"},
	"statuspage": {"status"},
	// What each command means: above the state machine, below the edge;
	// no backend, no connection.
	"command": {"acl", "engine", "kv", "policy", "resp", "script", "slots", "status", "values"},
	// The edge: no backend, which cmd/rlserver hands it.
	"server": {"acl", "command", "engine", "internal/offheap", "kv", "memlimit", "policy", "resp", "script", "slots", "status"},
	// The wiring.
	"cmd/rlserver": {"acl", "cluster", "command", "engine", "groups", "internal/conf", "internal/sysmon", "memlimit", "metrics", "persist", "policy", "raftlog", "resp", "server", "standalone", "status", "statuspage"},
	// The Go client: it speaks RESP through go-redis, not through resp.
	"client":                 {"slots"},
	"client/httplimit":       {"client"},
	"client/internal/rltest": {"internal/testport"},
	"examples/httpapi":       {"client", "client/httplimit"},
	// Tests and their helpers.
	"clienttest":        {"internal/testport"},
	"deploy":            {},
	"internal/layout":   {},
	"internal/testfs":   {},
	"internal/testport": {},
	// Benchmarks: no edge package; they drive a built server over TCP.
	"bench/internal/benchproc":   {},
	"bench/internal/respio":      {},
	"bench/internal/clusterload": {"slots"},
	"bench/checkbench":           {"bench/internal/benchproc", "engine"},
	"bench/compare":              {"bench/internal/benchproc", "bench/internal/respio"},
	"bench/kvcompare":            {"bench/internal/benchproc", "bench/internal/respio"},
	"bench/loadgen":              {},
	"bench/memkeys":              {"engine"},
	"bench/moves":                {"bench/internal/benchproc", "bench/internal/clusterload", "slots"},
	"bench/scaleout":             {"bench/internal/benchproc", "bench/internal/clusterload", "cluster/ownership", "slots"},
	"bench/noopserver":           {"internal/sysmon"},
	"bench/persist":              {"engine", "persist"},
}

// packages lists the module's packages with their rlserver imports (not
// their tests').
func packages(t *testing.T) map[string][]string {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	pkgs := map[string][]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		pkgs[pkg] = []string{}
		for _, imp := range fields[1:] {
			if dep, ours := strings.CutPrefix(imp, module); ours {
				pkgs[pkg] = append(pkgs[pkg], dep)
			}
		}
	}
	return pkgs
}

// TestImportRules: every package of the module has rules, and imports only
// what they allow.
func TestImportRules(t *testing.T) {
	pkgs := packages(t)
	for pkg, imports := range pkgs {
		may, ok := allowed[pkg]
		if !ok {
			t.Errorf("package %s has no import rules: add it to allowed (internal/layout/layout_test.go) and to the code map in README.md", pkg)
			continue
		}
		for _, dep := range imports {
			if !slices.Contains(may, dep) {
				t.Errorf("%s imports %s, which its job does not allow (allowed: %v)", pkg, dep, may)
			}
		}
	}
	for pkg := range allowed {
		if _, ok := pkgs[pkg]; !ok {
			t.Errorf("the import rules name %s, which is not a package of the module", pkg)
		}
	}
}

// codeMap returns the paths in the first column of README.md's code map,
// without their trailing slash.
func codeMap(t *testing.T) []string {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, table, ok := strings.Cut(string(b), "\n| path | job |\n| --- | --- |\n")
	if !ok {
		t.Fatal("README.md has no code map (a table with the header | path | job |)")
	}
	if end := strings.Index(table, "\n\n"); end >= 0 {
		table = table[:end]
	}
	var paths []string
	cell := regexp.MustCompile("`([^`]+)`")
	for _, row := range strings.Split(table, "\n") {
		first, _, _ := strings.Cut(strings.TrimPrefix(row, "| "), " |")
		for _, m := range cell.FindAllStringSubmatch(first, -1) {
			paths = append(paths, strings.TrimSuffix(m[1], "/"))
		}
	}
	if len(paths) == 0 {
		t.Fatal("README.md's code map names no path")
	}
	return paths
}

// TestCodeMap: README.md's code map and the import rules agree. Every
// package has a line of its own, or lies under a line naming a folder that
// is no package itself (bench/, examples/); every line names a folder that
// exists.
func TestCodeMap(t *testing.T) {
	pkgs := packages(t)
	rows := codeMap(t)
	for _, row := range rows {
		if fi, err := os.Stat(filepath.Join(moduleRoot(t), row)); err != nil || !fi.IsDir() {
			t.Errorf("README.md's code map names %s/, which is not a folder", row)
		}
	}
	for pkg := range pkgs {
		named := false
		for _, row := range rows {
			_, rowIsPkg := pkgs[row]
			named = named || row == pkg || !rowIsPkg && strings.HasPrefix(pkg, row+"/")
		}
		if !named {
			t.Errorf("package %s has no line in README.md's code map", pkg)
		}
	}
}
