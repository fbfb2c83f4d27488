package cluster_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestOneClientOnePartition: cluster.Client and cluster.Partition are the
// tree's only types of those names, so that no package grows a client or a
// partition of its own that keys state its own way. Every non-test Go file
// of the module (but fixtures/ and testdata/, which are not packages of
// the binary or its tests) is parsed for type declarations. A row that
// carries a partition in a finding or a report names what it is instead
// (notenoughreplicas.PartitionRefusals, report.ClientEntry).
func TestOneClientOnePartition(t *testing.T) {
	fset := token.NewFileSet()
	files, types := 0, 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); path != ".." && (n == "fixtures" || n == "testdata" || strings.HasPrefix(n, ".")) {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		files++
		if filepath.Dir(path) == filepath.Join("..", "cluster") {
			return nil
		}
		for _, decl := range f.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, s := range g.Specs {
				types++
				if n := s.(*ast.TypeSpec).Name; n.Name == "Client" || n.Name == "Partition" {
					t.Errorf("%s: type %s: the tree's %s is cluster.%s; name this type after what it is", fset.Position(n.Pos()), n.Name, strings.ToLower(n.Name), n.Name)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 200 {
		t.Fatalf("parsed %d files: the walk is not reaching the module", files)
	}
	t.Logf("%d files, %d type declarations outside cluster", files, types)
}
