package tui

import (
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/fixtures/gen"
	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// fieldNames lists the exported field names reachable in v (every element
// of every array), except kmsg's UnknownTags.
func fieldNames(v reflect.Value, into map[string]bool) {
	switch v.Kind() {
	case reflect.Pointer:
		if !v.IsNil() {
			fieldNames(v.Elem(), into)
		}
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			f := v.Type().Field(i)
			if !f.IsExported() || f.Type == reflect.TypeOf(kmsg.Tags{}) {
				continue
			}
			into[f.Name] = true
			fieldNames(v.Field(i), into)
		}
	case reflect.Slice, reflect.Array:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return
		}
		for i := 0; i < v.Len(); i++ {
			fieldNames(v.Index(i), into)
		}
	}
}

// treeHas reports whether some line of the tree is the field name: "Name",
// "Name: value" or "Name (n)...".
func treeHas(tree *treeNode, name string) bool {
	found := false
	tree.Walk(0, func(n *treeNode, _ int) {
		if n.Text == name || strings.HasPrefix(n.Text, name+": ") || strings.HasPrefix(n.Text, name+" (") {
			found = true
		}
	})
	return found
}

// TestDetailTreeEveryField builds the detail tree of every API kmsg knows,
// at its highest version, with every field filled, and checks that every
// field of the decoded request and response has its line.
func TestDetailTreeEveryField(t *testing.T) {
	batch := gen.RecordBatch(0, time.Unix(1700000000, 0), []gen.Record{{Value: []byte("v")}})
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if !decode.KnownKey(key) {
			continue
		}
		v := decode.MaxVersion(key)
		name := decode.Name(key)
		t.Run(name, func(t *testing.T) {
			f := &kmsgtest.Filler{Batch: batch}
			req, resp := f.Request(key, v), f.Response(key, v)
			if f.Err != nil {
				t.Skip(f.Err)
			}
			clientID := "c"
			reqFrame := kmsgtest.AppendRequestFrame(nil, 7, &clientID, req)[4:]
			respFrame := kmsgtest.AppendResponseFrame(nil, 7, resp)[4:]
			x := &Exchange{Key: key, Version: v, Correlation: 7, ReqPacket: 1, RespPacket: 2,
				ReqSize: int32(len(reqFrame) + 4), RespSize: int32(len(respFrame) + 4)}
			tree := detailTree(x, reqFrame, respFrame)
			text := tree.String()
			if strings.Contains(text, "does not decode") || strings.Contains(text, "not decoded") {
				t.Fatalf("tree reports a decoding failure:\n%s", text)
			}
			// Compare with what kmsg itself decodes from the frames.
			h, _ := decode.ParseRequestHeader(reqFrame)
			dreq, err := decode.DecodeRequest(key, v, reqFrame[h.Len:])
			if err != nil {
				t.Fatal(err)
			}
			hl, _ := decode.ResponseHeaderLen(respFrame, key, v)
			dresp, err := decode.DecodeResponse(key, v, respFrame[hl:])
			if err != nil {
				t.Fatal(err)
			}
			for side, msg := range map[string]any{"request": dreq, "response": dresp} {
				names := map[string]bool{}
				fieldNames(reflect.ValueOf(msg), names)
				for n := range names {
					if !treeHas(tree, n) {
						t.Errorf("%s field %s missing from the tree:\n%s", side, n, text)
					}
				}
			}
		})
	}
}

// TestDetailTreeFetch checks the values of a real Fetch v17 exchange of the
// observer loop: the raft fetch and its NOT_LEADER_OR_FOLLOWER answer
// naming the leader.
func TestDetailTreeFetch(t *testing.T) {
	m, _ := analyse(t, scenario("observer-fetch-loop.pcap"), ModelConfig{})
	xs := m.AppendExchanges(nil, 1, 0)
	x := xs[0]
	req, resp := m.Frames(&x)
	text := detailTree(&x, req, resp).String()
	for _, want := range []string{
		"Fetch v17 corr " + strconv.Itoa(int(x.Correlation)),
		"Request: packet " + strconv.FormatUint(x.ReqPacket, 10),
		`ClientID: "raft-client-68"`,
		"ReplicaState\n",
		"ID: 68",
		"MaxWaitMillis: 500",
		"[0] topic id AAAAAAAAAAAAAAAAAAAAAQ (__cluster_metadata)",
		"FetchOffset: 35678651",
		"Response: packet " + strconv.FormatUint(x.RespPacket, 10),
		"latency ",
		"ErrorCode: 6 NOT_LEADER_OR_FOLLOWER",
		"CurrentLeader\n",
		"LeaderID: 1003",
		"LeaderEpoch: 643",
		"Brokers (1)",
		`Host: "10.30.7.85"`,
		"Port: 8081",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
	}
}

