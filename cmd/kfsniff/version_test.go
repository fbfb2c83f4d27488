package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"
)

// TestVersionFlag: --version exits 0 and names the Go release this
// binary was built with, without needing an input.
func TestVersionFlag(t *testing.T) {
	code, out, errOut := kfsniff(t, "--version")
	if code != exitOK || errOut != "" {
		t.Fatalf("exit %d, stderr %q", code, errOut)
	}
	if !strings.HasPrefix(out, "kfsniff version ") || !strings.Contains(out, runtime.Version()+" "+runtime.GOOS+"/"+runtime.GOARCH) {
		t.Errorf("--version printed:\n%s", out)
	}
}

// TestVersionText: what is printed from a build's information: the
// module version, the commit with its time and a dirty tree marked, and
// the protocol libraries' versions (a replaced module's replacement).
func TestVersionText(t *testing.T) {
	info := &debug.BuildInfo{
		GoVersion: "go1.99.1",
		Main:      debug.Module{Path: "github.com/kfsniff/kfsniff", Version: "v1.4.0"},
		Deps: []*debug.Module{
			{Path: "github.com/twmb/franz-go/pkg/kmsg", Version: "v1.15.1"},
			{Path: "github.com/google/gopacket", Version: "v1.1.19", Replace: &debug.Module{Path: "example.com/gopacket", Version: "v1.1.20"}},
		},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.time", Value: "2026-12-01T17:25:51Z"}, {Key: "vcs.modified", Value: "true"}},
	}
	var b bytes.Buffer
	writeVersion(&b, info, true)
	want := "kfsniff version v1.4.0\ncommit 0123abcd (2026-12-01T17:25:51Z), modified\ngo1.99.1 " + runtime.GOOS + "/" + runtime.GOARCH +
		"\ntwmb/franz-go/pkg/kmsg v1.15.1\ngoogle/gopacket v1.1.20\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	writeVersion(&b, nil, false)
	if !strings.Contains(b.String(), "version unknown") || !strings.Contains(b.String(), runtime.Version()) {
		t.Errorf("without build information:\n%s", b.String())
	}
}

// TestVersionBuiltFromClone: a binary built from a git clone names the
// commit it was built from. It needs a clone (go stamps no commit in a
// git worktree, whose .git is a file) and a build, so not with -short.
func TestVersionBuiltFromClone(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binary")
	}
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(filepath.Join(root, ".git")); err != nil || !st.IsDir() {
		t.Skip("not a git clone (a worktree, or an exported tree): go stamps no commit")
	}
	head, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("git: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "kfsniff")
	build := exec.Command("go", "build", "-buildvcs=true", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		t.Fatalf("--version: %v", err)
	}
	if want := "commit " + strings.TrimSpace(string(head)); !strings.Contains(string(out), want) {
		t.Errorf("--version printed\n%s\nwant %q", out, want)
	}
}
