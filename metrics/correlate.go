package metrics

import (
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/kfsniff/kfsniff/report"
)

// BuildInfo registers kfsniff_build_info, 1 with the binary's version,
// commit and Go release, and what this process is: "agent" (a live
// capture), "correlator" (-r kafka://) or "file" (-r): the dashboard
// picks its instances by mode, so that agents and correlators, which
// count the same exchanges, are never summed.
func (m *Metrics) BuildInfo(version, revision, goVersion, mode string) {
	g := prometheus.NewGauge(prometheus.GaugeOpts{Name: "kfsniff_build_info",
		Help:        "1, labelled with kfsniff's version, commit, Go release and mode (agent: a live capture; correlator: -r kafka://; file: -r).",
		ConstLabels: prometheus.Labels{"version": version, "revision": revision, "goversion": goVersion, "mode": mode}})
	g.Set(1)
	m.reg.MustRegister(g)
}

// Correlation is what a correlator (-r kafka://) knows of its input, a
// snapshot taken on its run's goroutine.
type Correlation struct {
	// Lag is, per partition of the export topic held, how many records
	// the last fetch's high watermark is past the next to read.
	Lag map[int32]int64
	// Records read, Unreadable (malformed or of another schema), Late
	// (past the reorder window), Duplicates (read again, skipped).
	Records, Unreadable, Late, Duplicates int64
	// Clocks are the agents' clock offsets from the reference agent.
	Clocks []Clock
	// Latency is the producer-to-consumer latency per topic.
	Latency []TopicLatency
}

// Clock is one agent's estimated offset and its interquartile spread.
type Clock struct {
	Agent          string
	Offset, Spread time.Duration
}

// TopicLatency is one topic's producer-to-consumer latencies as a
// histogram: cumulative counts at E2EBuckets' bounds.
type TopicLatency struct {
	Topic   string
	Count   uint64
	Sum     time.Duration
	Buckets []uint64
}

// E2EBuckets are the bounds of the producer-to-consumer latency
// histogram, in seconds.
var E2EBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// maxCorrelationSeries bounds the agents, topics and partitions labelled.
const maxCorrelationSeries = 1024

// Correlator registers the correlator's metrics, read from snap at each
// scrape (nil: nothing yet).
func (m *Metrics) Correlator(snap func() *Correlation) {
	m.reg.MustRegister(&correlation{snap: snap})
}

type correlation struct {
	snap func() *Correlation
}

var (
	descLag = prometheus.NewDesc("kfsniff_correlate_lag_records",
		"Records of the export topic's partition not read yet: the last fetch's high watermark minus the next offset.", []string{"partition"}, nil)
	descRecords    = prometheus.NewDesc("kfsniff_correlate_records_total", "Records the correlator read from the export topic.", nil, nil)
	descUnreadable = prometheus.NewDesc("kfsniff_correlate_unreadable_total", "Records the correlator could not use (malformed, another schema version).", nil, nil)
	descLate       = prometheus.NewDesc("kfsniff_correlate_late_total", "Records later than --reorder-window, merged out of order.", nil, nil)
	descDuplicates = prometheus.NewDesc("kfsniff_correlate_duplicates_total", "Records read again (the same agent, run and seq), skipped.", nil, nil)
	descOffset     = prometheus.NewDesc("kfsniff_correlate_clock_offset_seconds",
		"An agent's clock minus the reference agent's, as estimated from exchanges two agents captured.", []string{"agent"}, nil)
	descSpread = prometheus.NewDesc("kfsniff_correlate_clock_spread_seconds",
		"The interquartile range of an agent's clock offset samples: how far the offset can be trusted.", []string{"agent"}, nil)
	descE2E = prometheus.NewDesc("kfsniff_correlate_e2e_latency_seconds",
		"Producer-to-consumer latency of batches: a Produce request's batch to the Fetch response carrying it, clocks corrected, per topic.", []string{"topic"}, nil)
)

func (c *correlation) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descLag, descRecords, descUnreadable, descLate, descDuplicates, descOffset, descSpread, descE2E} {
		ch <- d
	}
}

func (c *correlation) Collect(ch chan<- prometheus.Metric) {
	s := c.snap()
	if s == nil {
		s = &Correlation{}
	}
	ch <- prometheus.MustNewConstMetric(descRecords, prometheus.CounterValue, float64(s.Records))
	ch <- prometheus.MustNewConstMetric(descUnreadable, prometheus.CounterValue, float64(s.Unreadable))
	ch <- prometheus.MustNewConstMetric(descLate, prometheus.CounterValue, float64(s.Late))
	ch <- prometheus.MustNewConstMetric(descDuplicates, prometheus.CounterValue, float64(s.Duplicates))
	for _, p := range bounded(slices.Sorted(maps.Keys(s.Lag))) {
		ch <- prometheus.MustNewConstMetric(descLag, prometheus.GaugeValue, float64(s.Lag[p]), strconv.Itoa(int(p)))
	}
	for _, a := range bounded(s.Clocks) {
		agent := report.Clean(a.Agent)
		ch <- prometheus.MustNewConstMetric(descOffset, prometheus.GaugeValue, a.Offset.Seconds(), agent)
		ch <- prometheus.MustNewConstMetric(descSpread, prometheus.GaugeValue, a.Spread.Seconds(), agent)
	}
	for _, t := range bounded(s.Latency) {
		b := make(map[float64]uint64, len(E2EBuckets))
		for j, le := range E2EBuckets {
			if j < len(t.Buckets) {
				b[le] = t.Buckets[j]
			}
		}
		ch <- prometheus.MustNewConstHistogram(descE2E, t.Count, t.Sum.Seconds(), b, report.Clean(t.Topic))
	}
}

// bounded is the first maxCorrelationSeries of s.
func bounded[T any](s []T) []T { return s[:min(len(s), maxCorrelationSeries)] }
