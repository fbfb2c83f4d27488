package correlate

import (
	"bytes"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/kfsniff/kfsniff/report"
)

// manyConns is a real client's capture (kgo consumers rebalancing against
// kfake) with 25 connections that carried exchanges, for dealing among
// agents.
const manyConns = "../fixtures/pcaps/clients/rebalance-kgo-consumer.pcap"

// shared are the exchanges (client, server, API, correlation id) both
// agents shipped answered, and their connections: what the estimate
// should have as samples, counted here from the records themselves.
func shared(recs []Record, a, b string) (exchanges int, conns int) {
	type key struct {
		client, server, clientID string
		api, ver                 int16
		corr                     int32
	}
	seen := map[string]map[key]bool{a: {}, b: {}}
	for i := range recs {
		r := &recs[i]
		if r.Type == TypeExchange && r.Status == "answered" && r.Latency.Set && seen[r.Agent] != nil {
			seen[r.Agent][key{client: r.Client, server: r.Server, clientID: r.ClientID.V, api: r.API, ver: r.Ver, corr: r.Corr}] = true
		}
	}
	cs := map[[2]string]bool{}
	for k := range seen[a] {
		if seen[b][k] {
			exchanges++
			cs[[2]string{k.client, k.server}] = true
		}
	}
	return exchanges, len(cs)
}

func near(got, want, tol time.Duration) bool { return got >= want-tol && got <= want+tol }

// TestSkewFound: a capture's connections dealt to two agents, a third of
// them seen by both, the second agent's clock 1.234567 s ahead (and each
// connection's capture point up to 150 us further either way): the offset
// is found within the 150 us, from every exchange both shipped.
func TestSkewFound(t *testing.T) {
	const shift = 1234567 * time.Microsecond
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(shift)})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	sk := st.Skew()
	oa, oka := sk.Offset("host-a")
	ob, okb := sk.Offset("host-b")
	if !oka || !okb {
		t.Fatalf("offsets unknown: host-a %v, host-b %v", oka, okb)
	}
	if got := ob - oa; !near(got, shift, 150*time.Microsecond) {
		t.Errorf("host-b's clock found %v ahead of host-a's; it is %v (±150us)", got, shift)
	}
	wantSamples, wantConns := shared(recs, "host-a", "host-b")
	if wantSamples < 50 || wantConns < 3 {
		t.Fatalf("only %d exchanges on %d connections shared: the split is not what the test needs", wantSamples, wantConns)
	}
	t.Logf("host-b - host-a = %v from %d exchanges on %d connections", ob-oa, wantSamples, wantConns)
	sec := st.Section()
	var other *report.CorrelationAgent
	for i := range sec.Agents {
		if sec.Agents[i].Agent != sec.Reference {
			other = &sec.Agents[i]
		}
	}
	if other == nil || other.Clock == nil {
		t.Fatalf("no clock for the agent that is not the reference (%s): %+v", sec.Reference, sec.Agents)
	}
	c := other.Clock
	if c.Samples != int64(wantSamples) || c.Connections != int64(wantConns) || sec.Skew.Matched != int64(wantSamples) {
		t.Errorf("clock from %d samples on %d connections (%d matched); both agents shipped %d exchanges on %d connections",
			c.Samples, c.Connections, sec.Skew.Matched, wantSamples, wantConns)
	}
	if c.SpreadNs > int64(300*time.Microsecond) {
		t.Errorf("spread %v; the capture points differ by up to 300us between connections", time.Duration(c.SpreadNs))
	}
	if sec.Skew.Evicted != 0 {
		t.Errorf("%d evicted from windows of %d", sec.Skew.Evicted, sec.Skew.Window)
	}
	var text bytes.Buffer
	report.WriteText(&text, &report.Report{Correlation: sec})
	if !strings.Contains(text.String(), "reference") || !strings.Contains(text.String(), "samples") {
		t.Errorf("text report:\n%s", text.String())
	}
}

