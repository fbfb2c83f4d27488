// Command benchgen writes the benchmark captures of bench/workload:
//
//	benchgen -o DIR -shape small|large [-packets N] [-size-mb MB] [-conns N] [-versions current|tshark]
//
// With -o - the capture goes to standard output (bench/growth.sh streams
// captures larger than the disk into kfsniff -r -) and the line to
// standard error.
//
// It writes DIR/small.pcap or DIR/large.pcap (DIR/small-tshark.pcap, ...
// with -versions tshark) and prints one line: the
// path, its size, packets, connections and exchanges. The captures are
// deterministic; bench/e2e.sh and bench/compare-tshark.sh call this.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/kfsniff/kfsniff/bench/workload"
)

func main() {
	os.Exit(run(os.Args[1:]))
}

func run(args []string) int {
	// The standard flag package: the scripts call it with Go-style
	// single-dash flags (-shape), which pflag would read as shorthands.
	fs := flag.NewFlagSet("benchgen", flag.ContinueOnError)
	dir := fs.String("o", "", "write the capture into `DIR` (created if missing)")
	shape := fs.String("shape", "small", "capture shape: small or large")
	packets := fs.Int("packets", workload.DefaultPackets, "small shape: about this many packets")
	sizeMB := fs.Int64("size-mb", workload.DefaultBytes/1e6, "large shape: about this many MB (10^6 bytes)")
	conns := fs.Int("conns", 0, "long-lived client connections (0: the shape's own, 2000 small, 8 large)")
	versions := fs.String("versions", "current", "message versions: current (Kafka 3.7 clients) or tshark (the highest tshark 4.0 dissects)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *dir == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "benchgen: usage: benchgen -o DIR -shape small|large [-packets N] [-size-mb MB]")
		return 2
	}
	var s workload.Shape
	switch *shape {
	case "small":
		s = workload.Small(*packets)
	case "large":
		s = workload.Large(*sizeMB * 1e6)
	default:
		fmt.Fprintf(os.Stderr, "benchgen: unknown shape %q: want small or large\n", *shape)
		return 2
	}
	v, err := workload.ParseVersions(*versions)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
		return 2
	}
	s.Versions = v
	if *conns > 0 {
		s.Conns = *conns
	}
	if *dir == "-" {
		t0 := time.Now()
		st, err := s.Write(os.Stdout)
		if err != nil {
			fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
			return 1
		}
		fmt.Fprintf(os.Stderr, "-: %s, %d bytes, %d packets, %d connections, %d exchanges (%.1fs)\n",
			s, st.Bytes, st.Packets, st.Conns, st.Exchanges, time.Since(t0).Seconds())
		return 0
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
		return 1
	}
	name := s.Name
	if v != workload.Current {
		name += "-" + v.String()
	}
	path := filepath.Join(*dir, name+".pcap")
	t0 := time.Now()
	st, err := s.WriteFile(path)
	if err != nil {
		fmt.Fprintf(os.Stderr, "benchgen: %v\n", err)
		return 1
	}
	fmt.Printf("%s: %s, %d bytes, %d packets, %d connections, %d exchanges (%.1fs)\n",
		path, s, st.Bytes, st.Packets, st.Conns, st.Exchanges, time.Since(t0).Seconds())
	return 0
}
