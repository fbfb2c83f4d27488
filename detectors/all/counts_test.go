package all_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/all"
)

// TestRulesTypeTheirCounts: no rule writes a finding's Counts by hand;
// its Detail's fields tagged count:"name" are its counts (CountsOf), so
// that the prose and the JSON read the same typed numbers.
func TestRulesTypeTheirCounts(t *testing.T) {
	for _, a := range all.Analyzers() {
		dir := filepath.Join("..", strings.ReplaceAll(a.Name, "-", ""))
		fs := token.NewFileSet()
		pkgs, err := parser.ParseDir(fs, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					if kv, ok := n.(*ast.KeyValueExpr); ok {
						if k, ok := kv.Key.(*ast.Ident); ok && k.Name == "Counts" {
							t.Errorf("%s: %s sets Counts by hand; tag its Detail's fields count:\"name\" instead",
								a.Name, fs.Position(kv.Pos()))
						}
					}
					return true
				})
			}
		}
	}
}

// TestRuleTestsWantTypedFindings: a rule's tests say what its findings
// must show with its own finding type (dt.Want.Detail), not with maps
// keyed by JSON names: no Counts or Fields map literal in a rule's tests.
func TestRuleTestsWantTypedFindings(t *testing.T) {
	n := 0
	for _, a := range all.Analyzers() {
		dir := filepath.Join("..", strings.ReplaceAll(a.Name, "-", ""))
		fs := token.NewFileSet()
		pkgs, err := parser.ParseDir(fs, dir, func(fi os.FileInfo) bool { return strings.HasSuffix(fi.Name(), "_test.go") }, 0)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pkgs {
			for _, f := range p.Files {
				ast.Inspect(f, func(n ast.Node) bool {
					switch n := n.(type) {
					case *ast.KeyValueExpr:
						if k, ok := n.Key.(*ast.Ident); ok && isMap(n.Value) && (k.Name == "Counts" || k.Name == "Fields") {
							t.Errorf("%s: %s wants %s as a map; give the rule's finding in Want.Detail", a.Name, fs.Position(n.Pos()), k.Name)
						}
					case *ast.AssignStmt:
						for i, l := range n.Lhs {
							if s, ok := l.(*ast.SelectorExpr); ok && i < len(n.Rhs) && isMap(n.Rhs[i]) &&
								(s.Sel.Name == "Counts" || s.Sel.Name == "Fields") {
								t.Errorf("%s: %s sets %s to a map; give the rule's finding in Want.Detail", a.Name, fs.Position(n.Pos()), s.Sel.Name)
							}
						}
					}
					return true
				})
			}
		}
		n++
	}
	if n == 0 {
		t.Fatal("no rule")
	}
}

func isMap(e ast.Expr) bool {
	cl, ok := e.(*ast.CompositeLit)
	if !ok {
		return false
	}
	_, ok = cl.Type.(*ast.MapType)
	return ok
}
