package tui

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/fixtures/gen"
)

var update = flag.Bool("update", false, "rewrite testdata/screen*.txt from the simulation screen")

// observer is the observer fetch loop analysed, its capture ended.
func observer(t *testing.T) (*Model, chan struct{}) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})
	done := make(chan struct{})
	close(done)
	return m, done
}

// box returns the lines of the pane whose top border holds title, inside
// its borders.
func box(screen, title string) string {
	var out []string
	in := false
	for _, l := range strings.Split(screen, "\n") {
		switch {
		case !in && strings.Contains(l, title) && (strings.HasPrefix(l, "┌") || strings.HasPrefix(l, "╔")):
			in = true
		case in && (strings.HasPrefix(l, "└") || strings.HasPrefix(l, "╚")):
			return strings.Join(out, "\n")
		case in:
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}

// TestViewMain shows what a person sees first: connections with node
// labels, roles and client ids, the exchanges, the findings, the stats
// and the status line.
func TestViewMain(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Title: "file observer-fetch-loop.pcap", Model: m, Done: done})
	scr := s.waitFor("ENDED")

	conns := box(scr, "Connections (4)")
	hb := line(conns, "node 1003 (10.30.7.85:8081)")
	for _, want := range []string{"4 node 68 (10.54.45.36:56262) -> node 1003 (10.30.7.85:8081)", "liveness", " 68 ", " 20 ", "800/380", "open"} {
		if !strings.Contains(hb, want) {
			t.Errorf("heartbeat connection row %q lacks %q", hb, want)
		}
	}
	raft := line(conns, "10.30.7.81:8081")
	for _, want := range []string{"1 node 68 (10.54.45.36:47322) -> 10.30.7.81:8081", "raft", "raft-client-68", "1000  25.0   1000"} {
		if !strings.Contains(raft, want) {
			t.Errorf("raft connection row %q lacks %q", raft, want)
		}
	}
	xs := box(scr, "Exchanges: all (2020)")
	last := line(xs, "28742787")
	for _, want := range []string{"8077 8079", "#3 Fetch  17 28742787 raft raft-client-68 __cluster_metadata 2.800 ms NOT_LEADER_OR_FOLLOWER"} {
		if !strings.Contains(last, want) {
			t.Errorf("newest exchange row %q lacks %q", last, want)
		}
	}
	if f := line(box(scr, "Findings (4)"), "not-leader-loop"); !strings.Contains(f, "ERROR    not-leader-loop") ||
		!strings.Contains(f, "raft-client-68 (10.54.45.36) loops Fetch of __cluster_metadata-0 on 3 non-leader controller(s)") {
		t.Errorf("finding line %q", f)
	}
	// Findings are led by incidents: the not-leader-loop causes the
	// liveness-without-replication and the stalled-fetch; the
	// informational finding is in none.
	fbox := box(scr, "Findings (4)")
	for _, want := range []string{"1 cause  ERROR    not-leader-loop", "1 effect ERROR    liveness-without-replication", "1 effect ERROR    stalled-fetch", "         INFO "} {
		if !strings.Contains(fbox, want) {
			t.Errorf("Findings lack %q:\n%s", want, fbox)
		}
	}
	stats := box(scr, "Stats")
	if l := line(stats, "Fetch"); !strings.Contains(l, "2000  2000      2000") || !strings.Contains(l, "NOT_LEADER_OR_FOLLOWER=2000") {
		t.Errorf("Fetch stats line %q", l)
	}
	st := line(scr, "packets")
	for _, want := range []string{"file observer-fetch-loop.pcap", "8080 packets", "4 Kafka connections", "2020 exchanges (2000 with errors)", "/s", "4 findings", "ENDED"} {
		if !strings.Contains(st, want) {
			t.Errorf("status line %q lacks %q", st, want)
		}
	}

	// Colours a person relies on: error counts red, roles coloured,
	// severities coloured.
	styles := s.styles()
	raft2 := line(conns, "10.30.7.82:8081") // the first row is selected, drawn inverted
	if fg := styles.at(raft2, "500  12.4    500", 13); fg != colorBad {
		t.Errorf("error count drawn in %v, want red", fg)
	}
	if fg := styles.at(hb, "liveness", 0); fg != roleColor(cluster.RoleLiveness) {
		t.Errorf("liveness role drawn in %v, want %v", fg, roleColor(cluster.RoleLiveness))
	}
	// The first finding, the incident's cause, is selected (inverted):
	// the second is drawn as every row is.
	if fg := styles.at(line(scr, "ERROR    liveness-without-replication"), "ERROR", 0); fg != colorBad {
		t.Errorf("ERROR severity drawn in %v, want red", fg)
	}
}

