package detectors_test

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// logger logs the exchanges it is handed as "name:key" (the request's
// key, -1 if none).
type logger struct {
	name string
	log  *[]string
}

func (l logger) Findings(*detectors.Pass) []detectors.Finding { return nil }

func (l logger) Exchange(_ *detectors.Pass, x *detectors.Exchange) {
	*l.log = append(*l.log, fmt.Sprintf("%s:%d", l.name, x.Key()))
}

// keyedLogger is a logger that lists its keys.
type keyedLogger struct {
	logger
	keys []kmsg.Key
}

func (l keyedLogger) ExchangeKeys() []kmsg.Key { return l.keys }

// TestKeyedExchanges: a rule listing its API keys (KeyedExchangeHook) is
// handed the exchanges of those keys and those whose request was not
// captured (or whose response was decoded with another key, or whose key
// is beyond what rules may list), and no other; a rule listing none is
// handed every exchange; the rules are called in their order.
func TestKeyedExchanges(t *testing.T) {
	var log []string
	mk := func(name string, keys ...kmsg.Key) *detectors.Analyzer {
		return detectors.Define(detectors.Analyzer{Name: name, Doc: "logs exchanges"}, noParams{},
			func(noParams) detectors.Rule {
				if keys == nil {
					return logger{name, &log}
				}
				return keyedLogger{logger{name, &log}, keys}
			})
	}
	s, err := detectors.NewSet([]*detectors.Analyzer{mk("produce", kmsg.Produce), mk("all"),
		mk("fetch-metadata", kmsg.Fetch, kmsg.Metadata)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	c := flows.MakeConn(netip.MustParseAddrPort("10.0.1.1:40000"), netip.MustParseAddrPort("10.0.0.1:9092"))
	msg := func(key kmsg.Key) *flows.Message { return &flows.Message{Conn: &c.ConnInfo, Key: int16(key)} }
	for _, x := range []flows.Exchange{
		{Req: msg(kmsg.Produce), Resp: msg(kmsg.Produce)},
		{Req: msg(kmsg.Fetch), Unanswered: true},
		{Req: msg(kmsg.Metadata), Resp: msg(kmsg.Metadata)},
		{Req: msg(kmsg.ApiVersions), Resp: msg(kmsg.ApiVersions)},
		{Resp: msg(kmsg.Produce)},                           // its request not captured
		{Req: msg(kmsg.Heartbeat), Resp: msg(kmsg.Produce)}, // not one key
		{Req: msg(200), Resp: msg(200)},
	} {
		x.Conn = c
		s.OnExchange(&x)
	}
	want := []string{
		"produce:0", "all:0",
		"all:1", "fetch-metadata:1",
		"all:3", "fetch-metadata:3",
		"all:18",
		"produce:-1", "all:-1", "fetch-metadata:-1",
		"produce:12", "all:12", "fetch-metadata:12",
		"produce:200", "all:200", "fetch-metadata:200",
	}
	if !reflect.DeepEqual(log, want) {
		t.Errorf("handed\n%q\nwant\n%q", log, want)
	}
}
