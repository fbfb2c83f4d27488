package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// ShippingCounts are --export's counts (export.Stats), read at each
// scrape.
type ShippingCounts struct {
	Records, Dropped, Failed int64
	// Pending wait for the sink (memory and spool); Oldest is the age of
	// the oldest of them.
	Pending int64
	Oldest  time.Duration
	// Spilled went through the spool in all; Spooled are in it now,
	// SpoolBytes on disk.
	Spilled, Spooled, SpoolBytes int64
	// Up is false while the sink is down.
	Up bool
}

// Shipping registers --export's metrics, read from counts at each
// scrape: records the sink acknowledged, dropped (the buffer and the
// spool full: the sink slow or down) and failed (refused, or not
// delivered by the end); what waits for the sink and for how long, the
// spool, and whether the sink is taking records. Called once, when
// --export is on.
func (m *Metrics) Shipping(counts func() ShippingCounts) {
	gauge := func(name, help string, v func(ShippingCounts) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help}, func() float64 { return v(counts()) })
	}
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_records_total",
			Help: "Records the --export sink acknowledged (exchanges per partition, connection events, findings)."},
			func() float64 { return float64(counts().Records) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_dropped_total",
			Help: "Records --export dropped because its bounded buffer (and spool, with --export-spool) was full: the sink slow or down. The capture never waits for the sink."},
			func() float64 { return float64(counts().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_failed_total",
			Help: "Records handed to the --export sink's client and not delivered: refused by the sink, or still waiting when the run ended (without a spool)."},
			func() float64 { return float64(counts().Failed) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_spilled_total",
			Help: "Records --export wrote to its on-disk spool (--export-spool) because the sink was slow or down past --export-buffer."},
			func() float64 { return float64(counts().Spilled) }),
		gauge("kfsniff_export_pending_records", "Records waiting for the --export sink, in memory and in the spool.",
			func(c ShippingCounts) float64 { return float64(c.Pending) }),
		gauge("kfsniff_export_oldest_pending_seconds", "Age of the oldest record waiting for the --export sink (0 when none waits).",
			func(c ShippingCounts) float64 { return c.Oldest.Seconds() }),
		gauge("kfsniff_export_spool_records", "Records in the --export spool on disk.",
			func(c ShippingCounts) float64 { return float64(c.Spooled) }),
		gauge("kfsniff_export_spool_bytes", "Bytes of the --export spool on disk (bounded by --export-spool-size).",
			func(c ShippingCounts) float64 { return float64(c.SpoolBytes) }),
		gauge("kfsniff_export_sink_up", "1 while the --export sink takes records, 0 while it is down (a connection to it failed, or the oldest record has waited 10 s).",
			func(c ShippingCounts) float64 {
				if c.Up {
					return 1
				}
				return 0
			}),
	)
}