// cellStyles is the screen's cell styles, by line.
type cellStyles struct {
	lines []string
	style [][]tcell.Style
}

func (s *screen) styles() *cellStyles {
	cs := &cellStyles{}
	s.onLoop(func() {
		_, w, h := s.sim.GetContents()
		cs.style = make([][]tcell.Style, h)
		for y := range cs.style {
			cs.style[y] = make([]tcell.Style, w)
		}
		text := s.contents(func(x, y int, c tcell.SimCell) { cs.style[y][x] = c.Style })
		cs.lines = strings.Split(text, "\n")
	})
	return cs
}

// at is the foreground colour of the off-th character of sub within the
// screen line l (found by its text).
func (cs *cellStyles) at(l, sub string, off int) tcell.Color {
	fg, _, _ := cs.styleAt(l, sub, off).Decompose()
	return fg
}

// styleAt is the style of the off-th character of sub within line l.
func (cs *cellStyles) styleAt(l, sub string, off int) tcell.Style {
	for y, sl := range cs.lines {
		if sl != l && !strings.Contains(sl, l) {
			continue
		}
		i := strings.Index(sl, sub)
		if i < 0 {
			continue
		}
		x := len([]rune(sl[:i])) + off
		return cs.style[y][x]
	}
	return tcell.StyleDefault
}

// TestViewTabFocus: Tab moves the focus from pane to pane; the focused
// pane has a double, yellow border.
func TestViewTabFocus(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	scr := s.waitFocus("Connections (4)")
	if focused(scr, "Exchanges: all") {
		t.Fatalf("Connections should have the focus first:\n%s", scr)
	}
	for _, title := range []string{"Exchanges: all", "Findings (4)", "Stats", "Connections (4)"} {
		s.key(tcell.KeyTab)
		scr = s.waitFocus(title)
		for _, other := range []string{"Connections (4)", "Exchanges: all", "Findings (4)", "Stats"} {
			if other != title && focused(scr, other) {
				t.Errorf("%s still looks focused", other)
			}
		}
		if fg := s.styles().at(line(scr, title), strings.Fields(title)[0], 0); fg != colorFocus {
			t.Errorf("%s title drawn in %v, want %v", title, fg, colorFocus)
		}
	}
	s.key(tcell.KeyBacktab)
	s.waitFocus("Stats")
}

// focused reports whether the pane titled title has the focus: its border
// is drawn double.
func focused(scr, title string) bool { return strings.HasPrefix(line(scr, title), "╔") }

// waitFocus waits until the pane titled title has the focus.
func (s *screen) waitFocus(title string) string {
	s.t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	scr := s.text()
	for ; !focused(scr, title) && time.Now().Before(deadline); scr = s.text() {
		time.Sleep(10 * time.Millisecond)
	}
	if !focused(scr, title) {
		s.t.Fatalf("%s should have the focus:\n%s", title, scr)
	}
	return scr
}

