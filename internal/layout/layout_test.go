package layout

import (
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/rlserver/rlserver/"

// allowed lists, for the packages whose job depends on what they do not
// see, every rlserver package they may import. A package not listed here
// is not checked.
var allowed = map[string][]string{
	"resp":            {},
	"status":          {},
	"engine":          {"internal/offheap", "values"},
	"values":          {},
	"kv":              {"engine", "values"},
	"policy":          {"engine"},
	"persist":         {"engine", "internal/offheap"},
	"acl":             {"internal/conf"},
	"internal/conf":   {},
	"memlimit":        {"engine"},
	"standalone":      {"engine", "policy"},
	"cluster":         {"engine", "kv", "persist", "policy", "raftlog", "slots", "status"},
	"groups":          {"cluster", "engine", "policy", "slots", "status"},
	"slots":           {},
	"metrics":         {"engine", "internal/offheap", "memlimit", "policy", "status"},
	"statuspage":      {"status"},
	"script":          {},
	"raftlog":         {},
	"internal/sysmon": {},
}

// TestImportRules: the wire protocol and the status values are leaves, the
// backends import no edge package (server, resp), and metrics and the
// status page read through interfaces of their own rather than the server.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-f", "{{.ImportPath}} {{join .Imports \" \"}}", module+"...").CombinedOutput()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, out)
	}
	seen := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		fields := strings.Fields(line)
		pkg, ok := strings.CutPrefix(fields[0], module)
		if !ok {
			continue
		}
		may, checked := allowed[pkg]
		if !checked {
			continue
		}
		seen++
		for _, imp := range fields[1:] {
			dep, ours := strings.CutPrefix(imp, module)
			if !ours {
				continue
			}
			ok := false
			for _, m := range may {
				ok = ok || m == dep
			}
			if !ok {
				t.Errorf("%s imports %s, which its job does not allow (allowed: %v)", pkg, dep, may)
			}
		}
	}
	if seen != len(allowed) {
		t.Fatalf("checked %d packages, want %d: a package in the rules is missing", seen, len(allowed))
	}
}