// TestDetailTreeApiVersionsRefused shows kgo's ApiVersions v5 refused by a
// broker that knows v3 (the recorded fixture): the body read in the v0
// layout, with the error and the version to retry with, then the retry.
func TestDetailTreeApiVersionsRefused(t *testing.T) {
	m, _ := analyse(t, filepath.Join("..", "fixtures", "pcaps", "recorded-kgo-kfake-apiversions-fallback.pcap"), ModelConfig{})
	xs := m.AppendExchanges(nil, 0, 0) // every connection
	var refused, retried int
	for i := range xs {
		x := &xs[i]
		if x.Key != 18 {
			continue
		}
		req, resp := m.Frames(x)
		text := detailTree(x, req, resp).String()
		if strings.Contains(text, "does not decode") {
			t.Errorf("ApiVersions v%d corr %d: tree reports a decoding failure:\n%s", x.Version, x.Correlation, text)
		}
		switch x.Version {
		case 5:
			refused++
			for _, want := range []string{
				"ApiVersions v5 corr 0",
				"body in the v0 layout: the broker refused v5 (UNSUPPORTED_VERSION)",
				"ErrorCode: 35 UNSUPPORTED_VERSION",
				"ApiKeys (1)",
				"ApiKey: 18",
				"MaxVersion: 3",
			} {
				if !strings.Contains(text, want) {
					t.Errorf("tree lacks %q:\n%s", want, text)
				}
			}
			if x.ErrorCode != 35 {
				t.Errorf("exchange list error %d, want 35", x.ErrorCode)
			}
		case 3:
			retried++
			if strings.Contains(text, "layout") || x.ErrorCode != 0 {
				t.Errorf("the v3 answer is in its own layout, without error:\n%s", text)
			}
		}
	}
	if refused == 0 || retried <= refused {
		t.Errorf("%d refused, %d at v3: want refusals, each retried, and later connections at v3", refused, retried)
	}
}

// TestDetailTreeBatches shows a Produce request's batches with their CRC
// status: one verifies, one was corrupted.
func TestDetailTreeBatches(t *testing.T) {
	good := gen.RecordBatch(100, time.Unix(1700000000, 0), []gen.Record{{Value: []byte("a")}, {Value: []byte("b")}})
	bad := gen.RecordBatch(102, time.Unix(1700000000, 0), []gen.Record{{Value: []byte("c")}})
	bad[len(bad)-1] ^= 0xff // a flipped bit in the records: the CRC no longer matches
	req := kmsg.NewPtrProduceRequest()
	req.SetVersion(9)
	req.Acks = -1
	req.Topics = []kmsg.ProduceRequestTopic{{Topic: "orders", Partitions: []kmsg.ProduceRequestTopicPartition{
		{Partition: 3, Records: append(append([]byte{}, good...), bad...)},
	}}}
	id := "producer-1"
	frame := kmsgtest.AppendRequestFrame(nil, 1, &id, req)[4:]
	x := &Exchange{Key: 0, Version: 9, Correlation: 1, ReqPacket: 5, ReqSize: int32(len(frame) + 4), State: Unanswered}
	tree := detailTree(x, frame, nil)
	text := tree.String()
	for _, want := range []string{
		"[0] topic \"orders\"",
		"[0] partition 3",
		"Records: " + strconv.Itoa(len(good)+len(bad)) + " bytes, 2 batches, 1 with a bad CRC",
		"batch 0: offsets 100..101, 2 records",
		"CRC ", " ok",
		"batch 1: offsets 102..102, 1 records",
		"MISMATCH",
		"Response: none (unanswered)",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
	}
	var kinds []nodeKind
	tree.Walk(0, func(n *treeNode, _ int) {
		if strings.HasPrefix(n.Text, "CRC ") {
			kinds = append(kinds, n.Kind)
		}
	})
	if len(kinds) != 2 || kinds[0] != kindGood || kinds[1] != kindBad {
		t.Errorf("CRC lines coloured %v, want good then bad", kinds)
	}
}

// TestDetailTreeNotKept: a frame cut to the kept bytes, or no longer kept,
// says so instead of showing a wrong decoding.
func TestDetailTreeNotKept(t *testing.T) {
	req := kmsg.NewPtrMetadataRequest()
	req.SetVersion(12)
	id := "c"
	frame := kmsgtest.AppendRequestFrame(nil, 1, &id, req)[4:]
	x := &Exchange{Key: 3, Version: 12, ReqPacket: 1, RespPacket: 2, ReqSize: int32(len(frame) + 4), RespSize: 100}
	text := detailTree(x, frame[:12], nil).String()
	for _, want := range []string{"body not decoded: only the first 12 of", "Response: packet 2, 100 bytes: frame no longer kept"} {
		if !strings.Contains(text, want) {
			t.Errorf("tree lacks %q:\n%s", want, text)
		}
	}
}

func TestHexDump(t *testing.T) {
	frame := []byte("\x00\x12\x00\x03\x00\x00\x00\x01[red]evil\x1b[0m")
	var b strings.Builder
	hexDump(&b, frame, len(frame), 1<<20)
	want := "" +
		"0000  00 00 00 15 00 12 00 03  00 00 00 01 5b 72 65 64  |............[red|\n" +
		"0010  5d 65 76 69 6c 1b 5b 30  6d                       |]evil.[0m|\n"
	if b.String() != want {
		t.Errorf("hex dump:\n%s\nwant:\n%s", b.String(), want)
	}
	b.Reset()
	hexDump(&b, frame, 1000, 8)
	if !strings.HasSuffix(b.String(), "… 12 of 1004 bytes shown\n") || strings.Count(b.String(), "\n") != 2 {
		t.Errorf("cut dump:\n%s", b.String())
	}
}

// detailTree is detailTreeOf without the credentials.
func detailTree(x *Exchange, req, resp []byte) *treeNode {
	return detailTreeOf(x, req, resp, false)
}
