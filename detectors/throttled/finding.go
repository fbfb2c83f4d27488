package throttled

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client id throttled on one API. Its exported fields are
// the finding's "fields".
type Finding struct {
	ClientID      string   `json:"client_id"`
	API           string   `json:"api"`
	Clients       []string `json:"clients"`
	Servers       []string `json:"servers"`
	Quota         string   `json:"quota"`
	Versions      []int    `json:"versions"`
	AfterResponse bool     `json:"after_response"`
	// HeldS is how long the client id was held up, in seconds: the time
	// its throttle waits covered. Ongoing: its last response of the API
	// in the capture was throttled.
	HeldS   float64 `json:"held_s"`
	Ongoing bool    `json:"ongoing"`

	// The finding's counts: the throttled responses, their throttle
	// times in all and the longest, and how long the client id was held
	// up, in milliseconds.
	Responses int64 `count:"throttled_responses"`
	TotalMs   int64 `count:"throttle_ms_total"`
	MaxMs     int64 `count:"throttle_ms_max"`
	HeldMs    int64 `count:"held_ms"`

	// What the prose says besides: the broker metric's type for the API
	// (Produce, Fetch, ControllerMutation, Request); the first and last
	// throttled response; Before, some were of versions before KIP-219
	// (the response held back, not the connection); the finding's
	// severity; the servers as the report labels them; the throttled
	// responses of other client ids not grouped (too many); the rule's
	// min-total.
	Metric       string
	First, Last  time.Time
	Before       bool
	Severity     detectors.Severity
	ServerLabels []string
	Dropped      int64
	MinTotal     time.Duration
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("client %q throttled on %s: %s, %s in all (longest %s) by %s; held up for %s",
		f.ClientID, f.API, strconv.FormatInt(f.Responses, 10)+" response(s)", text.Duration(ms(f.TotalMs)), text.Duration(ms(f.MaxMs)),
		text.List(f.ServerLabels, 3), text.Duration(f.held()))
	if f.Ongoing {
		s += ", still throttled at the end"
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	how := "The broker sent each response at once and then stopped reading from the connection for the throttle " +
		"time (KIP-219, newer versions), so the client's next requests waited."
	if f.Before && !f.AfterResponse {
		how = "At these versions the broker held each response back for the throttle time, so the throttle shows " +
			"as latency."
	} else if f.Before {
		how = "Older versions held the response back for the throttle time; newer ones (KIP-219) send it at once " +
			"and stop reading from the connection for that long."
	}
	expl := fmt.Sprintf("%d %s response(s) from %s to client id %q, between %s and %s, carried throttleTimeMs > 0: %s "+
		"in all, the longest %s. A broker throttles a client that exceeds its quota; for %s that is most likely %s. %s",
		f.Responses, f.API, strings.Join(f.ServerLabels, ", "), f.ClientID, text.Clock(f.First), text.Clock(f.Last),
		text.Duration(ms(f.TotalMs)), text.Duration(ms(f.MaxMs)), f.API, f.Quota, how)
	expl += fmt.Sprintf(" The waits held the client id up for %s", text.Duration(f.held()))
	if f.held() < ms(f.TotalMs) {
		expl += " (overlapping waits counted once)"
	}
	switch {
	case f.Severity == detectors.Info:
		expl += fmt.Sprintf(", under %s: a short burst clients hardly felt, not sustained throttling.", text.Duration(f.MinTotal))
	case f.Ongoing:
		expl += ", and its last response of the API in the capture was still throttled."
	default:
		expl += ", and then a response came without throttling."
	}
	if f.Dropped > 0 {
		expl += fmt.Sprintf(" (%d more throttled responses of other clients were not grouped: too many client ids.)", f.Dropped)
	}
	return expl
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kafka-configs.sh --bootstrap-server <broker> --describe --entity-type clients "+
		"--entity-name %q (and --entity-type users for the client's principal) shows the quotas that apply; the "+
		"broker metrics kafka.server:type=%s,client-id=%s (throttle-time, byte-rate or request-time) show how far "+
		"over it the client is. Raise the quota or spread the load.",
		f.ClientID, f.Metric, f.ClientID)
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }

func (f *Finding) held() time.Duration { return time.Duration(f.HeldS * float64(time.Second)) }