// TestSkewUnknown: two agents that saw no connection in common: no
// offset, said so, not a made-up zero.
func TestSkewUnknown(t *testing.T) {
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%2 == 0 }, none},
		agentView{"host-b", func(s int) bool { return s%2 == 1 }, func(int, bool) time.Duration { return 3 * time.Second }})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	sec := st.Section()
	if len(sec.Agents) != 2 || sec.Skew.Matched != 0 {
		t.Fatalf("agents %+v, %d matched", sec.Agents, sec.Skew.Matched)
	}
	for _, a := range sec.Agents {
		if a.Agent == sec.Reference {
			if a.Clock == nil || a.Clock.OffsetNs != 0 {
				t.Errorf("the reference's clock: %+v", a.Clock)
			}
			continue
		}
		if a.Clock != nil {
			t.Errorf("%s: offset %+v estimated from no exchange in common", a.Agent, *a.Clock)
		}
		if _, ok := st.Skew().Offset(a.Agent); ok {
			t.Errorf("%s: Offset says known", a.Agent)
		}
	}
	var text bytes.Buffer
	report.WriteText(&text, &report.Report{Correlation: sec})
	if !strings.Contains(text.String(), "unknown (no connection seen with the reference") {
		t.Errorf("text report does not say the offset is unknown:\n%s", text.String())
	}
}

// TestSkewChained: host-c saw no connection host-a saw, but both shared
// connections with host-b: host-c's offset from host-a is found through
// host-b (the two offsets added), and says so.
func TestSkewChained(t *testing.T) {
	const bAhead, cBehind = 1200 * time.Millisecond, -700 * time.Millisecond
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%5 == 0 || s%5 == 2 || s%5 == 3 }, none},
		agentView{"host-b", func(s int) bool { return s%5 <= 1 }, ahead(bAhead)},
		agentView{"host-c", func(s int) bool { return s%5 == 1 || s%5 == 4 }, func(s int, _ bool) time.Duration { return cBehind + jitter(s+7) }})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	sk := st.Skew()
	if ref := sk.Reference(); ref != "host-a" {
		t.Fatalf("reference %s (%+v); the test wants host-a (most connections) for host-c to be reached through host-b", ref, st.Section().Agents)
	}
	est := sk.Estimates()
	c, ok := est["host-c"]
	if !ok {
		t.Fatalf("host-c's offset unknown: %+v", est)
	}
	if !near(c.Offset, cBehind, 300*time.Microsecond) || !slices.Equal(c.Via, []string{"host-b"}) {
		t.Errorf("host-c: offset %v via %v; want %v (±300us, two links of ±150us) via host-b", c.Offset, c.Via, cBehind)
	}
	if b := est["host-b"]; !near(b.Offset, bAhead, 150*time.Microsecond) || len(b.Via) != 0 {
		t.Errorf("host-b: %v via %v; want %v directly", b.Offset, b.Via, bAhead)
	}
}

// TestSkewWindowEvicts: one agent's records all read before the other's
// with a window of 16: all but the last 16 of the first agent's
// exchanges are evicted unmatched, counted; the estimate comes from what
// the window held, and is still right.
func TestSkewWindowEvicts(t *testing.T) {
	const shift = 2 * time.Second
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return true }, none},
		agentView{"host-b", func(s int) bool { return true }, func(int, bool) time.Duration { return shift }})
	st := NewStats(Limits{Window: 16})
	var answeredA int64
	for _, name := range []string{"host-a", "host-b"} {
		recs := parseAll(t, by[name])
		for i := range recs {
			st.Add(&recs[i])
		}
		if name == "host-a" {
			answeredA, _, _ = st.Skew().Counts()
		}
	}
	exchanges, matched, evicted := st.Skew().Counts()
	if matched == 0 || matched > 16 {
		t.Fatalf("%d matched; the window held the last 16 of host-a's", matched)
	}
	// Every one of host-a's that left the window unmatched, and host-b's
	// pushed out of its own before the end, are counted.
	if evicted < answeredA-16 || evicted >= exchanges {
		t.Errorf("%d evicted of %d exchanges (host-a offered %d to a window of 16)", evicted, exchanges, answeredA)
	}
	if o, ok := st.Skew().Offset("host-b"); !ok || o != shift && o != -shift {
		t.Errorf("offset %v %v from what the window held; want ±%v", o, ok, shift)
	}
}

