package report

import (
	"time"
)

// ClientEntry is one entry of the client inventory (clients[]): the requests of
// one client id from one host, over all its connections.
type ClientEntry struct {
	Host     string `json:"host"`
	ClientID string `json:"client_id"`
	// TLS describes the TLS of its connections decrypted or met with a
	// key log (report.SetTLS): each version and suite once, "no SNI" and
	// what was not decrypted noted.
	TLS []string `json:"tls,omitempty"`
	// Software is what the client said it is in ApiVersions v3+
	// (ClientSoftwareName, ClientSoftwareVersion, KIP-511), with the
	// connections it said so on; empty when it never did.
	Software    []Software `json:"software"`
	Connections []int      `json:"connections"`
	// ConnectionsNotListed counts connections past the first
	// maxClientConns.
	ConnectionsNotListed int         `json:"connections_not_listed,omitempty"`
	Servers              []string    `json:"servers"`
	Roles                []string    `json:"roles"`
	File                 int         `json:"file"`
	FirstPacket          uint64      `json:"first_packet"`
	First                time.Time   `json:"first"`
	Last                 time.Time   `json:"last"`
	Requests             int64       `json:"requests"`
	APIs                 []ClientAPI `json:"apis"`
	// APIsNotListed counts the requests of API versions past the first
	// maxClientAPIs the client used.
	APIsNotListed int64 `json:"apis_not_listed,omitempty"`
	// Kafka40Ready is false when the client sent request versions that
	// Apache Kafka 4.0.0 removed (KIP-896; the apis marked).
	Kafka40Ready bool     `json:"kafka_4_0_ready"`
	Topics       []string `json:"topics"`
	// TopicsNotListed counts mentions of topics past the first
	// maxClientTopics (not told apart).
	TopicsNotListed int64 `json:"topics_not_listed,omitempty"`
	// Acks counts Produce requests by acks ("all" is -1).
	Acks map[string]int64 `json:"acks,omitempty"`
	// Compression counts the record batches produced by codec.
	Compression map[string]int64 `json:"compression,omitempty"`
	// Idempotent: batches carried a producer id, or the client asked
	// for one (InitProducerId, counted in InitProducerID); ProducerIDs
	// are those of its batches and of the brokers' answers.
	Idempotent     bool    `json:"idempotent"`
	InitProducerID int64   `json:"init_producer_id_requests,omitempty"`
	ProducerIDs    []int64 `json:"producer_ids,omitempty"`
	// Transactional: transactional ids in its requests, or batches
	// marked transactional.
	Transactional    bool     `json:"transactional"`
	TransactionalIDs []string `json:"transactional_ids,omitempty"`
	// Transactions counts the transaction requests: AddPartitionsToTxn,
	// AddOffsetsToTxn, TxnOffsetCommit, EndTxn (as "EndTxn commit" and
	// "EndTxn abort").
	Transactions map[string]int64 `json:"transactions,omitempty"`
}

// Software is a client's name and version as ApiVersions v3+ carries them.
type Software struct {
	Name        string `json:"name"`
	Version     string `json:"version"`
	Connections int    `json:"connections"`
}

// ClientAPI counts a client's requests of one API version, and says
// whether Apache Kafka 4.0 still serves that version.
type ClientAPI struct {
	Key      int16  `json:"key"`
	Name     string `json:"name"`
	Version  int16  `json:"version"`
	Requests int64  `json:"requests"`
	// RemovedIn40 marks a version Kafka 4.0 removed (KIP-896);
	// RestoredIn names the release that serves it again, if one does.
	RemovedIn40 bool   `json:"removed_in_kafka_4_0,omitempty"`
	RestoredIn  string `json:"restored_in,omitempty"`
}

// MaxClients is the most clients the inventory lists; the requests of
// the others are counted in Report.ClientsNotListed.
const MaxClients = 1000