// TestViewDetailFetch: Enter on an exchange shows it decoded from the
// copied frames, field by field, and the frames in hex.
func TestViewDetailFetch(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	s.key(tcell.KeyTab)
	s.key(tcell.KeyEnter) // the newest exchange: #3's Fetch corr 28742787
	scr := s.waitFor("Decoded", "Frames (hex)")
	for _, want := range []string{
		"#3 node 68 (10.54.45.36:47326) -> 10.30.7.83:8081",
		"Fetch v17 corr 28742787   request packet 8077 (163 B)   response packet 8079 (111 B)   latency 2.800 ms   NOT_LEADER_OR_FOLLOWER",
		"Request: packet 8077, 163 bytes",
		`ClientID: "raft-client-68"`,
		"ReplicaState", "ID: 68", "Epoch: -1",
		"MaxWaitMillis: 500", "MaxBytes: 8388608", "SessionEpoch: -1",
		"[0] topic id AAAAAAAAAAAAAAAAAAAAAQ (__cluster_metadata)",
		// The raw frame: size prefix 0x9f = 159, key 1, version 17.
		"0000  00 00 00 9f 00 01 00 11  01 b6 94 83 00 0e 72 61  |..............ra|",
		"0010  66 74 2d 63 6c 69 65 6e  74 2d 36 38 00 00 00 01  |ft-client-68....|",
	} {
		if !strings.Contains(scr, want) {
			t.Errorf("detail lacks %q", want)
		}
	}
	// The end of the tree: the response, with the leader it names.
	s.key(tcell.KeyEnd)
	scr = s.waitFor("LeaderID: 1003")
	for _, want := range []string{"ErrorCode: 6 NOT_LEADER_OR_FOLLOWER", "LeaderEpoch: 643", `Host: "10.30.7.85"`, "Port: 8081"} {
		if !strings.Contains(box(scr, "Decoded"), want) {
			t.Errorf("response part of the tree lacks %q:\n%s", want, box(scr, "Decoded"))
		}
	}
	// Tab goes to the hex pane; Esc back to the exchanges.
	s.key(tcell.KeyTab)
	s.waitFor("═ Frames (hex) ═") // its border doubled: focused
	s.key(tcell.KeyEscape)
	s.waitFor("Exchanges: all (2020)")
	s.waitGone("Frames (hex)")

	// On a narrow terminal the hex goes below the tree, as in termshark.
	s.onLoop(func() { s.sim.SetSize(100, 40) })
	s.key(tcell.KeyEnter)
	scr = s.waitFor("Decoded", "Frames (hex)")
	if strings.Index(scr, "Frames (hex)") < strings.Index(scr, "Response: packet 8079") {
		t.Errorf("narrow detail should stack the hex below the tree:\n%s", scr)
	}
}

// TestViewHelp: ? shows every key; Esc closes it.
func TestViewHelp(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	s.typeText("?")
	scr := s.waitFor("Help: keys")
	for _, want := range []string{"this help", "next / previous pane", "drill down", "filter exchanges", "pause the display (the capture continues)",
		"save the most recent packets", "sort by", "quit"} {
		if !strings.Contains(scr, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	s.key(tcell.KeyEscape)
	s.waitGone("Help: keys")
}

// TestViewFilter: / opens the filter bar; Enter applies it to the
// exchanges; Esc in the exchanges clears it.
func TestViewFilter(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("Exchanges: all (2020)")
	s.typeText("/Fetch")
	s.waitFor("/Fetch")
	s.key(tcell.KeyEnter)
	scr := s.waitFor("Exchanges: all (2000) filter: Fetch")
	if strings.Contains(box(scr, "Exchanges"), "BrokerHeartbeat") {
		t.Errorf("filtered list shows heartbeats")
	}

	s.typeText("/")
	s.key(tcell.KeyCtrlU)
	s.typeText("api:BrokerHeartbeat")
	s.key(tcell.KeyEnter)
	scr = s.waitFor("Exchanges: all (20) filter: api:BrokerHeartbeat")
	xs := box(scr, "Exchanges")
	if strings.Contains(xs, "Fetch") || strings.Count(xs, "BrokerHeartbeat") != 20 {
		t.Errorf("filtered list:\n%s", xs)
	}
	s.key(tcell.KeyEscape) // the exchanges have the focus: clears the filter
	s.waitFor("Exchanges: all (2020) ")
}

// TestViewPause: p freezes the panes while the capture goes on (the status
// line keeps counting); p again catches up.
func TestViewPause(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})
	s := startUI(t, Options{Title: "interface lo", Model: m}) // live: Done never closed
	s.waitFor("LIVE", "Connections (4)")
	s.typeText("p")
	s.waitFor("PAUSED", "capture continues")
	late := newSynth(99, "late-client")
	for i := 0; i < 3; i++ {
		late.exchange(m, 0)
	}
	scr := s.waitFor("2023 exchanges")
	if !strings.Contains(scr, "Connections (4)") || strings.Contains(scr, "late-client") {
		t.Errorf("paused display changed:\n%s", scr)
	}
	s.typeText("p")
	scr = s.waitFor("Connections (5)", "late-client", "LIVE")
	if strings.Contains(scr, "PAUSED") {
		t.Errorf("still paused")
	}
}

