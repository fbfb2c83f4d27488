package pipeline

import (
	"path/filepath"
	"testing"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/fixtures/record"
	"github.com/kfsniff/kfsniff/flows"
)

// exchangesByConn keeps every exchange's versions and outcome per
// connection, in order.
type exchangesByConn map[int][]apiVersionsStep

type apiVersionsStep struct {
	key, version, layout int16 // layout: the response body's version, -1 if none
	errors               []flows.ErrorCount
	decodeErr            error
	paired               bool
	retryMax             int16 // for a refusal, the highest version it names
}

func (e exchangesByConn) OnExchange(x *flows.Exchange) {
	if x.Req == nil {
		return
	}
	s := apiVersionsStep{key: x.Req.Key, version: x.Req.Version, layout: -1, retryMax: -1}
	if m := x.Resp; m != nil {
		s.paired, s.errors, s.decodeErr = true, m.ErrorCodes, m.Err
		if m.Resp != nil {
			s.layout = m.Resp.GetVersion()
		}
		if r, ok := m.Resp.(*kmsg.ApiVersionsResponse); ok && len(r.ApiKeys) == 1 && r.ApiKeys[0].ApiKey == 18 {
			s.retryMax = r.ApiKeys[0].MaxVersion
		}
	}
	e[x.Conn.ID] = append(e[x.Conn.ID], s)
}

// TestRecordedApiVersionsFallback: kgo recorded against a broker that knows
// ApiVersions up to v3. Every refusal of kgo's v5 is decoded (in the v0
// layout) with UNSUPPORTED_VERSION, and is followed on its connection by
// the retry at the version the refusal named, paired with a normal
// response in its own layout; connections kgo opens later to a broker it
// knows begin at v3. Counts as the proxy's framer read them.
func TestRecordedApiVersionsFallback(t *testing.T) {
	dir := filepath.Join("..", "fixtures", "pcaps")
	const name = "recorded-kgo-kfake-apiversions-fallback"
	side, err := record.ReadSidecar(filepath.Join(dir, name+".counts.json"))
	if err != nil {
		t.Fatal(err)
	}
	if side.Counts.UnsupportedVersion == 0 {
		t.Fatalf("sidecar records no refused ApiVersions: %+v", side.Counts)
	}
	byConn := exchangesByConn{}
	r := runFile(t, filepath.Join(dir, name+".pcap"), byConn)
	compareRecorded(t, r, side.Counts)

	var refusals, retries, direct int
	for id, steps := range byConn {
		if len(steps) == 0 || steps[0].key != 18 {
			t.Errorf("connection %d does not begin with ApiVersions: %+v", id, steps)
			continue
		}
		first := steps[0]
		if first.decodeErr != nil || !first.paired {
			t.Errorf("connection %d: first ApiVersions %+v", id, first)
			continue
		}
		if len(first.errors) == 0 {
			direct++ // kgo knew this broker's versions already
			if first.version != 3 || first.layout != 3 {
				t.Errorf("connection %d begins with ApiVersions v%d answered in v%d, want v3 in v3", id, first.version, first.layout)
			}
			continue
		}
		refusals++
		if first.version != 5 || first.layout != 0 || len(first.errors) != 1 ||
			first.errors[0] != (flows.ErrorCount{Code: 35, Count: 1}) || first.retryMax != 3 {
			t.Errorf("connection %d: refusal %+v, want ApiVersions v5 answered in the v0 layout, UNSUPPORTED_VERSION once, naming v3", id, first)
			continue
		}
		if len(steps) < 2 {
			t.Errorf("connection %d: no retry after the refusal", id)
			continue
		}
		retry := steps[1]
		if retry.key != 18 || retry.version != first.retryMax || !retry.paired || retry.layout != retry.version ||
			len(retry.errors) != 0 || retry.decodeErr != nil {
			t.Errorf("connection %d: after the refusal %+v, want ApiVersions v%d paired with a normal answer", id, retry, first.retryMax)
			continue
		}
		retries++
	}
	if refusals != side.Counts.UnsupportedVersion || retries != refusals {
		t.Errorf("%d refusals, %d retries; want %d of each (sidecar)", refusals, retries, side.Counts.UnsupportedVersion)
	}
	if direct == 0 {
		t.Errorf("no connection begins at v3: kgo remembers a broker's versions, so its later connections should")
	}
	// The traffic after the fallback is at the broker's versions (Kafka
	// 3.6), below what kgo asks of a newer broker.
	for _, a := range r.APIs {
		if want, ok := map[int16]int16{0: 9, 1: 15, 3: 12}[a.Key]; ok && a.Version != want {
			t.Errorf("%s v%d, want v%d (Kafka %s)", a.Name, a.Version, want, side.Sent.Kafka)
		}
	}
}