// TestSkewAcrossNetwork: the second agent sits across a network from the
// first, 400 us each way: it sees every packet to the server 400 us later
// than the first agent, every packet back 400 us earlier, its clock 2.5 s
// ahead. The request times alone would put it 2.5004 s ahead; the
// response times alone 2.4996 s; both together, as NTP does, find 2.5 s
// (within 10 us), and the delay says what separates the two captures.
func TestSkewAcrossNetwork(t *testing.T) {
	const shift, oneWay = 2500 * time.Millisecond, 400 * time.Microsecond
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, func(_ int, toServer bool) time.Duration {
			if toServer {
				return shift + oneWay
			}
			return shift - oneWay
		}})
	recs := merged(t, by)
	st := NewStats(Limits{})
	for i := range recs {
		st.Add(&recs[i])
	}
	est := st.Skew().Estimates()
	a, oka := est["host-a"]
	b, okb := est["host-b"]
	if !oka || !okb {
		t.Fatalf("offsets unknown: %+v", est)
	}
	off, delay := b.Offset-a.Offset, max(a.Delay, b.Delay)
	if !near(off, shift, 10*time.Microsecond) {
		t.Errorf("host-b found %v ahead of host-a; it is %v (the one-way delay of %v cancelled)", off, shift, oneWay)
	}
	if !near(delay, 2*oneWay, 10*time.Microsecond) {
		t.Errorf("delay %v; the captures are %v apart each way", delay, oneWay)
	}
}

// TestSkewOffsetPerRecord: Offset called for every record, as a merge by
// corrected time does, follows the estimate (cached, so cheap), and the
// reference stays the agent chosen when offsets were first estimated
// even when the other agent then ships many more records: corrected
// times do not jump by the offset.
func TestSkewOffsetPerRecord(t *testing.T) {
	const shift = 1234567 * time.Microsecond
	by := splitCapture(t, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(shift)})
	recs := merged(t, by)
	sk := NewSkew(0)
	ref := ""
	for i := range recs {
		sk.Add(&recs[i])
		_, okA := sk.Offset("host-a")
		_, okB := sk.Offset("host-b")
		if okA && okB && ref == "" {
			ref = sk.Reference()
		}
	}
	if ref == "" {
		t.Fatal("no offset while the records came")
	}
	other := "host-a"
	if ref == "host-a" {
		other = "host-b"
	}
	before, _ := sk.Offset(other)
	for range 20000 {
		sk.Add(&Record{V: 1, Type: TypeFinding, Agent: other})
	}
	if got := sk.Reference(); got != ref {
		t.Errorf("reference moved from %s to %s when %s shipped more records", ref, got, other)
	}
	after, ok := sk.Offset(other)
	if !ok || after != before {
		t.Errorf("%s's offset %v, %v after its findings; was %v", other, after, ok, before)
	}
	if fresh := sk.Estimates()[other].Offset; !near(after, fresh, 150*time.Microsecond) || !near(after, shift, 150*time.Microsecond) && !near(after, -shift, 150*time.Microsecond) {
		t.Errorf("cached offset %v, fresh %v, true ±%v", after, fresh, shift)
	}
}

// BenchmarkOffset is Offset's cost per call once estimated (a merge by
// corrected time calls it for every record).
func BenchmarkOffset(b *testing.B) {
	by := splitCapture(b, manyConns, 30,
		agentView{"host-a", func(s int) bool { return s%3 != 2 }, none},
		agentView{"host-b", func(s int) bool { return s%3 != 1 }, ahead(time.Second)})
	recs := merged(b, by)
	sk := NewSkew(0)
	for i := range recs {
		sk.Add(&recs[i])
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := sk.Offset("host-b"); !ok {
			b.Fatal("unknown")
		}
	}
}
