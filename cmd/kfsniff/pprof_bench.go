//go:build kfsniff_pprof

package main

// Built only with -tags kfsniff_pprof (bench/soak.sh, bench/live.sh): serves
// net/http/pprof on $KFSNIFF_PPROF ([HOST]:PORT), for the benchmarks'
// profiles of a live capture. The released binary has no such listener.

import (
	"fmt"
	"net/http"
	_ "net/http/pprof"
	"os"
)

func init() {
	addr := os.Getenv("KFSNIFF_PPROF")
	if addr == "" {
		return
	}
	go func() {
		if err := http.ListenAndServe(addr, nil); err != nil {
			fmt.Fprintln(os.Stderr, "kfsniff: pprof:", err)
		}
	}()
}
