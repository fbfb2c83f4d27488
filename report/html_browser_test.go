package report_test

import (
	"bytes"
	"flag"
	"image"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/internal/browser"
	"github.com/kfsniff/kfsniff/report"
)

// screenshot is the README's picture of the HTML report, rewritten by
// go test ./report -run HTMLInBrowser -screenshot (not by -update: a
// browser's rendering differs from one machine's fonts to another's).
const screenshot = "../docs/html-report.png"

var writeScreenshot = flag.Bool("screenshot", false, "rewrite "+screenshot+" from the browser test")

// browserCapture is the scenario whose report the browser opens: findings
// of both severities spanning the capture, errors by API and by broker,
// and failing edges on the map.
const browserCapture = fixtures + "/scenarios/observer-fetch-loop.pcap"

// startBrowser returns a headless Chromium, installing Debian's package
// if it is missing (internal/browser/install-chromium.sh, as root; CI
// runs as root). Like the live capture tests, it fails saying why when it
// cannot, unless KFSNIFF_SKIP_BROWSER=1.
func startBrowser(t *testing.T, w, h int) *browser.Browser {
	t.Helper()
	if os.Getenv("KFSNIFF_SKIP_BROWSER") == "1" {
		t.Skip("KFSNIFF_SKIP_BROWSER=1: browser test skipped")
	}
	path, err := browser.Path()
	if err != nil {
		t.Fatalf("the HTML report's browser test needs Chromium: %v\n"+
			"run the tests as root (sudo make test) to have it installed, install it (apt-get install -y --no-install-recommends chromium), "+
			"or set KFSNIFF_SKIP_BROWSER=1 to skip the browser test", err)
	}
	b, err := browser.Start(path, t.TempDir(), w, h)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(b.Close)
	return b
}

