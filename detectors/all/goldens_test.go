package all_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/detectors/all"
)

// TestEveryRuleHasGoldens: every rule's package (its id without dashes)
// holds goldens of its findings, JSON and prose, per test case
// (detectortest.Golden, written by its tests' -update), so that a changed
// sentence or field of any rule fails its own test, not only a capture's.
func TestEveryRuleHasGoldens(t *testing.T) {
	for _, a := range all.Analyzers() {
		dir := filepath.Join("..", strings.ReplaceAll(a.Name, "-", ""), "testdata")
		var jsons, texts int
		err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			base, ext := strings.TrimSuffix(path, filepath.Ext(path)), filepath.Ext(path)
			other := map[string]string{".json": ".txt", ".txt": ".json"}[ext]
			if other == "" {
				return nil
			}
			if _, err := os.Stat(base + other); err != nil {
				t.Errorf("%s: %s has no %s beside it", a.Name, path, other)
			}
			if ext == ".json" {
				jsons++
			} else {
				texts++
			}
			return nil
		})
		if err != nil || jsons == 0 || texts == 0 {
			t.Errorf("%s: no goldens of its findings under %s (%d JSON, %d prose; %v): its tests' "+
				"detectortest.Run or Check write them with -update", a.Name, dir, jsons, texts, err)
		}
	}
}
