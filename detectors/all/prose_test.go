package all_test

import (
	"bufio"
	"bytes"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/all"
)

// TestProseReadsExportedFields: a finding says its own sentence from its
// exported fields. The prose of every rule (its Details' Summary,
// Explanation and Next, and every function or method of the rule's
// package they call, transitively) reads no unexported field, of the
// Detail or of anything it points at, and no field of an unexported
// type, so that a consumer of the typed finding can rebuild the sentence. The rule packages are type-checked
// from source against the export data `go list -export` gives for their
// imports.
func TestProseReadsExportedFields(t *testing.T) {
	if testing.Short() {
		t.Skip("type-checks every rule package")
	}
	exports := goListExports(t)
	fset := token.NewFileSet()
	imp := importer.ForCompiler(fset, "gc", func(path string) (io.ReadCloser, error) {
		f, ok := exports[path]
		if !ok || f == "" {
			return nil, os.ErrNotExist
		}
		return os.Open(f)
	})
	total := 0
	for _, a := range all.Analyzers() {
		name := strings.ReplaceAll(a.Name, "-", "")
		hidden := hiddenReads(t, fset, imp, filepath.Join("..", name), "github.com/kfsniff/kfsniff/detectors/"+name)
		total += len(hidden)
		if len(hidden) > 0 {
			t.Errorf("%s: its prose reads %d unexported field(s) or field(s) of unexported type: %s", a.Name, len(hidden), strings.Join(hidden, ", "))
		}
	}
	t.Logf("unexported fields, or fields of unexported type, read by prose, all rules: %d", total)
}

// goListExports maps the import path of every dependency of the rule
// packages to its export data file.
func goListExports(t *testing.T) map[string]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-export", "-deps", "-f", "{{.ImportPath}} {{.Export}}", "../...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -export: %v\n%s", err, stderr.Bytes())
	}
	m := map[string]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, file, _ := strings.Cut(sc.Text(), " ")
		m[path] = file
	}
	return m
}

// hiddenReads type-checks the package in dir and returns the unexported
// fields ("Type.field") read by the code its prose methods reach.
func hiddenReads(t *testing.T, fset *token.FileSet, imp types.Importer, dir, path string) []string {
	t.Helper()
	pkgs, err := parser.ParseDir(fset, dir, func(fi os.FileInfo) bool { return !strings.HasSuffix(fi.Name(), "_test.go") }, 0)
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	for _, p := range pkgs {
		for _, f := range p.Files {
			files = append(files, f)
		}
	}
	info := &types.Info{
		Defs:       map[*ast.Ident]types.Object{},
		Uses:       map[*ast.Ident]types.Object{},
		Selections: map[*ast.SelectorExpr]*types.Selection{},
	}
	if _, err := (&types.Config{Importer: imp}).Check(path, fset, files, info); err != nil {
		t.Fatalf("%s: %v", dir, err)
	}
	decls := map[types.Object]*ast.FuncDecl{}
	var queue []*ast.FuncDecl
	for _, f := range files {
		for _, d := range f.Decls {
			fd, ok := d.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			decls[info.Defs[fd.Name]] = fd
			if fd.Recv != nil && fd.Type.Params.NumFields() == 0 && isProse(fd) {
				queue = append(queue, fd)
			}
		}
	}
	seen := map[*ast.FuncDecl]bool{}
	hidden := map[string]bool{}
	for len(queue) > 0 {
		fd := queue[0]
		queue = queue[1:]
		if seen[fd] {
			continue
		}
		seen[fd] = true
		ast.Inspect(fd.Body, func(n ast.Node) bool {
			switch n := n.(type) {
			case *ast.SelectorExpr:
				if s := info.Selections[n]; s != nil && s.Kind() == types.FieldVal {
					name := types.TypeString(deref(s.Recv()), types.RelativeTo(s.Obj().Pkg())) + "." + s.Obj().Name()
					if !s.Obj().Exported() {
						hidden[name] = true
					} else if u := unexportedType(s.Obj().Type()); u != "" {
						hidden[name+" (of type "+u+")"] = true
					}
				}
			case *ast.Ident:
				if d := decls[info.Uses[n]]; d != nil {
					queue = append(queue, d)
				}
			}
			return true
		})
	}
	out := make([]string, 0, len(hidden))
	for h := range hidden {
		out = append(out, h)
	}
	slices.Sort(out)
	return out
}

// isProse: a method Summary, Explanation or Next returning one string.
func isProse(fd *ast.FuncDecl) bool {
	switch fd.Name.Name {
	case "Summary", "Explanation", "Next":
		return fd.Type.Results.NumFields() == 1
	}
	return false
}

// unexportedType names the unexported named type t is, or holds (through
// pointers, slices, arrays and maps), if any: a consumer outside the
// package cannot name it.
func unexportedType(t types.Type) string {
	switch t := t.(type) {
	case *types.Named:
		if o := t.Obj(); o.Pkg() != nil && !o.Exported() {
			return o.Name()
		}
	case *types.Pointer:
		return unexportedType(t.Elem())
	case *types.Slice:
		return unexportedType(t.Elem())
	case *types.Array:
		return unexportedType(t.Elem())
	case *types.Map:
		if u := unexportedType(t.Key()); u != "" {
			return u
		}
		return unexportedType(t.Elem())
	}
	return ""
}

func deref(t types.Type) types.Type {
	if p, ok := t.(*types.Pointer); ok {
		return p.Elem()
	}
	return t
}
