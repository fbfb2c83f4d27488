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
		ast.Inspect(f, func(n ast.Node) bool {
			s, ok := n.(*ast.TypeSpec)
			if !ok {
				return true
			}
			types++
			if n := s.Name; n.Name == "Client" || n.Name == "Partition" {
				t.Errorf("%s: type %s: the tree's %s is cluster.%s; name this type after what it is", fset.Position(n.Pos()), n.Name, strings.ToLower(n.Name), n.Name)
			}
			if st, ok := s.Type.(*ast.StructType); ok {
				if what := ownNoun(st); what != "" {
					t.Errorf("%s: type %s holds a %s in fields of its own: hold a cluster.%s", fset.Position(s.Name.Pos()), s.Name.Name, strings.ToLower(what), what)
				}
			}
			return true
		})
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

// ownNoun is "Partition" or "Client" if st spells one in unexported
// fields of its own, else "".
func ownNoun(st *ast.StructType) string {
	var topic, num, host, id bool
	for _, f := range st.Fields.List {
		typ := typeString(f.Type)
		for _, n := range f.Names {
			if ast.IsExported(n.Name) {
				continue
			}
			l := strings.ToLower(n.Name)
			switch {
			case strings.Contains(l, "topic") && (typ == "string" || typ == "[16]byte"):
				topic = true
			case (l == "partition" || l == "part" || l == "num") && typ == "int32":
				num = true
			case l == "host" && typ == "netip.Addr":
				host = true
			case (l == "id" || l == "client" || l == "clientid") && typ == "string":
				id = true
			}
		}
	}
	switch {
	case topic && num:
		return "Partition"
	case host && id:
		return "Client"
	}
	return ""
}

// typeString is a field's type as written, for the few shapes ownNoun
// looks for ("" for others).
func typeString(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.Ident:
		return t.Name
	case *ast.SelectorExpr:
		if x, ok := t.X.(*ast.Ident); ok {
			return x.Name + "." + t.Sel.Name
		}
	case *ast.ArrayType:
		if l, ok := t.Len.(*ast.BasicLit); ok {
			return "[" + l.Value + "]" + typeString(t.Elt)
		}
	}
	return ""
}