// TestViewFollow: the exchanges follow the newest while the last row is
// selected; moving up stops following; G follows again.
func TestViewFollow(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})
	s := startUI(t, Options{Model: m})
	s.waitFor("Exchanges: all (2020)")
	s.key(tcell.KeyTab)
	first := newSynth(50, "first-late")
	first.exchange(m, 0)
	if xs := box(s.waitFor("Exchanges: all (2021)"), "Exchanges"); !strings.Contains(xs, "first-late") {
		t.Errorf("newest exchange not shown while following:\n%s", xs)
	}
	s.typeText("k")
	s.waitFor("scrolled: G follows")
	second := newSynth(51, "second-late")
	second.exchange(m, 0)
	if xs := box(s.waitFor("Exchanges: all (2022)"), "Exchanges"); strings.Contains(xs, "second-late") {
		t.Errorf("the list moved while scrolled up:\n%s", xs)
	}
	s.typeText("G")
	if xs := box(s.waitFor("second-late"), "Exchanges"); !strings.Contains(xs, "second-late") {
		t.Errorf("G did not follow:\n%s", xs)
	}
	s.waitGone("scrolled: G follows")
}

// TestViewConnectionDrill: Enter on a connection lists its exchanges; Esc
// goes back to all.
func TestViewConnectionDrill(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	for i := 0; i < 3; i++ {
		s.typeText("j")
	}
	s.key(tcell.KeyEnter)
	scr := s.waitFor("Exchanges of #4 node 68 (10.54.45.36:56262) -> node 1003 (10.30.7.85:8081) (20)")
	if xs := box(scr, "Exchanges of #4"); strings.Count(xs, "BrokerHeartbeat") != 20 || strings.Contains(xs, "Fetch") {
		t.Errorf("connection's exchanges:\n%s", xs)
	}
	s.key(tcell.KeyEscape)
	s.waitFor("Exchanges: all (2020)")
	s.waitFocus("Connections (4)") // Esc gives the focus back to where the drill-down began
}

// TestViewSort: digits sort the connections by a column; again reverses.
func TestViewSort(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	order := func(scr string) string {
		var ids []string
		for _, l := range strings.Split(box(scr, "Connections (4)"), "\n")[1:] {
			if f := strings.Fields(strings.Trim(l, "║")); len(f) > 0 {
				ids = append(ids, f[0])
			}
		}
		return strings.Join(ids, ",")
	}
	s.typeText("6") // REQS ascending
	scr := s.waitFor("REQS▲")
	if got := order(scr); got != "4,2,3,1" {
		t.Errorf("by requests ascending: %s", got)
	}
	s.typeText("6")
	scr = s.waitFor("REQS▼")
	if got := order(scr); got != "1,2,3,4" {
		t.Errorf("by requests descending: %s", got)
	}
	s.typeText("1")
	if got := order(s.waitFor("#▲")); got != "1,2,3,4" {
		t.Errorf("by id: %s", got)
	}
}

// TestViewFindingEvidence: Enter on a finding lists its evidence
// exchanges; i shows it in full.
func TestViewFindingEvidence(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	s.key(tcell.KeyTab)
	s.key(tcell.KeyTab)
	// The first finding: not-leader-loop, the cause of the incident
	// its liveness-without-replication and stalled-fetch belong to.
	s.typeText("i")
	scr := s.waitFor("ERROR: not-leader-loop", "incident 1  The cause, not-leader-loop", "what it means", "packet 2071: Fetch v17")
	if !strings.Contains(scr, "KAFKA-19354") {
		t.Errorf("finding text lacks the known issue")
	}
	// The incident's story above it makes the text longer than the
	// screen: its end is a scroll away.
	s.key(tcell.KeyEnd)
	s.waitFor("check next")
	s.key(tcell.KeyEscape)
	s.waitGone("what it means")
	s.key(tcell.KeyEnter)
	scr = s.waitFor("Exchanges: evidence of not-leader-loop (6)")
	xs := box(scr, "evidence of not-leader-loop")
	for _, pkts := range []string{"   1    3 ", "   5    7 ", "2069 2071", "4137 4139", "6209 6211", "8077 8079"} {
		if !strings.Contains(xs, pkts) {
			t.Errorf("evidence list lacks packets %q:\n%s", pkts, xs)
		}
	}
	s.waitFocus("evidence of not-leader-loop")
	s.key(tcell.KeyEscape)
	s.waitFor("Exchanges: all (2020)")
	s.waitFocus("Findings (4)")
}

