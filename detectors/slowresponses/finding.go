package slowresponses

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is the slow responses of one API. Its exported fields are the
// finding's "fields"; latencies are in milliseconds.
type Finding struct {
	API string `json:"api"`
	// MedianMs is the API's median latency (beyond MaxWaitMillis for a
	// Fetch), ThresholdMs what a response took more than to be slow,
	// MaxMs the longest a slow one took in all.
	MedianMs    float64  `json:"p50_ms"`
	ThresholdMs float64  `json:"threshold_ms"`
	MaxMs       float64  `json:"max_ms"`
	ClientIDs   []string `json:"client_ids"`
	Clients     []string `json:"clients"`
	Servers     []string `json:"servers"`
	// WaitedMs is the longest a client waited for one response beyond
	// what the broker may hold it: what the severity grades.
	WaitedMs float64 `json:"waited_ms"`

	// Slow is the slow responses, Responses all of the API's.
	Slow      int64 `count:"slow"`
	Responses int64 `count:"responses"`

	Threshold, Median, Max time.Duration
	Waited                 time.Duration
	Severity               detectors.Severity
	First, Last            time.Time
	Worst                  []Exchange // the slowest by counted latency, slowest first
	BeyondWait             bool       // latency is counted beyond MaxWaitMillis
	ServerLabels           []string
	Params                 Params
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	return fmt.Sprintf("%s took over %s%s (median %s, slowest %s) from %s",
		text.Plural(f.Slow, f.API+" response", f.API+" responses"), text.Duration(min(f.Threshold, f.Params.MinWait)), f.beyond(),
		text.Duration(f.Median), text.Duration(f.Max), text.List(f.ServerLabels, 3))
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	slow := fmt.Sprintf("more than %s%s, which is over %g times the median of %s and over %s", text.Duration(f.Threshold),
		f.beyond(), f.Params.Factor, text.Duration(f.Median), text.Duration(f.Params.MinLatency))
	if f.Threshold > f.Params.MinWait {
		slow = fmt.Sprintf("%s or more%s, which clients feel however slow the API usually is (median %s)",
			text.Duration(f.Params.MinWait), f.beyond(), text.Duration(f.Median))
	}
	expl := fmt.Sprintf("Of %s, %d took %s, from %s to %s. The slowest%s: %s. Responses this far from the usual are a "+
		"broker pausing (GC, disk, overloaded request handlers or network threads, a slow follower holding acks=all "+
		"produces) rather than the work of the request.", text.Plural(f.Responses, f.API+" response", f.API+" responses"), f.Slow,
		slow, text.Clock(f.First), text.Clock(f.Last), f.beyond(), f.slowest())
	if f.BeyondWait {
		expl += " A Fetch is counted only for the time past its MaxWaitMillis, as the broker may hold a long " +
			"poll that long when there is no data."
	}
	if f.Severity == detectors.Info {
		expl += fmt.Sprintf(" No client waited %s for one of them: info.", text.Duration(f.Params.MinWait))
	} else {
		expl += fmt.Sprintf(" A client waited %s%s for one response.", text.Duration(f.Waited), f.beyond())
	}
	return expl
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kfsniff -r <capture> --frames --api %s%s lists the exchanges with their latency. On the "+
		"broker at those times: its log and GC log, the request metrics (kafka.network:type=RequestMetrics,"+
		"name=TotalTimeMs|RequestQueueTimeMs|LocalTimeMs|RemoteTimeMs,request=%s) to tell queueing from "+
		"disk from waiting on replicas, RequestHandlerAvgIdlePercent, and disk latency.", f.API,
		text.Filter("client-id", f.ClientIDs), f.API)
}

func (f *Finding) beyond() string {
	if f.BeyondWait {
		return " beyond MaxWaitMillis"
	}
	return ""
}

// slowest lists the slowest responses in the order they were found slow,
// by the time counted (beyond MaxWaitMillis or a throttle), with the whole
// latency beside it where that differs.
func (f *Finding) slowest() string {
	parts := make([]string, len(f.Worst))
	for i, e := range f.Worst {
		parts[i] = fmt.Sprintf("packet %d, %s", e.Evidence.Packet, text.Duration(e.Counted))
		if e.Counted != e.Latency {
			parts[i] += " (" + text.Duration(e.Latency) + " in all)"
		}
	}
	return strings.Join(parts, "; ")
}