func writePage(t *testing.T, r *report.Report) string {
	t.Helper()
	var buf bytes.Buffer
	if err := report.WriteHTML(&buf, r); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "report.html")
	if err := os.WriteFile(p, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checkQuiet fails on anything the console said, any request but the
// page's own, any dialog.
func checkQuiet(t *testing.T, url string, l *browser.Load) {
	t.Helper()
	for _, m := range l.Console {
		t.Errorf("console: %s", m)
	}
	for _, u := range l.Requests {
		if u != url {
			t.Errorf("the page requested %s", u)
		}
	}
	if !slices.Contains(l.Requests, url) {
		t.Errorf("the page's own load was not seen (requests %v): the network check saw nothing", l.Requests)
	}
	for _, d := range l.Dialogs {
		t.Errorf("a dialog opened: %q", d)
	}
}

type svgBox struct {
	ID    string  `json:"id"`
	W     float64 `json:"w"`
	H     float64 `json:"h"`
	Paths int     `json:"paths"`
	Texts int     `json:"texts"`
}

// TestHTMLInBrowser opens the HTML report of a scenario capture in
// headless Chromium: it loads without a word in the console and without
// a request leaving the page; the six charts and the map are drawn at
// their size with their lines and labels; a click on a column's header
// sorts the table; the screenshot is not blank. A page built from hostile
// strings runs and fetches nothing.
func TestHTMLInBrowser(t *testing.T) {
	const vw, vh = 1280, 1400
	b := startBrowser(t, vw, vh)

	t.Run("harness", func(t *testing.T) {
		// The checks below must be able to fail: a page that logs an
		// error and fetches an image is seen doing both.
		p := filepath.Join(t.TempDir(), "bad.html")
		os.WriteFile(p, []byte(`<!DOCTYPE html><html><body><img src="http://192.0.2.1/x.png"><script>console.error("seen")</script></body></html>`), 0o644)
		l, err := b.Open("file://" + p)
		if err != nil {
			t.Fatal(err)
		}
		if !slices.ContainsFunc(l.Console, func(s string) bool { return strings.Contains(s, "seen") }) {
			t.Errorf("console.error not seen: %q", l.Console)
		}
		if !slices.Contains(l.Requests, "http://192.0.2.1/x.png") {
			t.Errorf("the image's request not seen: %q", l.Requests)
		}
	})

	t.Run("hostile", func(t *testing.T) { hostileInBrowser(t, b) })

	_, rep := analyse(t, goldenCase{capture: browserCapture}, 1)
	page := writePage(t, rep)
	url := "file://" + page
	l, err := b.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	checkQuiet(t, url, l)

	var boxes []svgBox
	if err := b.Eval(`Array.from(document.querySelectorAll('svg')).map(s => {
		return {id: s.id, w: s.clientWidth, h: s.clientHeight, paths: s.querySelectorAll('path').length, texts: s.querySelectorAll('text').length};
	})`, &boxes); err != nil {
		t.Fatal(err)
	}
	want := map[string]bool{"chart-requests-by-api": true, "chart-errors-by-api": true, "chart-requests-by-broker": true,
		"chart-errors-by-broker": true, "chart-latency-by-api": true, "chart-bytes": true, "map": true}
	for _, s := range boxes {
		if !want[s.ID] {
			t.Errorf("unexpected svg %q", s.ID)
			continue
		}
		delete(want, s.ID)
		w := float64(report.ChartWidth) * 4 / 3
		if s.ID == "map" {
			w = float64(report.MapWidth) * 4 / 3
		}
		if math.Abs(s.W-w) > 1 || s.H < 200 {
			t.Errorf("%s drawn %.0fx%.0f px, want %.0f wide and at least 200 high", s.ID, s.W, s.H, w)
		}
		if s.ID != "map" && math.Abs(s.H-float64(report.ChartHeight)*4/3) > 1 {
			t.Errorf("%s is %.0f px high, want %.0f", s.ID, s.H, float64(report.ChartHeight)*4/3)
		}
		// Axes, ticks, lines, the findings' spans; titles and labels.
		if s.Paths < 10 || s.Texts < 5 {
			t.Errorf("%s has %d paths and %d texts: not drawn", s.ID, s.Paths, s.Texts)
		}
	}
	for id := range want {
		t.Errorf("no svg %q on the page", id)
	}
	var labels []string
	if err := b.Eval(`Array.from(document.querySelectorAll('#map text')).map(t => t.textContent)`, &labels); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"node 68", "node 1003 (10.30.7.85:8081)", "10.30.7.81:8081", "failing", "raft"} {
		if !slices.Contains(labels, n) {
			t.Errorf("the map has no label %q (labels %q)", n, labels)
		}
	}
	// A table never breaks an address (it broke "127.0.0.1:53262" into
	// three lines): every code cell holding one word is one line high.
	var broken []string
	if err := b.Eval(`Array.from(document.querySelectorAll('td.code')).filter(td => {
		const s = td.textContent.trim();
		if (s === '' || /\s/.test(s)) return false;
		const r = document.createRange(); r.selectNodeContents(td);
		return r.getClientRects().length > 1;
	}).map(td => td.textContent)`, &broken); err != nil {
		t.Fatal(err)
	}
	if len(broken) > 0 {
		t.Errorf("table cells broken over lines: %q", broken)
	}

	// Sorting: requests of the connections table, ascending, then
	// descending.
	sortBy := `(() => {
		const t = document.getElementById('table-connections');
		const col = Array.from(t.tHead.rows[0].cells).findIndex(c => c.textContent === 'requests');
		t.tHead.rows[0].cells[col].click();
		return Array.from(t.tBodies[0].rows).map(r => parseInt(r.cells[col].textContent));
	})()`
	for _, asc := range []bool{true, false} {
		var got []int
		if err := b.Eval(sortBy, &got); err != nil {
			t.Fatal(err)
		}
		sorted := slices.Clone(got)
		slices.Sort(sorted)
		if !asc {
			slices.Reverse(sorted)
		}
		if len(got) != len(rep.Connections) || !slices.Equal(got, sorted) || got[0] == got[len(got)-1] {
			t.Errorf("after a click (ascending %v) the connections' requests read %v", asc, got)
		}
	}

	png1, err := b.Screenshot()
	if err != nil {
		t.Fatal(err)
	}
	img, err := png.Decode(bytes.NewReader(png1))
	if err != nil {
		t.Fatal(err)
	}
	if sz := img.Bounds().Size(); sz != (image.Point{vw, vh}) {
		t.Errorf("screenshot %v, want %dx%d", sz, vw, vh)
	}
	if f := inked(img); f < 0.05 {
		t.Errorf("screenshot %.1f%% non-white: blank", f*100)
	}
	if *writeScreenshot {
		if err := os.WriteFile(screenshot, png1, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// hostileInBrowser: the hostile page in the browser: nothing runs,
// nothing is fetched, and the hostile client id is on the page as text.
func hostileInBrowser(t *testing.T, b *browser.Browser) {
	page := writePage(t, hostileReport(t))
	url := "file://" + page
	l, err := b.Open(url)
	if err != nil {
		t.Fatal(err)
	}
	checkQuiet(t, url, l)
	var got struct {
		Foreign int  `json:"foreign"`
		Shown   bool `json:"shown"`
		InMap   bool `json:"inMap"`
	}
	if err := b.Eval(`({
		foreign: document.querySelectorAll('img, iframe, object, embed, script:not(:last-of-type), [onerror], [onload]').length,
		shown: document.body.innerText.includes(`+"`"+hostile+"`"+`),
		inMap: Array.from(document.querySelectorAll('#map text')).some(t => t.textContent.includes('<script>alert(')),
	})`, &got); err != nil {
		t.Fatal(err)
	}
	if got.Foreign != 0 || !got.Shown || !got.InMap {
		t.Errorf("hostile page: %d foreign elements, shown as text %v, in the map %v", got.Foreign, got.Shown, got.InMap)
	}
}

// inked is the fraction of pixels that are not white.
func inked(img image.Image) float64 {
	r := img.Bounds()
	n := 0
	for y := r.Min.Y; y < r.Max.Y; y += 2 {
		for x := r.Min.X; x < r.Max.X; x += 2 {
			cr, cg, cb, _ := img.At(x, y).RGBA()
			if cr < 0xf000 || cg < 0xf000 || cb < 0xf000 {
				n++
			}
		}
	}
	return float64(n) / float64((r.Dx()/2)*(r.Dy()/2))
}
