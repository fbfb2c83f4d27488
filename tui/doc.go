// Package tui is kfsniff's terminal UI: connections, exchanges, the detail
// of one exchange (decoded field by field, its records decompressed, and in
// hex), findings, per-API stats or a timeline, and a status line,
// refreshed a few times a second while a capture runs. It is the only
// package that imports tview and tcell.
//
// # Shape
//
// As in k9s, the state is a plain-Go Model, tested without a terminal,
// and the widgets are touched only on tview's event loop:
//
//   - Model is a flows handler (OnRequest, OnExchange, OnConnEvent). The
//     pipeline's goroutine writes to it; the UI's goroutine reads it
//     through snapshot methods that copy (Conns, AppendExchanges, Frames,
//     Stats, Findings, Status, Evidence, Timeline). One mutex guards it; a handler
//     call copies a few values and the frame bytes (which are valid only
//     during the call) and allocates nothing once its buffers are warm.
//     The model never calls the UI.
//   - What it keeps is bounded (ModelConfig): the last History exchanges
//     over all connections, the last ConnHistory per connection, MaxConns
//     connections, and FrameBytes of frame copies in a ring (older frames
//     read as "no longer kept", never as other bytes; at most FrameRate
//     bytes of them copied a second of capture time), and Timeline
//     seconds of per-second counts in rings (overall, per API, per
//     connection). Totals keep counting.
//   - The UI pulls snapshots on a ticker (Options.Refresh, 250ms) through
//     app.QueueUpdateDraw, at most one refresh queued at a time, and never
//     per event. The Connections and Exchanges tables implement
//     tview.TableContent over the snapshots, so only visible rows are
//     rendered. The Exchanges list fetches only the exchanges newer than
//     its last refresh (Model.AppendExchanges with since).
//   - Every wire-derived string (client ids, topics, hosts, field values,
//     findings quoting them) goes through report.Clean and literal
//     (sanitize.go: every '[' made literal, whatever tag tview would read,
//     URL and region tags included) before display: packet data can
//     neither drive the terminal nor restyle the UI. The hex view shows bytes with style tags disabled.
//
// # Contract with the caller (cmd/kfsniff)
//
//	m := tui.NewModel(tui.ModelConfig{})            // zero value: defaults
//	done := make(chan struct{})
//	go func() {
//		res = pipeline.Run(ctx, files, pipeline.Options{..., Handlers: []flows.Handler{m}, Detectors: set})
//		m.Sync()                                 // last look at connections (labels learned late)
//		m.SetFindings(res.Report.Findings)
//		m.SetCounters(tui.Counters{Packets: res.Report.Capture.Packets, Bytes: res.Report.Capture.Bytes})
//		close(done)                              // the UI shows ENDED and stays open
//	}()
//	err := tui.Run(ctx, tui.Options{Title: "interface lo, port 9092", Model: m, SaveTo: save, Done: done})
//	// q or Ctrl-C: Run returns nil; print the final report.
//
// Which goroutine may call what:
//
//   - OnRequest, OnExchange, OnConnEvent: the pipeline's goroutine (the
//     analyzer calls them as a handler).
//   - Sync: reads the analyzer's connections, so only from the pipeline's
//     goroutine (between packets) or after the pipeline has returned.
//   - SetPartial: any goroutine, any time; the status line says PARTIAL
//     with its sentence (the report's Capture.Partial), as it says
//     FILTERED with Options.Filter.
//   - SetFindings, SetCounters: any goroutine, any time (live capture:
//     periodically, e.g. findings from detectors.Set.Findings computed on
//     the pipeline's goroutine, kernel drops from the capture handle with
//     Counters.Live set).
//   - The snapshot methods: any goroutine.
//
// Run blocks until the user quits (`q`, Ctrl-C: nil), ctx ends
// (ctx.Err()), or the terminal fails. Options.Screen nil opens the real
// terminal; tests pass a tcell simulation screen (uninitialised: Run
// initialises it). Options.SaveTo (which returns the sentence to show:
// what was saved and what was dropped), if set, is called on its own
// goroutine with the file name the user typed after
// `w`; its error or success is shown in the header. Counters.SaveDropped
// puts the packets the save buffer dropped on the status line. Options.Done is closed when the capture ends; the
// UI stays open until `q`.
//
// # Keys
//
// The main page fits the terminal (layout.go): stacked panes when there is
// room for at least a few exchanges, else (80x24) one pane at a time under
// a k9s-style switcher naming them all, Tab and Shift-Tab going from one to
// the next; the focus is always on a pane drawn. The hint bar names the
// keys that matter, dropping the least important on a narrow terminal.
//
// k9s and termshark habits: ? help; Tab / Shift-Tab next / previous pane;
// Enter drills down (a connection's exchanges, an exchange's detail, a
// finding's evidence, an API's exchanges); Esc goes back (closes the
// detail or help, leaves a drill-down, clears the filter); / filters the
// exchanges (see Filter); p pauses the display while the capture
// continues; w saves the capture so far; i shows a finding in full; l shows
// each consumer's and follower's lag per partition (Model.Lag); t shows the
// timeline in place of the Stats pane (Model.Timeline: requests and error
// responses per second of capture time, overall, of the selected connection
// and of the selected exchange's API, as sparklines, with the findings'
// spans on the same axis, ending at the newest packet); 1..9,
// 0, < and > sort the connections; j k g G and the arrows move; q quits.
// The exchanges follow the newest while the last row is selected.
package tui
