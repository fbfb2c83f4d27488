// Command floor reads capture files as the benchmarks' floor does (bench/floor:
// read every packet and decode it to TCP, nothing else) and prints, per
// file, what it read and how fast:
//
//	floor FILE...
//	floor -i IFACE [-B KiB]
//
// bench/e2e.sh runs it beside kfsniff to give the floor of the real binary.
// With -i it is the floor of live capture (floor.Live: kfsniff's capture
// ring, TCP decoding and gopacket's reassembly, no Kafka) until SIGINT or
// SIGTERM, and ends with kfsniff's closing line (packets captured, received
// by filter, dropped by kernel): bench/live.sh's floor mode.
package main

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/kfsniff/kfsniff/bench/floor"
)

func main() {
	if len(os.Args) >= 3 && os.Args[1] == "-i" {
		os.Exit(live(os.Args[2:]))
	}
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

// live runs floor.Live on args[0] (-B KiB after it, as kfsniff's) until a
// signal.
func live(args []string) int {
	buf := 0
	if len(args) == 3 && args[1] == "-B" {
		kib, err := strconv.Atoi(args[2])
		if err != nil || kib < 0 {
			fmt.Fprintln(os.Stderr, "floor: usage: floor -i IFACE [-B KiB]")
			return 2
		}
		buf = kib << 10
	} else if len(args) != 1 {
		fmt.Fprintln(os.Stderr, "floor: usage: floor -i IFACE [-B KiB]")
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	r, st, err := floor.Live(ctx, args[0], buf)
	if err != nil {
		fmt.Fprintf(os.Stderr, "floor: %v\n", err)
		return 1
	}
	fmt.Fprintf(os.Stderr, "floor: %d TCP packets, %d bad, %d bytes reassembled\n", r.TCP, r.Bad, r.Reassembled)
	fmt.Fprintf(os.Stderr, "floor: %d packets captured, %d received by filter, %d dropped by kernel\n", r.Packets, st.Received, st.Dropped)
	return 0
}
