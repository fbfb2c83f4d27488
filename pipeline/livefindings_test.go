package pipeline

import (
	"bytes"
	"context"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/all"
	"github.com/kfsniff/kfsniff/flows"
)

// snapshotter is a test handler that takes the detectors' findings as they
// stand every `every` exchanges, twice in a row (the second must equal the
// first: a snapshot changes nothing). The analyzer's node table is not
// reachable from a handler, so its Env has an empty one and the
// connections seen so far.
type snapshotter struct {
	t     *testing.T
	set   *detectors.Set
	every int
	n     int
	conns []*flows.Conn
	seen  map[*flows.Conn]bool
	last  time.Time
	// at holds, per snapshot, the exchange count and the detectors found.
	at []snapAt
}

type snapAt struct {
	exchanges int
	detectors []string
}

func (s *snapshotter) OnExchange(x *flows.Exchange) {
	s.n++
	if x.Conn != nil && !s.seen[x.Conn] {
		s.seen[x.Conn] = true
		s.conns = append(s.conns, x.Conn)
	}
	if x.Req != nil && x.Req.Time.After(s.last) {
		s.last = x.Req.Time
	}
	if x.Resp != nil && x.Resp.Time.After(s.last) {
		s.last = x.Resp.Time
	}
	if s.n%s.every != 0 {
		return
	}
	env := detectors.Pass{Nodes: &cluster.Nodes{}, Conns: s.conns, End: s.last}
	a := s.set.Snapshot(env)
	b := s.set.Snapshot(env)
	if ja, jb := mustJSON(s.t, a), mustJSON(s.t, b); !bytes.Equal(ja, jb) {
		s.t.Errorf("two snapshots in a row after %d exchanges differ:\n%s\n%s", s.n, ja, jb)
	}
	s.at = append(s.at, snapAt{s.n, detectorIDs(a)})
}

func detectorIDs(fs []detectors.Finding) []string {
	var ids []string
	for _, f := range fs {
		if !slices.Contains(ids, f.Detector) {
			ids = append(ids, f.Detector)
		}
	}
	return ids
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSnapshotsDoNotDisturb: for every scenario and client recording,
// findings taken while the analysis runs (by the pipeline's LiveFindings
// at every check, about every 256 packets, and by a handler every 5
// exchanges) leave the final findings exactly as a run without them, and
// the snapshots show the incident before the capture ends.
func TestSnapshotsDoNotDisturb(t *testing.T) {
	var paths []string
	for _, dir := range []string{"scenarios", "clients"} {
		ps, _ := filepath.Glob(filepath.Join("..", "fixtures", "pcaps", dir, "*.pcap"))
		paths = append(paths, ps...)
	}
	if len(paths) < 10 {
		t.Fatalf("%d captures, want the scenarios and the client recordings", len(paths))
	}
	run := func(t *testing.T, path string, opt Options) *Result {
		f, err := capture.Open(path, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		opt.Flows = flows.DefaultConfig()
		return Run(context.Background(), []*capture.File{f}, opt)
	}
	for _, path := range paths {
		name := strings.TrimSuffix(filepath.Base(path), ".pcap")
		t.Run(filepath.Base(filepath.Dir(path))+"/"+name, func(t *testing.T) {
			plain, err := detectors.NewSet(all.Analyzers(), nil)
			if err != nil {
				t.Fatal(err)
			}
			want := run(t, path, Options{Detectors: plain}).Report.Findings

			set, err := detectors.NewSet(all.Analyzers(), nil)
			if err != nil {
				t.Fatal(err)
			}
			h := &snapshotter{t: t, set: set, every: 5, seen: map[*flows.Conn]bool{}}
			var live [][]string
			got := run(t, path, Options{
				Detectors:         set,
				Handlers:          []flows.Handler{h},
				LiveFindings:      func(fs []detectors.Finding) { live = append(live, detectorIDs(fs)) },
				LiveFindingsEvery: time.Nanosecond,
			}).Report.Findings

			if w, g := mustJSON(t, want), mustJSON(t, got); !bytes.Equal(w, g) {
				t.Fatalf("findings with snapshots differ from a run without:\nwithout:%s\nwith:%s", describe(want), describe(got))
			}
			if len(live) == 0 {
				t.Fatal("LiveFindings never called")
			}
			if len(live[0]) != 0 {
				t.Errorf("findings before the first packet: %v", live[0])
			}
			if len(h.at) == 0 {
				t.Fatalf("no snapshot: %d exchanges", h.n)
			}
			t.Logf("%d exchanges, %d handler snapshots, %d pipeline snapshots; final %v", h.n, len(h.at), len(live), detectorIDs(got))

			// The loop of the observer scenario and of the clients is
			// seen while the capture runs, not only at its end.
			if name == "observer-fetch-loop" || strings.HasPrefix(name, "notleader-") {
				early := false
				for _, s := range h.at {
					if s.exchanges < h.n && slices.Contains(s.detectors, "not-leader-loop") {
						early = true
						break
					}
				}
				if !early {
					t.Errorf("no snapshot before the end has not-leader-loop: %+v", h.at)
				}
			}
			if name == "observer-fetch-loop" {
				early := false
				for _, ids := range live {
					early = early || slices.Contains(ids, "not-leader-loop")
				}
				if !early {
					t.Errorf("no LiveFindings snapshot has not-leader-loop: %v", live)
				}
			}
		})
	}
}
