package layout

import (
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
)

// TestServerDeclaresCapabilities: the edge never discovers what its
// backend can do by type assertion (issue 31: about ten places did), nor
// does the command layer it hands the capabilities to. A capability is a
// field of server.Config that cmd/rlserver fills, with compile-time
// assertions beside it (cmd/rlserver/capabilities.go), passed on to
// command.Env. The test fails on a type assertion or type switch in
// server's or command's code (not their tests) on an expression naming a
// backend, or to one of the interfaces the package declares (Cluster,
// SlotRouter, Persistence...), whatever the operand.
func TestServerDeclaresCapabilities(t *testing.T) {
	for dir, sure := range map[string][2]string{"server": {"Backend", "SlotRouter"}, "command": {"Keyspace", "Slots"}} {
		checkNoDiscovery(t, dir, sure)
	}
}

// checkNoDiscovery runs TestServerDeclaresCapabilities on one package,
// which must declare the interfaces named sure (a check that the test
// reads the right folder).
func checkNoDiscovery(t *testing.T, pkg string, sure [2]string) {
	dir := filepath.Join(moduleRoot(t), pkg)
	files, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	var parsed []*ast.File
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") {
			continue
		}
		af, err := parser.ParseFile(fset, f, nil, parser.SkipObjectResolution)
		if err != nil {
			t.Fatal(err)
		}
		parsed = append(parsed, af)
	}
	if len(parsed) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	// The interfaces the package declares: what it needs from others.
	own := map[string]bool{}
	for _, af := range parsed {
		for _, d := range af.Decls {
			if gd, ok := d.(*ast.GenDecl); ok && gd.Tok == token.TYPE {
				for _, s := range gd.Specs {
					if ts := s.(*ast.TypeSpec); isInterface(ts.Type) {
						own[ts.Name.Name] = true
					}
				}
			}
		}
	}
	if !own[sure[0]] || !own[sure[1]] {
		t.Fatalf("found %s's interfaces %v, missing %s or %s: is the test reading the right folder?", pkg, own, sure[0], sure[1])
	}
	bad := func(n ast.Node, why string) {
		t.Errorf("%s: %s: declare the capability in server.Config (cmd/rlserver fills it) instead", fset.Position(n.Pos()), why)
	}
	for _, af := range parsed {
		ast.Inspect(af, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.TypeAssertExpr:
				switch {
				case namesBackend(n.X):
					bad(n, "type assertion on the backend")
				case n.Type != nil && own[typeName(n.Type)]:
					bad(n, "type assertion to "+pkg+"'s own interface "+typeName(n.Type))
				}
			case *ast.CaseClause:
				for _, e := range n.List {
					if own[typeName(e)] {
						bad(e, "type switch case on "+pkg+"'s own interface "+typeName(e))
					}
				}
			}
			return true
		})
	}
}

func isInterface(e ast.Expr) bool {
	_, ok := e.(*ast.InterfaceType)
	return ok
}

// typeName is the name of a type expression written as a plain or pointer
// identifier; "" otherwise.
func typeName(e ast.Expr) string {
	if s, ok := e.(*ast.StarExpr); ok {
		e = s.X
	}
	if id, ok := e.(*ast.Ident); ok {
		return id.Name
	}
	return ""
}

// namesBackend reports whether e mentions an identifier or field whose
// name contains "backend" (s.backend, backend, sc.s.backend).
func namesBackend(e ast.Expr) bool {
	found := false
	ast.Inspect(e, func(n ast.Node) bool {
		if id, ok := n.(*ast.Ident); ok && strings.Contains(strings.ToLower(id.Name), "backend") {
			found = true
		}
		return !found
	})
	return found
}