// TestViewSave: w asks for a file name and calls SaveTo with it, showing
// the result; without SaveTo it says saving is not available.
func TestViewSave(t *testing.T) {
	for _, tc := range []struct {
		name string
		save func(string) error
		want string
	}{
		{"ok", func(string) error { return nil }, "saved capture to /tmp/incident.pcapng"},
		{"fails", func(string) error { return errors.New("open /tmp/incident.pcapng: no space left on device") },
			"save failed: open /tmp/incident.pcapng: no space left on device"},
		{"unavailable", nil, "saving is not available for this source"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, done := observer(t)
			got := make(chan string, 1)
			opts := Options{Model: m, Done: done}
			if tc.save != nil {
				opts.SaveTo = func(p string) (string, error) { got <- p; return "", tc.save(p) }
			}
			s := startUI(t, opts)
			s.waitFor("ENDED")
			s.typeText("w")
			s.waitFor("save capture to: kfsniff-")
			s.key(tcell.KeyCtrlU)
			s.typeText("/tmp/incident.pcapng")
			s.key(tcell.KeyEnter)
			s.waitFor(tc.want)
			if tc.save != nil {
				if p := <-got; p != "/tmp/incident.pcapng" {
					t.Errorf("SaveTo got %q", p)
				}
			}
		})
	}
}

// TestViewSaveDropped: with SaveTo, the header shows what it says was
// saved (the span, the older packets dropped), and the status line says
// when the save buffer dropped packets (SaveDropped).
func TestViewSaveDropped(t *testing.T) {
	m, done := observer(t)
	m.SetCounters(Counters{Packets: 900, SaveDropped: 812, SaveKeepMB: 1})
	opts := Options{Model: m, Done: done, SaveTo: func(p string) (string, error) {
		return "saved 88 packets 10:00:01-10:00:02 to " + p + "; 812 older packets dropped (--ui-keep 1 MB)", nil
	}}
	s := startUI(t, opts)
	s.waitFor("w keeps the last 1 MB: 812 older packets dropped")
	s.typeText("w")
	s.waitFor("save capture to: kfsniff-")
	s.key(tcell.KeyCtrlU)
	s.typeText("/tmp/x.pcapng")
	s.key(tcell.KeyEnter)
	s.waitFor("saved 88 packets 10:00:01-10:00:02 to /tmp/x.pcapng; 812 older packets dropped (--ui-keep 1 MB)")
}

// readyScreen is a simulation screen that says when Run has initialised
// it (events injected before are lost).
type readyScreen struct {
	tcell.SimulationScreen
	ready chan struct{}
}

func (s *readyScreen) Init() error {
	err := s.SimulationScreen.Init()
	close(s.ready)
	return err
}

