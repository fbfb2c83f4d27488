// Package bench is kfsniff's performance harness (issue 4). It holds no
// code of the analysis: the end-to-end benchmarks in this directory run
// the analysis exactly as `kfsniff -r FILE --json` does, over captures that
// bench/workload generates at benchmark time, beside the floor
// (bench/floor: the same file only read and decoded to TCP).
//
//	make bench-e2e     Go benchmarks (MB/s, packets/s, ratio to the floor,
//	                   allocations), then bench/e2e.sh (the built binary,
//	                   the floor and tshark on the generated shapes and on
//	                   real kgo captures recorded by bench/cmd/realgen:
//	                   wall time, peak RSS, issue 14's targets)
//	make bench-tshark  bench/compare-tshark.sh: kfsniff against tshark's
//	                   Kafka dissector on the same captures
//
// BENCHMARKS.md at the repository root holds the figures and what they
// mean.
package bench
