package pipeline

import "runtime"

// manyConns is the number of connections past which the report is built
// after a collection (collectBeforeBuild).
const manyConns = 20_000

// collectBeforeBuild collects the garbage of the analysis before the
// report is built, when the capture had many connections. The report's
// rows (hundreds of bytes each) are allocated while every connection is
// still live; left to the pacer, they land on a heap whose last goal was
// set by the analysis's garbage, and the peak went past twice the live
// heap: on 100,000 short connections (churn-conns.pcap) the peak moved
// between 225 and 265 MiB from run to run for 172 MiB live, with the
// machine's load. One collection of that heap costs tens of
// milliseconds, against seconds of analysis; small captures skip it.
func collectBeforeBuild(conns int) {
	if conns >= manyConns {
		runtime.GC()
	}
}
