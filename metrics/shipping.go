package metrics

import "github.com/prometheus/client_golang/prometheus"

// ShippingCounts are --export's counts (export.Stats), read at each
// scrape.
type ShippingCounts struct {
	Records, Dropped, Failed int64
}

// Shipping registers --export's counters, read from counts at each
// scrape: records the sink acknowledged, dropped (the bounded buffer was
// full: the sink slow or down) and failed (handed to the client, not
// delivered). Called once, when --export is on.
func (m *Metrics) Shipping(counts func() ShippingCounts) {
	m.reg.MustRegister(
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_records_total",
			Help: "Records the --export sink acknowledged (exchanges per partition, connection events, findings)."},
			func() float64 { return float64(counts().Records) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_dropped_total",
			Help: "Records --export dropped because its bounded buffer was full: the sink slow or down. The capture never waits for the sink."},
			func() float64 { return float64(counts().Dropped) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "kfsniff_export_failed_total",
			Help: "Records handed to the --export sink's client and not delivered: refused, or the sink unreachable past the delivery timeout."},
			func() float64 { return float64(counts().Failed) }),
	)
}
