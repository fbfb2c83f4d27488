// Command floor reads capture files as the benchmarks' floor does (bench/floor:
// read every packet and decode it to TCP, nothing else) and prints, per
// file, what it read and how fast:
//
//	floor FILE...
//
// bench/e2e.sh runs it beside kfsniff to give the floor of the real binary.
package main

import (
	"fmt"
	"os"
	"time"

	"github.com/kfsniff/kfsniff/bench/floor"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "floor: usage: floor FILE...")
		os.Exit(2)
	}
	for _, name := range os.Args[1:] {
		t0 := time.Now()
		r, err := floor.Read(name)
		el := time.Since(t0).Seconds()
		if err != nil {
			fmt.Fprintf(os.Stderr, "floor: %v\n", err)
			os.Exit(1)
		}
		st, err := os.Stat(name)
		if err != nil {
			fmt.Fprintf(os.Stderr, "floor: %v\n", err)
			os.Exit(1)
		}
		fmt.Printf("%s: %d packets (%d TCP, %d bad), %d bytes, %.3fs, %.1f MB/s, %.0f packets/s\n",
			name, r.Packets, r.TCP, r.Bad, st.Size(), el, float64(st.Size())/el/1e6, float64(r.Packets)/el)
	}
}
