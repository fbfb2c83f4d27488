package legacy

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/internal/text"
)

// throttled: responses with throttleTimeMs > 0. A broker throttles a client
// that exceeds a quota (produce or fetch bytes per second, request time
// percentage, controller mutations); the response says how long the client
// must wait. Throttling is reported per client id and API, since quotas are
// set per user and client id: a warning when it happened min-responses
// times or added up to min-total-ms, otherwise (one short throttle, e.g. a
// burst at start-up) info.

func throttledSpec() Spec {
	return Spec{
		ID:       "throttled",
		Severity: Warning,
		Summary: "Responses with throttleTimeMs > 0: a broker throttled a client for exceeding a quota. " +
			"Per client id and API: how many responses, the longest and the total throttle time; a " +
			"warning from min-responses throttled responses or min-total-ms in all, info below.",
		Params: []Param{
			{Name: "min-responses", Default: 3, Meaning: "throttled responses of one client id and API that make a warning"},
			{Name: "min-total-ms", Default: 1000, Meaning: "total throttle time in milliseconds of one client id and API that makes a warning"},
		},
		New: func(p Params) Detector { return newThrottled(p) },
	}
}

// throttleMaxGroups bounds the client id and API pairs tracked; more are
// counted together.
const throttleMaxGroups = 1024

type throttled struct {
	minResponses int64
	minTotal     time.Duration
	groups       map[throttleKey]*throttleGroup
	dropped      int64
}

func newThrottled(p Params) *throttled {
	return &throttled{
		minResponses: int64(max(p.Int("min-responses"), 1)),
		minTotal:     time.Duration(p.Float("min-total-ms") * float64(time.Millisecond)),
		groups:       make(map[throttleKey]*throttleGroup),
	}
}

type throttleKey struct {
	clientID string
	api      int16
}

type throttleGroup struct {
	key         throttleKey
	n           int64
	total, max  time.Duration
	maxAt       Evidence
	first, last time.Time
	after       bool // the broker throttles after the response (KIP-219)
	before      bool // the response itself was held back
	versions    map[int16]bool
	conns       opsConns
	ev          sampler[Evidence]
}

// OnExchange implements flows.ExchangeHandler.
func (d *throttled) OnExchange(x *flows.Exchange) {
	if x.Req == nil || x.Resp == nil || x.Resp.Resp == nil {
		return
	}
	tr, ok := x.Resp.Resp.(kmsg.ThrottleResponse)
	if !ok {
		return
	}
	ms, after := tr.Throttle()
	if ms <= 0 {
		return
	}
	k := throttleKey{x.Req.ClientID, x.Req.Key}
	g := d.groups[k]
	if g == nil {
		if len(d.groups) >= throttleMaxGroups {
			d.dropped++
			return
		}
		g = &throttleGroup{key: k, versions: make(map[int16]bool)}
		d.groups[k] = g
	}
	dur := time.Duration(ms) * time.Millisecond
	t := x.Resp.Time
	if g.n == 0 {
		g.first = t
	}
	g.n++
	g.last = t
	g.total += dur
	ev := evidence(x.Resp, fmt.Sprintf("%s v%d response throttleTimeMs %d", x.Req.Name(), x.Resp.Version, ms))
	if dur > g.max {
		g.max, g.maxAt = dur, ev
	}
	if after {
		g.after = true
	} else {
		g.before = true
	}
	g.versions[x.Resp.Version] = true
	g.conns.add(x.Conn)
	g.ev.add(ev)
}

// Findings implements Detector.
func (d *throttled) Findings(env *Env) []Finding {
	groups := make([]*throttleGroup, 0, len(d.groups))
	for _, g := range d.groups {
		groups = append(groups, g)
	}
	sort.Slice(groups, func(i, j int) bool {
		a, b := groups[i], groups[j]
		if a.key.clientID != b.key.clientID {
			return a.key.clientID < b.key.clientID
		}
		return a.key.api < b.key.api
	})
	var out []Finding
	for _, g := range groups {
		out = append(out, d.finding(env, g))
	}
	return out
}

