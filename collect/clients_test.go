package collect

import (
	"bytes"
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/flows/flowstest"
	"github.com/kfsniff/kfsniff/report"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// inventoryRun delivers events to a Collector as the pipeline does (node
// identities and topic names learned first), numbering packets.
type inventoryRun struct {
	t     *testing.T
	col   *Collector
	dl    *flows.Delivery
	conns []*flows.Conn
	pkt   uint64
	corr  int32
}

func newInventoryRun(t *testing.T) *inventoryRun {
	c := NewCollector()
	return &inventoryRun{t: t, col: c, dl: flows.NewDelivery(c)}
}

func (r *inventoryRun) conn(client, server string) *flows.Conn {
	c := flows.MakeConn(netip.MustParseAddrPort(client), netip.MustParseAddrPort(server))
	r.conns = append(r.conns, c)
	r.dl.Deliver(&flows.Event{Conn: &flows.ConnEvent{Kind: flows.ConnOpened, Conn: c, Client: c.Client, Server: c.Server, Time: t0}})
	return c
}

// call sends req from c as clientID, answered by resp if not nil.
func (r *inventoryRun) call(c *flows.Conn, clientID string, req kmsg.Request, resp kmsg.Response) {
	r.corr++
	r.pkt++
	at := t0.Add(time.Duration(r.pkt) * time.Millisecond)
	q := flowstest.MakeRequest(c, at, r.corr, clientID, req)
	q.Packet, q.FirstPacket = r.pkt, r.pkt
	r.dl.Deliver(&flows.Event{Req: q})
	if resp == nil {
		return
	}
	r.pkt++
	a := flowstest.MakeResponse(q, at.Add(time.Millisecond), resp)
	a.Packet, a.FirstPacket = r.pkt, r.pkt
	r.dl.Deliver(&flows.Event{X: &flows.Exchange{Conn: c, Req: q, Resp: a}})
}

func (r *inventoryRun) report() *report.Report {
	return r.col.Build(nil, &flows.Stats{}, r.conns, r.dl.Nodes(), nil)
}

func apiVersions(name, version string) *kmsg.ApiVersionsRequest {
	q := kmsg.NewPtrApiVersionsRequest()
	q.Version, q.ClientSoftwareName, q.ClientSoftwareVersion = 3, name, version
	return q
}

// batch is a record batch (magic 2) of one record with a codec's bits and
// a producer id, its CRC right.
func batch(codec int16, producerID int64, transactional bool) []byte {
	b := kmsg.RecordBatch{Magic: 2, Attributes: codec, ProducerID: producerID, ProducerEpoch: 0, FirstSequence: -1,
		FirstTimestamp: t0.UnixMilli(), MaxTimestamp: t0.UnixMilli(), NumRecords: 1, Records: []byte{0}}
	if producerID >= 0 {
		b.FirstSequence = 0
	}
	if transactional {
		b.Attributes |= 0x10
	}
	raw := b.AppendTo(nil)
	binary.BigEndian.PutUint32(raw[8:], uint32(len(raw)-12))
	binary.BigEndian.PutUint32(raw[17:], crc32.Checksum(raw[21:], crc32.MakeTable(crc32.Castagnoli)))
	return raw
}

func produce(version, acks int16, txnID *string, topic string, records []byte) *kmsg.ProduceRequest {
	q := kmsg.NewPtrProduceRequest()
	q.Version, q.Acks, q.TimeoutMillis, q.TransactionID = version, acks, 30000, txnID
	t := kmsg.NewProduceRequestTopic()
	t.Topic = topic
	p := kmsg.NewProduceRequestTopicPartition()
	p.Records = records
	t.Partitions = []kmsg.ProduceRequestTopicPartition{p}
	q.Topics = []kmsg.ProduceRequestTopic{t}
	return q
}

// TestInventory: what an operator reads in clients[] for a transactional
// producer on two connections that still sends one old Produce, a consumer
// fetching by topic id, and a group member on an old JoinGroup.
func TestInventory(t *testing.T) {
	r := newInventoryRun(t)
	c1 := r.conn("10.0.0.5:40000", "10.0.0.1:9092")
	c2 := r.conn("10.0.0.5:40001", "10.0.0.2:9092")
	txn := "billing-tx"

	r.call(c1, "billing", apiVersions("apache-kafka-java", "2.0.1"), nil)
	r.call(c2, "billing", apiVersions("apache-kafka-java", "2.0.1"), nil)
	r.call(c1, "billing", produce(2, 1, nil, "invoices", batch(0, -1, false)), nil)
	ip := kmsg.NewPtrInitProducerIDRequest()
	ip.Version, ip.TransactionalID = 4, &txn
	ipr := kmsg.NewPtrInitProducerIDResponse()
	ipr.Version, ipr.ProducerID = 4, 7000
	r.call(c1, "billing", ip, ipr)
	add := kmsg.NewPtrAddPartitionsToTxnRequest()
	add.Version, add.TransactionalID, add.ProducerID = 3, txn, 7000
	r.call(c1, "billing", add, nil)
	r.call(c2, "billing", produce(9, -1, &txn, "invoices", batch(4, 7000, true)), nil)
	r.call(c2, "billing", produce(9, -1, &txn, "ledger", batch(4, 7000, true)), nil)
	end := kmsg.NewPtrEndTxnRequest()
	end.Version, end.TransactionalID, end.Commit = 3, txn, true
	r.call(c1, "billing", end, nil)

	// A consumer on another host learns a topic id from Metadata, then
	// fetches by id.
	c3 := r.conn("10.0.0.9:50000", "10.0.0.1:9092")
	id := [16]byte{1, 2, 3}
	mq := kmsg.NewPtrMetadataRequest()
	mq.Version = 12
	mr := kmsg.NewPtrMetadataResponse()
	mr.Version = 12
	mt := kmsg.NewMetadataResponseTopic()
	name := "payments"
	mt.Topic, mt.TopicID = &name, id
	mr.Topics = []kmsg.MetadataResponseTopic{mt}
	r.call(c3, "reader", mq, mr)
	fq := kmsg.NewPtrFetchRequest()
	fq.Version, fq.ReplicaID = 13, -1
	ft := kmsg.NewFetchRequestTopic()
	ft.TopicID = id
	ft.Partitions = []kmsg.FetchRequestTopicPartition{kmsg.NewFetchRequestTopicPartition()}
	fq.Topics = []kmsg.FetchRequestTopic{ft}
	r.call(c3, "reader", fq, nil)
	jq := kmsg.NewPtrJoinGroupRequest()
	jq.Version, jq.Group, jq.ProtocolType = 1, "readers", "consumer"
	r.call(c3, "reader", jq, nil)

	rep := r.report()
	if len(rep.Clients) != 2 {
		t.Fatalf("%d clients, want 2: %+v", len(rep.Clients), rep.Clients)
	}
	billing, reader := rep.Clients[0], rep.Clients[1]

	if billing.Host != "10.0.0.5" || billing.ClientID != "billing" {
		t.Errorf("first client %s %q, want 10.0.0.5 billing", billing.Host, billing.ClientID)
	}
	if want := []report.Software{{Name: "apache-kafka-java", Version: "2.0.1", Connections: 2}}; !reflect.DeepEqual(billing.Software, want) {
		t.Errorf("software %+v, want %+v", billing.Software, want)
	}
	if !reflect.DeepEqual(billing.Connections, []int{1, 2}) || !reflect.DeepEqual(billing.Servers, []string{"10.0.0.1:9092", "10.0.0.2:9092"}) {
		t.Errorf("connections %v to %v, want [1 2] to both brokers", billing.Connections, billing.Servers)
	}
	if billing.Requests != 8 {
		t.Errorf("%d requests, want 8", billing.Requests)
	}
	var apis []string
	for _, a := range billing.APIs {
		s := a.Name + " v" + strconv.Itoa(int(a.Version)) + " x" + strconv.FormatInt(a.Requests, 10)
		if a.RemovedIn40 {
			s += " removed"
		}
		apis = append(apis, s)
	}
	if want := []string{"Produce v2 x1 removed", "Produce v9 x2", "ApiVersions v3 x2", "InitProducerID v4 x1",
		"AddPartitionsToTxn v3 x1", "EndTxn v3 x1"}; !reflect.DeepEqual(apis, want) {
		t.Errorf("apis %v, want %v", apis, want)
	}
	if billing.Kafka40Ready {
		t.Error("a client sending Produce v2 is ready for Kafka 4.0")
	}
	if !reflect.DeepEqual(billing.Topics, []string{"invoices", "ledger"}) {
		t.Errorf("topics %v", billing.Topics)
	}
	if !reflect.DeepEqual(billing.Acks, map[string]int64{"1": 1, "all": 2}) {
		t.Errorf("acks %v, want 1 once and all twice", billing.Acks)
	}
	if !reflect.DeepEqual(billing.Compression, map[string]int64{"none": 1, "zstd": 2}) {
		t.Errorf("compression %v", billing.Compression)
	}
	if !billing.Idempotent || billing.InitProducerID != 1 || !reflect.DeepEqual(billing.ProducerIDs, []int64{7000}) {
		t.Errorf("idempotent %v, InitProducerId %d, producer ids %v", billing.Idempotent, billing.InitProducerID, billing.ProducerIDs)
	}
	if !billing.Transactional || !reflect.DeepEqual(billing.TransactionalIDs, []string{txn}) {
		t.Errorf("transactional %v ids %v", billing.Transactional, billing.TransactionalIDs)
	}
	if want := map[string]int64{"AddPartitionsToTxn": 1, "EndTxn commit": 1}; !reflect.DeepEqual(billing.Transactions, want) {
		t.Errorf("transactions %v, want %v", billing.Transactions, want)
	}

	if len(reader.Software) != 0 || !reflect.DeepEqual(reader.Topics, []string{"payments"}) {
		t.Errorf("reader: software %v, topics %v: want none, payments (named from Metadata)", reader.Software, reader.Topics)
	}
	if reader.Idempotent || reader.Transactional || reader.Acks != nil {
		t.Errorf("reader produced nothing, yet idempotent %v transactional %v acks %v", reader.Idempotent, reader.Transactional, reader.Acks)
	}
	var join report.ClientAPI
	for _, a := range reader.APIs {
		if a.Name == "JoinGroup" {
			join = a
		}
	}
	if !join.RemovedIn40 || join.RestoredIn != "4.0.1" || reader.Kafka40Ready {
		t.Errorf("JoinGroup v1: %+v, ready %v: want removed in 4.0.0, back in 4.0.1", join, reader.Kafka40Ready)
	}

	var text bytes.Buffer
	if err := report.WriteText(&text, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"Clients (2; Kafka 4.0: 2 use request versions it removed, KIP-896)",
		`10.0.0.5 client-id "billing"  software apache-kafka-java 2.0.1`,
		"Kafka 4.0: not ready: Produce v2 (4.0 serves v3 and up)",
		"JoinGroup v1 (4.0.0 only: back in 4.0.1 and 4.1)",
		"topics: invoices, ledger",
		`transactional yes (transactional ids "billing-tx")`,
		`software not told (no ApiVersions v3+ seen)`,
	} {
		if !strings.Contains(text.String(), want) {
			t.Errorf("text report lacks %q:\n%s", want, text.String())
		}
	}
}

// TestInventoryBounds: a capture with more clients, versions and topics
// than the inventory lists says how much it left out.
func TestInventoryBounds(t *testing.T) {
	r := newInventoryRun(t)
	c := r.conn("10.0.0.5:40000", "10.0.0.1:9092")
	at := t0
	send := func(id string, key, version int16) {
		r.pkt++
		r.dl.Deliver(&flows.Event{Req: &flows.Message{Conn: &c.ConnInfo, Key: key, Version: version, Client: cluster.Client{ID: id}, Time: at, Packet: r.pkt}})
	}
	for i := range maxClients + 5 {
		send("app-"+strconv.Itoa(i), 18, 0)
	}
	for v := range maxClientAPIs + 3 {
		send("app-0", 0, int16(v))
	}
	mq := kmsg.NewPtrMetadataRequest()
	mq.Version = 12
	for i := range maxClientTopics + 20 {
		name := "t" + strconv.Itoa(i)
		mq.Topics = append(mq.Topics, kmsg.MetadataRequestTopic{Topic: &name})
	}
	r.call(c, "app-1", mq, nil)
	r.call(c, "app-1", mq, nil)

	rep := r.report()
	if len(rep.Clients) != maxClients || rep.ClientsNotListed != 5 {
		t.Errorf("%d clients listed, requests of %d not: want %d and 5", len(rep.Clients), rep.ClientsNotListed, maxClients)
	}
	var app0, app1 *report.ClientEntry
	for i := range rep.Clients {
		switch rep.Clients[i].ClientID {
		case "app-0":
			app0 = &rep.Clients[i]
		case "app-1":
			app1 = &rep.Clients[i]
		}
	}
	if app0 == nil || app1 == nil {
		t.Fatal("app-0 or app-1 not listed")
	}
	// ApiVersions v0 and Produce v0.. fill the table: the last 4 versions
	// do not fit.
	if len(app0.APIs) != maxClientAPIs || app0.APIsNotListed != 4 || app0.Requests != 1+maxClientAPIs+3 {
		t.Errorf("app-0: %d versions listed, %d requests not, %d requests: want %d, 4, %d", len(app0.APIs), app0.APIsNotListed, app0.Requests, maxClientAPIs, 1+maxClientAPIs+3)
	}
	if len(app1.Topics) != maxClientTopics || app1.TopicsNotListed != 40 {
		t.Errorf("app-1: %d topics listed, %d mentions not: want %d and 40 (20 topics twice)", len(app1.Topics), app1.TopicsNotListed, maxClientTopics)
	}
	var text bytes.Buffer
	report.WriteText(&text, rep)
	if !strings.Contains(text.String(), "(5 requests of further clients not listed: more than 1000 clients)") {
		t.Errorf("the text report does not say clients were left out")
	}
}
