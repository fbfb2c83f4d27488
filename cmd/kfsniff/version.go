package main

import (
	"cmp"
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
	"strings"
)

// versionDeps are the modules whose versions --version names besides
// kfsniff's own: what decodes the protocol and the packets.
var versionDeps = []string{"github.com/twmb/franz-go/pkg/kmsg", "github.com/google/gopacket"}

// writeVersion prints what tcpdump --version prints for its own build:
// kfsniff's module version, the commit it was built from (with its time,
// and "modified" for a dirty tree), the Go release and platform, and the
// protocol libraries, from the build information the Go toolchain
// embeds. A build without it (go run of a file) says so.
func writeVersion(w io.Writer, info *debug.BuildInfo, ok bool) {
	if !ok || info == nil {
		fmt.Fprintf(w, "kfsniff version unknown (built without module information)\n%s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		return
	}
	fmt.Fprintf(w, "kfsniff version %s\n", cmp.Or(info.Main.Version, "(devel)"))
	s := map[string]string{}
	for _, kv := range info.Settings {
		s[kv.Key] = kv.Value
	}
	if rev := s["vcs.revision"]; rev != "" {
		line := "commit " + rev
		if t := s["vcs.time"]; t != "" {
			line += " (" + t + ")"
		}
		if s["vcs.modified"] == "true" {
			line += ", modified"
		}
		fmt.Fprintln(w, line)
	} else {
		fmt.Fprintln(w, "commit unknown (not built from a git checkout)")
	}
	fmt.Fprintf(w, "%s %s/%s\n", cmp.Or(info.GoVersion, runtime.Version()), runtime.GOOS, runtime.GOARCH)
	for _, path := range versionDeps {
		for _, d := range info.Deps {
			if d.Path == path {
				if d.Replace != nil {
					d = d.Replace
				}
				fmt.Fprintf(w, "%s %s\n", strings.TrimPrefix(path, "github.com/"), d.Version)
			}
		}
	}
}

// buildInfo is what kfsniff_build_info says of this binary: its module
// version, commit and Go release.
func buildInfo() (version, revision, goVersion string) {
	version, revision, goVersion = "unknown", "unknown", runtime.Version()
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return
	}
	version = cmp.Or(info.Main.Version, version)
	for _, s := range info.Settings {
		if s.Key == "vcs.revision" {
			revision = s.Value
		}
	}
	goVersion = cmp.Or(info.GoVersion, goVersion)
	return
}
