package tui

import (
	"net/netip"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gdamore/tcell/v2"
	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/internal/termcheck"
)

// TestViewLag: `l` opens the Lag page: the slow consumer recorded with kgo
// is listed with its group, its lag growing over time; Esc goes back.
func TestViewLag(t *testing.T) {
	m, res := analyse(t, filepath.Join("..", "fixtures", "pcaps", "injected", "slow-consumer-kgo-kfake.pcap"), ModelConfig{})
	rows := m.Lag()
	if len(rows) != 1 || len(res.Report.Lag) != 1 || rows[0].Last != res.Report.Lag[0].Last || len(rows[0].Points) != len(res.Report.Lag[0].Points) {
		t.Fatalf("model lag %+v, report lag %+v: want the same series", rows, res.Report.Lag)
	}
	done := make(chan struct{})
	close(done)
	s := startUI(t, Options{Model: m, Done: done})
	s.waitFor("ENDED")
	s.sim.InjectKey(tcell.KeyRune, 'l', tcell.ModNone)
	scr := s.waitFor("Lag: high watermark minus fetch offset")
	lag := box(scr, "Lag:")
	row := line(lag, "kfsniff-slow-consumer")
	last := rows[0].Last.Lag
	for _, want := range []string{`consumer "kfsniff-slow-consumer" 127.0.0.1`, `"kfsniff-lag-group"`, "clicks-0", "127.0.0.1:9092",
		" " + itoa64(rows[0].First.Lag) + " ", " " + itoa64(last) + " "} {
		if !strings.Contains(row, want) {
			t.Errorf("lag row lacks %q:\n%s", want, lag)
		}
	}
	s.key(tcell.KeyEscape)
	s.waitGone("Lag: high watermark")
	s.waitFocus("Connections")
}

// TestLagWireStringsAreSafe: client ids and groups from the wire can
// neither drive the terminal nor restyle the view.
func TestLagWireStringsAreSafe(t *testing.T) {
	m := NewModel(ModelConfig{})
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.0.5:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	c.ID = 1
	m.OnConnEvent(&flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server})
	id := "evil[red]\x1b[2J"
	hb := kmsg.NewPtrHeartbeatRequest()
	hb.Version, hb.Group = 4, "grp[::b]\x07"
	m.OnRequest(flowstest.MakeRequest(c, time.Now(), 1, id, hb))
	q := kmsg.NewPtrFetchRequest()
	q.Version, q.ReplicaID, q.SessionEpoch = 12, -1, -1
	q.Topics = []kmsg.FetchRequestTopic{{Topic: "top[yellow]\x1b]0;x\x07", Partitions: []kmsg.FetchRequestTopicPartition{{Partition: 0, FetchOffset: 5}}}}
	r := kmsg.NewPtrFetchResponse()
	r.Version = 12
	r.Topics = []kmsg.FetchResponseTopic{{Topic: q.Topics[0].Topic, Partitions: []kmsg.FetchResponseTopicPartition{{Partition: 0, HighWatermark: 9, LastStableOffset: 9}}}}
	req := flowstest.MakeRequest(c, time.Now(), 2, id, q)
	m.OnRequest(req)
	m.OnExchange(&flows.Exchange{Conn: c, Req: req, Resp: flowstest.MakeResponse(req, time.Now(), r)})
	if rows := m.Lag(); len(rows) != 1 || rows[0].Last.Lag != 4 {
		t.Fatalf("lag rows %+v", rows)
	}
	s := startUI(t, Options{Model: m})
	s.sim.InjectKey(tcell.KeyRune, 'l', tcell.ModNone)
	scr := s.waitFor("Lag: high watermark minus fetch offset")
	if err := termcheck.Safe([]byte(scr)); err != nil {
		t.Errorf("the lag view: %v", err)
	}
	lag := box(scr, "Lag:")
	for _, want := range []string{`evil[red]`, `grp[::b]`, `top[yellow]`} {
		if !strings.Contains(lag, want) {
			t.Errorf("lag view lacks %q as text (a style tag must show as it is):\n%s", want, lag)
		}
	}
}

func itoa64(n int64) string { return strconv.FormatInt(n, 10) }