func (d *throttled) finding(env *Env, g *throttleGroup) Finding {
	api := decode.Name(g.key.api)
	sev := Info
	if g.n >= d.minResponses || g.total >= d.minTotal {
		sev = Warning
	}
	servers := g.conns.serverLabels(env.Nodes)
	summary := fmt.Sprintf("client %q throttled on %s: %d response(s), %s in all (longest %s) by %s",
		g.key.clientID, api, g.n, text.Duration(g.total), text.Duration(g.max), text.List(servers, 3))
	how := "The broker sent each response at once and then stopped reading from the connection for the throttle " +
		"time (KIP-219, newer versions), so the client's next requests waited."
	if g.before && !g.after {
		how = "At these versions the broker held each response back for the throttle time, so the throttle shows " +
			"as latency."
	} else if g.before {
		how = "Older versions held the response back for the throttle time; newer ones (KIP-219) send it at once " +
			"and stop reading from the connection for that long."
	}
	expl := fmt.Sprintf("%d %s response(s) from %s to client id %q, between %s and %s, carried throttleTimeMs > 0: %s "+
		"in all, the longest %s. A broker throttles a client that exceeds its quota; for %s that is most likely %s. %s",
		g.n, api, strings.Join(servers, ", "), g.key.clientID, text.Clock(g.first), text.Clock(g.last),
		text.Duration(g.total), text.Duration(g.max), api, throttleQuota(g.key.api), how)
	if sev == Info {
		expl += fmt.Sprintf(" Below %d responses and %s in all this is a short burst, not sustained throttling.",
			d.minResponses, text.Duration(d.minTotal))
	}
	next := fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --describe --entity-type clients "+
		"--entity-name %q (and --entity-type users for the client's principal) shows the quotas that apply; the "+
		"broker metrics kafka.server:type=%s,client-id=%s (throttle-time, byte-rate or request-time) show how far "+
		"over it the client is. Raise the quota or spread the load.",
		g.key.clientID, throttleMetric(g.key.api), g.key.clientID)
	if d.dropped > 0 {
		expl += fmt.Sprintf(" (%d more throttled responses of other clients were not grouped: too many client ids.)", d.dropped)
	}
	versions := make([]int, 0, len(g.versions))
	for v := range g.versions {
		versions = append(versions, int(v))
	}
	sort.Ints(versions)
	ev := g.ev.list()
	if !opsHasPacket(ev, g.maxAt) {
		ev = append(ev, g.maxAt)
		sort.SliceStable(ev, func(i, j int) bool {
			if ev[i].File != ev[j].File {
				return ev[i].File < ev[j].File
			}
			return ev[i].Packet < ev[j].Packet
		})
	}
	return Finding{
		Severity: sev,
		Summary:  summary,
		First:    g.first,
		Last:     g.last,
		Conns:    g.conns.ids(),
		Nodes:    g.conns.nodes(env.Nodes),
		Counts: map[string]int64{
			"throttled_responses": g.n,
			"throttle_ms_total":   g.total.Milliseconds(),
			"throttle_ms_max":     g.max.Milliseconds(),
		},
		Fields: map[string]any{
			"client_id":      g.key.clientID,
			"api":            api,
			"clients":        g.conns.clients(),
			"servers":        g.conns.servers(),
			"quota":          throttleQuota(g.key.api),
			"versions":       versions,
			"after_response": g.after,
		},
		Evidence:    ev,
		Explanation: expl,
		Next:        next,
	}
}

// throttleQuota names the quota most likely behind a throttled API.
func throttleQuota(api int16) string {
	switch kmsg.Key(api) {
	case kmsg.Produce:
		return "producer_byte_rate"
	case kmsg.Fetch:
		return "consumer_byte_rate"
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions:
		return "controller_mutation_rate"
	}
	return "request_percentage"
}

func throttleMetric(api int16) string {
	switch kmsg.Key(api) {
	case kmsg.Produce:
		return "Produce"
	case kmsg.Fetch:
		return "Fetch"
	case kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.CreatePartitions:
		return "ControllerMutation"
	}
	return "Request"
}

func opsHasPacket(ev []Evidence, e Evidence) bool {
	for _, x := range ev {
		if x.File == e.File && x.Packet == e.Packet {
			return true
		}
	}
	return false
}
