package flows

// Table is one of the analyzer's tables that grow with the traffic: how
// many entries (or bytes) it holds now and its bound (0: none).
type Table struct {
	Name        string
	Size, Bound int64
}

// Tables reports the analyzer's growing tables as they stand, for the
// live gauges (kfsniff_table_size) and the soak (BENCHMARKS.md): the
// connections listed (MaxConns), the TCP streams tracked (MaxStreams),
// quiet connections remembered, listed and not (their bounds), handshakes waiting (their bound),
// requests waiting for a response (MaxPendingTotal) and the bytes of
// partial frames (BufferBudget). It is cheap (lengths only) and must run
// on the goroutine feeding the analyzer.
func (a *Analyzer) Tables() []Table {
	return []Table{
		{"connections", int64(len(a.conns)), int64(a.cfg.MaxConns)},
		{"streams", int64(len(a.streams)), int64(a.cfg.MaxStreams)},
		{"idle", int64(len(a.idle)), int64(a.maxIdle)},
		{"idle_unlisted", int64(len(a.gone)), int64(a.maxGone)},
		{"handshakes", int64(len(a.syns)), int64(a.maxSYNs)},
		{"waiting_requests", int64(a.waits.total), int64(a.cfg.MaxPendingTotal)},
		{"buffered_bytes", a.bufs.used, int64(a.cfg.BufferBudget)},
	}
}
