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
