package all_test

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoErrorCodeLiterals: a rule names a Kafka error code by its name in
// cluster (cluster.NotLeaderOrFollower), never by its number, so that a
// reader sees which error a rule reacts to and a search for the name finds
// every rule that does. Every non-test Go file under detectors/ (but
// detectortest, the rules' test harness) is parsed; an integer literal
// other than 0 fails the test where it is a case of a switch on an error
// code, or an operand of == or != whose other side is an error code. An
// expression is an error code when its identifier, selector or called
// function is named with "Code", "code" or "Err" (pt.ErrorCode,
// commitCode(ts), x.Err), or it converts one (int16(pt.ErrorCode)).
// 0 stays: it is "no error" in every API, and cluster.None reads no better.
func TestNoErrorCodeLiterals(t *testing.T) {
	fset := token.NewFileSet()
	var bad []string
	files, sites := 0, 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if d.Name() == "detectortest" || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		files++
		b, n := codeLiterals(fset, f)
		bad = append(bad, b...)
		sites += n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 30 || sites < 30 {
		t.Fatalf("walked %d files under detectors/ and found %d uses of error codes: the walk is not reaching the rules", files, sites)
	}
	for _, b := range bad {
		t.Errorf("%s: an error code as a literal; name it from cluster (cluster/errors.go, under Kafka's name)", b)
	}
	t.Logf("%d files, %d switches on or comparisons with an error code, %d literals among them", files, sites, len(bad))
}

// codeLiterals returns the position and text of each non-zero integer
// literal f uses as an error code, and the number of switches on and
// comparisons with an error code it holds.
func codeLiterals(fset *token.FileSet, f *ast.File) ([]string, int) {
	var bad []string
	sites := 0
	report := func(e ast.Expr, ctx string) {
		if lit, ok := nonZeroInt(e); ok {
			bad = append(bad, fset.Position(e.Pos()).String()+": "+lit+" "+ctx)
		}
	}
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.SwitchStmt:
			if n.Tag == nil || !isCodeExpr(n.Tag) {
				return true
			}
			sites++
			for _, s := range n.Body.List {
				for _, e := range s.(*ast.CaseClause).List {
					report(e, "in a case of a switch on "+exprName(n.Tag))
				}
			}
		case *ast.BinaryExpr:
			if n.Op != token.EQL && n.Op != token.NEQ {
				return true
			}
			if isCodeExpr(n.X) || isCodeExpr(n.Y) {
				sites++
			}
			if isCodeExpr(n.X) {
				report(n.Y, "compared with "+exprName(n.X))
			}
			if isCodeExpr(n.Y) {
				report(n.X, "compared with "+exprName(n.Y))
			}
		}
		return true
	})
	return bad, sites
}

// nonZeroInt reports an integer literal other than 0, signed or in
// parentheses, as the source spells it.
func nonZeroInt(e ast.Expr) (string, bool) {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return nonZeroInt(e.X)
	case *ast.UnaryExpr:
		if e.Op == token.SUB || e.Op == token.ADD {
			s, ok := nonZeroInt(e.X)
			return e.Op.String() + s, ok
		}
	case *ast.BasicLit:
		if e.Kind == token.INT && strings.Trim(e.Value, "0xXoObB_") != "" {
			return e.Value, true
		}
	}
	return "", false
}

// isCodeExpr reports whether e names an error code.
func isCodeExpr(e ast.Expr) bool {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return isCodeExpr(e.X)
	case *ast.Ident:
		return codeName(e.Name)
	case *ast.SelectorExpr:
		return codeName(e.Sel.Name)
	case *ast.IndexExpr:
		return isCodeExpr(e.X)
	case *ast.CallExpr:
		if isCodeExpr(e.Fun) {
			return true
		}
		// A conversion: int16(pt.ErrorCode).
		if id, ok := e.Fun.(*ast.Ident); ok && len(e.Args) == 1 && intType[id.Name] {
			return isCodeExpr(e.Args[0])
		}
	}
	return false
}

var intType = map[string]bool{"int": true, "int8": true, "int16": true, "int32": true, "int64": true, "uint16": true, "uint32": true}

func codeName(s string) bool {
	return strings.Contains(s, "Code") || strings.Contains(s, "code") || strings.Contains(s, "Err")
}

func exprName(e ast.Expr) string {
	switch e := e.(type) {
	case *ast.ParenExpr:
		return exprName(e.X)
	case *ast.Ident:
		return e.Name
	case *ast.SelectorExpr:
		return exprName(e.X) + "." + e.Sel.Name
	case *ast.IndexExpr:
		return exprName(e.X) + "[...]"
	case *ast.CallExpr:
		return exprName(e.Fun) + "(...)"
	}
	return "an expression"
}