// TestRunQuit: q ends Run with nil; the caller then prints the report.
func TestRunQuit(t *testing.T) {
	m, done := observer(t)
	sim := &readyScreen{tcell.NewSimulationScreen("UTF-8"), make(chan struct{})}
	errc := make(chan error, 1)
	go func() { errc <- Run(context.Background(), Options{Model: m, Screen: sim, Done: done}) }()
	<-sim.ready
	sim.InjectKey(tcell.KeyRune, 'q', tcell.ModNone)
	select {
	case err := <-errc:
		if err != nil {
			t.Errorf("Run returned %v after q, want nil", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return after q")
	}
}

func TestRunContext(t *testing.T) {
	m, _ := observer(t)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- Run(ctx, Options{Model: m, Screen: tcell.NewSimulationScreen("UTF-8")}) }()
	time.Sleep(50 * time.Millisecond)
	cancel()
	select {
	case err := <-errc:
		if !errors.Is(err, context.Canceled) {
			t.Errorf("Run returned %v when its context ended, want context.Canceled", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Run did not return when its context ended")
	}
	if err := Run(context.Background(), Options{}); err == nil {
		t.Error("Run without a model should fail")
	}
}

// hostileID is a client id that tries to drive the terminal (ANSI colour,
// window title, bell) and restyle the UI (tview tags).
const hostileID = "\x1b[31mevil[red]X\x1b]0;pwned\x07[::b]"

// hostileCapture writes a capture whose client id, topic and advertised
// host are hostile.
func hostileCapture(t *testing.T) string {
	var buf bytes.Buffer
	w, err := gen.NewWriter(&buf, gen.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	c := w.Conn(netip.MustParseAddrPort("10.9.9.9:50000"), netip.MustParseAddrPort("10.9.9.1:9092"), t0, gen.ConnOptions{})
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	topic := "[yellow]orders\x1b[2J"
	req.Topics = []kmsg.MetadataRequestTopic{{Topic: &topic}}
	id := hostileID
	c.Request(t0.Add(time.Millisecond), 1, &id, req)
	resp := kmsg.NewPtrMetadataResponse()
	resp.SetVersion(12)
	resp.Brokers = []kmsg.MetadataResponseBroker{{NodeID: 1, Host: "[red]10.9.9.1\x1b[0m", Port: 9092}}
	c.Response(t0.Add(2*time.Millisecond), 1, resp)
	c.Close(t0.Add(3 * time.Millisecond))
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "hostile.pcap")
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestViewHostileStrings: wire strings with escape sequences and tview
// tags are shown escaped, in every view, and style nothing.
func TestViewHostileStrings(t *testing.T) {
	m, _ := analyse(t, hostileCapture(t), ModelConfig{})
	done := make(chan struct{})
	close(done)
	s := startUI(t, Options{Model: m, Done: done})
	const shown = `\x1b[31mevil[red]X\x1b]0;pwned\x07[::b]`
	scr := s.waitFor("Connections (1)", "ENDED")
	check := func(where, scr string, wants ...string) {
		t.Helper()
		for _, w := range wants {
			if !strings.Contains(scr, w) {
				t.Errorf("%s: lacks %q (escaped, literally)", where, w)
			}
		}
		if strings.Contains(scr, "evilX") || strings.Contains(scr, "\x1b") || strings.Contains(scr, "\x07") {
			t.Errorf("%s: wire data was interpreted:\n%q", where, scr)
		}
	}
	check("main", scr, shown, `[yellow]orders\x1b[2J`)
	conn := line(box(scr, "Connections"), "10.9.9.9:50000")
	if !strings.Contains(conn, shown) {
		t.Errorf("connection row %q lacks the escaped client id", conn)
	}
	// The escaped strings are drawn in the column's colour: the tags in
	// them styled nothing.
	st := s.styles()
	plain := st.styleAt(conn, "10.9.9.9:50000", 0) // drawn like the address next to it
	for i := range len("evil[red]X") {
		if got := st.styleAt(conn, "evil[red]X", i); got != plain {
			t.Errorf("client id character %d drawn in %v, want %v", i, got, plain)
		}
	}
	xrow := line(box(scr, "Exchanges"), "Metadata")
	for i := range len("[yellow]orders") {
		if got := st.styleAt(xrow, "[yellow]orders", i); got != st.styleAt(xrow, "[yellow]orders", 0) {
			t.Errorf("topic character %d drawn in %v, unlike the rest of the topic", i, got)
		}
	}
	s.key(tcell.KeyTab)
	s.key(tcell.KeyEnter)
	scr = s.waitFor("Decoded")
	check("detail", scr, `client id "`+shown+`"`, `ClientID: "`+shown+`"`, `Topic: "[yellow]orders\x1b[2J"`,
		"|31mevil[red]X.]0|", "|;pwned.[::b]....|", "|...[red]10.9.9.1|")
	s.key(tcell.KeyEnd)
	check("detail's end", s.waitFor("Host: "), `Host: "[red]10.9.9.1\x1b[0m"`)
}

// TestScreenGolden writes what the UI shows for the observer loop to
// testdata/screen.txt (main) and screen-detail.txt (an exchange's
// detail), for the README; go test ./tui -update refreshes them.
func TestScreenGolden(t *testing.T) {
	m, done := observer(t)
	s := startUI(t, Options{Title: "file fixtures/pcaps/scenarios/observer-fetch-loop.pcap", Model: m, Done: done})
	main := s.waitFor("ENDED", "Findings (4)")
	s.key(tcell.KeyTab)
	s.key(tcell.KeyEnter)
	s.waitFor("Decoded", "Frames (hex)")
	s.key(tcell.KeyEnd) // the response: NOT_LEADER_OR_FOLLOWER naming the leader
	detail := s.waitFor("LeaderID: 1003")
	for name, got := range map[string]string{"screen.txt": main, "screen-detail.txt": detail} {
		path := filepath.Join("testdata", name)
		if *update {
			if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatalf("%v (run go test ./tui -update)", err)
		}
		if got != string(want) {
			t.Errorf("%s differs (go test ./tui -update rewrites it):\ngot:\n%s\nwant:\n%s", name, got, want)
		}
	}
	readme, err := os.ReadFile(filepath.Join("..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(readme), main) {
		t.Errorf("README.md's Terminal UI section does not show testdata/screen.txt: paste it there")
	}
}
