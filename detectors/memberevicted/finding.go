package memberevicted

import (
	"fmt"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one member evicted from its group. Its exported fields are
// the finding's "fields".
type Finding struct {
	Group    string `json:"group"`
	Member   string `json:"member"`
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
	// SilentS is how long its group requests stopped, in seconds,
	// against SessionTimeoutMs, the session timeout its JoinGroup asked
	// for. Back: it came back, answered Answer; else it was still silent
	// at the end.
	SilentS          float64 `json:"silent_s"`
	SessionTimeoutMs int64   `json:"session_timeout_ms"`
	Back             bool    `json:"back"`
	Answer           string  `json:"answer,omitempty"`
	// Generations counts the group's generations in the capture;
	// ExplainsRebalances: no more than the evictions and the members'
	// joins and leaves make, so that the rebalances are not a loop.
	Generations        int64 `json:"generations"`
	ExplainsRebalances bool  `json:"explains_rebalances"`

	last, until time.Time
	coordinator string
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("member %q of group %q (client %q on %s) evicted: silent for %s, past its session timeout of %s",
		f.Member, f.Group, f.ClientID, f.Host, text.Duration(f.silent()), text.Duration(time.Duration(f.SessionTimeoutMs)*time.Millisecond))
	if f.Back {
		s += "; back, answered " + f.Answer
	} else {
		s += "; not back at the end"
	}
	return s
}

func (f *Finding) silent() time.Duration { return time.Duration(f.SilentS * float64(time.Second)) }

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	s := fmt.Sprintf("Member %q sent its last group request to the coordinator %s at %s and nothing more until %s: "+
		"%s, longer than the session timeout of %d ms its JoinGroup asked for. The coordinator dropped it and "+
		"rebalanced the group without it; its partitions went to the other members or unread. ",
		f.Member, f.coordinator, text.Clock(f.last), text.Clock(f.until), text.Duration(f.silent()), f.SessionTimeoutMs)
	if f.Back {
		s += "When it came back, the coordinator no longer knew it (" + f.Answer + "): it must join again, another rebalance. "
	} else {
		s += "It had not come back when the capture ended. "
	}
	s += "A member silent that long was stopped, not slow: a long GC pause, a hung or paused host, a network cut, or " +
		"a client whose heartbeats share a thread with a long poll loop. "
	if f.ExplainsRebalances {
		s += fmt.Sprintf("The group's %d generations are no more than this eviction and the members' joins and leaves make: not a rebalance loop.", f.Generations)
	} else {
		s += fmt.Sprintf("The group went through %d generations, more than evictions explain: see rebalance-loop.", f.Generations)
	}
	return s
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("The application's logs and GC logs on %s around %s (client %q); kafka-consumer-groups.sh "+
		"--bootstrap-server <broker> --describe --group %s --members. If pauses are expected, raise session.timeout.ms "+
		"(heartbeat.interval.ms a third of it).", f.Host, text.Clock(f.last), f.ClientID, f.Group)
}
