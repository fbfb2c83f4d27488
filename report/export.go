package report

// Export is what --export shipped to Kafka (docs/export.md), set by the
// command after the run: the report's "export" object and a line of the
// text report's capture section.
type Export struct {
	// Sink is kafka://BROKERS/TOPIC; FindingsTopic where findings went.
	Sink          string `json:"sink"`
	Topic         string `json:"topic"`
	FindingsTopic string `json:"findings_topic"`
	// Records is how many records the sink acknowledged, Findings how
	// many of them were findings.
	Records  int64 `json:"records"`
	Findings int64 `json:"findings"`
	// Dropped never reached the sink's client: its buffer was full, the
	// sink slow or down. Failed were handed to it and not delivered (the
	// sink refused them, or was unreachable until the run ended).
	Dropped int64 `json:"dropped"`
	Failed  int64 `json:"failed"`
	// SpoolDir is --export-spool's directory; Spilled how many records
	// went through it (the sink down or slow past the buffer); Spooled
	// how many are left in it at the end, for the next run to ship.
	SpoolDir string `json:"spool_dir,omitempty"`
	Spilled  int64  `json:"spilled,omitempty"`
	Spooled  int64  `json:"spooled,omitempty"`
	// LastError is the last delivery error, if any.
	LastError string `json:"last_error,omitempty"`
}

func (p *printer) export(e *Export) {
	if e == nil {
		return
	}
	p.f("  Export to %s: %d records shipped (%d findings to %s), %d dropped (buffer full), %d failed",
		Clean(e.Sink), e.Records, e.Findings, Clean(e.FindingsTopic), e.Dropped, e.Failed)
	if e.Spilled > 0 {
		p.f(", %d through the spool", e.Spilled)
	}
	if e.Spooled > 0 {
		p.f(", %d left in the spool %s for the next run", e.Spooled, Clean(e.SpoolDir))
	}
	if e.LastError != "" {
		p.f(" (last error: %s)", Clean(e.LastError))
	}
	p.f("\n")
}
