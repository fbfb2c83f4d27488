package report

import (
	"time"
)

// Timeline is the capture's traffic over time (the HTML report's charts):
// Buckets buckets of Width each from Start. Counts are per bucket.
type Timeline struct {
	Start   time.Time
	Width   time.Duration
	Buckets int
	// APIs are by API key, in key order; a key beyond Kafka's range is
	// in the line of Key -1 ("other").
	APIs []APILine
	// Brokers are the servers in order of their first request; past
	// the bound, the rest share one line with Server "other".
	Brokers []BrokerLine
	// ToServer and ToClient are the bytes of Kafka frames (requests,
	// responses) per bucket.
	ToServer, ToClient []int64
}

// APILine is one API's requests, error responses and latency over time.
type APILine struct {
	Key      int16
	Name     string
	Requests []int64
	Errors   []int64
	// Latency has a point for each bucket with responses.
	Latency []LatencyPoint
}

// LatencyPoint is the latency of the responses of one bucket, within
// about 10 % (the middle of a bin a quarter of a power of two wide).
type LatencyPoint struct {
	Bucket    int
	Responses int64
	P50, P99  float64 // milliseconds
}

// BrokerLine is one server's requests and error responses over time.
type BrokerLine struct {
	Server string
	// Node is the node id learned for the server, -1 if none.
	Node     int32
	Requests []int64
	Errors   []int64
}
