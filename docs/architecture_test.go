// Package docs holds the checks that keep the repository's documents
// true: ARCHITECTURE.md's file map names every file of the binary once,
// one line each, and names nothing that does not exist.
package docs

import (
	"bufio"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// A file map line: "- `path`: what it is".
var mapLine = regexp.MustCompile("^- `([^`]+)`: (.+)$")

// maxLine is the longest a file map line may run: one line says what a
// file is; the code says the rest.
const maxLine = 220

// Directories whose packages are listed whole (they are not in the
// binary; their READMEs say more).
var listedWhole = []string{"bench/", "fixtures/", "detectors/detectortest/"}

func TestArchitectureNamesEveryFile(t *testing.T) {
	root := ".."
	named := map[string]int{}
	f, err := os.Open(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if strings.HasPrefix(line, "| ") && strings.Count(line, "|") > 2 && len(line) > maxLine {
			t.Errorf("ARCHITECTURE.md:%d: a table row of %d characters (at most %d)", n, len(line), maxLine)
		}
		m := mapLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if len(line) > maxLine {
			t.Errorf("ARCHITECTURE.md:%d: %d characters (at most %d): %.60s…", n, len(line), maxLine, line)
		}
		p := m[1]
		if prev, ok := named[p]; ok {
			t.Errorf("ARCHITECTURE.md:%d: %s named again (first on line %d)", n, p, prev)
		}
		named[p] = n
		if _, err := os.Stat(filepath.Join(root, strings.TrimSuffix(p, "/"))); err != nil {
			t.Errorf("ARCHITECTURE.md:%d: %s does not exist", n, p)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(named) == 0 {
		t.Fatal("ARCHITECTURE.md has no file map lines (- `path`: what it is)")
	}
	err = filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			// Other modules, worktrees and generated output are not ours.
			if rel != "." && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
				return filepath.SkipDir
			}
			if rel == "fixtures/clients" || rel == "fixtures/kafka/lib" || rel == "bench/out" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(rel, ".go") || strings.HasSuffix(rel, "_test.go") {
			return nil
		}
		if _, ok := named[rel]; ok {
			return nil
		}
		for _, w := range listedWhole {
			if strings.HasPrefix(rel, w) {
				if _, ok := named[filepath.ToSlash(filepath.Dir(rel))+"/"]; ok {
					return nil
				}
				t.Errorf("ARCHITECTURE.md does not name %s/ (the package of %s)", filepath.Dir(rel), rel)
				return nil
			}
		}
		t.Errorf("ARCHITECTURE.md does not name %s", rel)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
