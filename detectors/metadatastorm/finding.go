package metadatastorm

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors/internal/burst"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client id and host's metadata storm. Its exported fields
// are the finding's "fields".
type Finding struct {
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Servers    []string `json:"servers"`
	// StormS is the longest storm's length, StormRate its requests per
	// second, PeakPerSecond the most Metadata requests in one second.
	StormS            float64 `json:"storm_s"`
	StormRate         float64 `json:"storm_rate"`
	PeakPerSecond     int     `json:"peak_per_second"`
	Ongoing           bool    `json:"ongoing"`
	AllTopicsShare    float64 `json:"all_topics_share"`
	MeanResponseBytes int64   `json:"mean_response_bytes"`
	MaxResponseBytes  int     `json:"max_response_bytes"`

	Storm       burst.Episode
	PeakAt      time.Time
	Requests    int64
	OnError     int64
	Conns       int
	First, Last time.Time
	Params      Params
	Dropped     int64

	// The counts: the client's Metadata requests, those in the worst
	// storm, those asking for all topics, those after an error answer;
	// the bytes of their responses; storms; connections.
	MetadataRequests    int64 `count:"metadata_requests"`
	StormRequests       int64 `count:"storm_requests"`
	AllTopicsRequests   int64 `count:"all_topics_requests"`
	RefreshesAfterError int64 `count:"refreshes_after_error"`
	ResponseBytes       int64 `count:"response_bytes"`
	Storms              int64 `count:"storms"`
	Connections         int64 `count:"connections"`
}

func share(n, of int64) float64 {
	if of == 0 {
		return 0
	}
	return math.Round(float64(n)/float64(of)*1000) / 1000
}

func mean(sum, n int64) int64 {
	if n == 0 {
		return 0
	}
	return sum / n
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("metadata storm from client %q on %s: %s in %s (peak %d/s), %.0f%% for all topics",
		f.ClientID, f.ClientHost, text.Plural(f.Storm.Events, "Metadata request", "Metadata requests"),
		text.Duration(f.Storm.Duration()), f.PeakPerSecond, f.AllTopicsShare*100)
	if f.Ongoing {
		s += " (still going on at the end)"
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Client id %q on %s sent %s between %s and %s over %s to %s; from %s to %s it sent %s "+
		"(%.1f a second, at most %d in the second from %s), beyond the refreshes that error responses explain "+
		"(%d of its requests came less than %s after an error response and are not counted in the storm). ",
		f.ClientID, f.ClientHost, text.Plural(f.Requests, "Metadata request", "Metadata requests"), text.Clock(f.First), text.Clock(f.Last),
		text.Plural(f.Conns, "connection", "connections"), text.List(f.Servers, 3),
		text.Clock(f.Storm.Start), text.Clock(f.Storm.End), text.Plural(f.Storm.Events, "request", "requests"),
		f.StormRate, f.PeakPerSecond, text.Clock(f.PeakAt), f.OnError, text.Duration(f.Params.ExplainWithin))
	fmt.Fprintf(&b, "%.0f%% asked for all topics; responses averaged %d bytes (the largest %d). ", f.AllTopicsShare*100,
		f.MeanResponseBytes, f.MaxResponseBytes)
	b.WriteString("A client needs Metadata at start, every metadata.max.age.ms (5 minutes by default) and once after " +
		"an error that says its view is stale; this many is a client refreshing per partition or per request " +
		"(sarama before Metadata.SingleFlight, IBM/sarama 3224), many producers created and closed in a loop, or a " +
		"client retrying a topic that does not exist. Every request costs the broker a request-handler thread and a " +
		"response naming every partition asked for, so a storm from many producers grows with producers x partitions " +
		"and can starve the brokers' other work.")
	if f.Storms > 1 {
		fmt.Fprintf(&b, " There were %d storms; this is the longest.", f.Storms)
	}
	if f.Ongoing {
		b.WriteString(" It was still going on when the capture ended.")
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (Metadata requests of %d further clients were not followed: too many clients.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("On the brokers, kafka.network:type=RequestMetrics,name=RequestsPerSec,request=Metadata and "+
		"kafka.network:type=RequestMetrics,name=TotalTimeMs,request=Metadata show the load, and "+
		"kafka.server:type=KafkaRequestHandlerPool,name=RequestHandlerAvgIdlePercent whether it starves the handlers. "+
		"On %s, find the processes with client id %q (ss -tnp) and check their metadata settings (metadata.max.age.ms, "+
		"retry.backoff.ms; sarama: Metadata.RefreshFrequency, Metadata.Retry.Backoff and Metadata.SingleFlight), "+
		"whether they create a producer per message, and whether they ask for topics that do not exist "+
		"(kafka-topics.sh --bootstrap-server <broker> --list). A request quota (kafka-configs.sh --alter "+
		"--entity-type clients --entity-name <client id> --add-config request_percentage=...) bounds the damage.",
		f.ClientHost, f.ClientID)
}
