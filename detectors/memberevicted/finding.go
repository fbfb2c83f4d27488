package memberevicted

import (
	"fmt"
	"strings"
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
	// for (0: its JoinGroup came before the capture). Back: it came back,
	// answered Answer; else it was still silent at the end.
	SilentS          float64 `json:"silent_s"`
	SessionTimeoutMs int64   `json:"session_timeout_ms" count:"session_timeout_ms"`
	Back             bool    `json:"back"`
	Answer           string  `json:"answer,omitempty"`
	// Generations counts the group's generations in the capture;
	// ExplainsRebalances: no more than the evictions and the members'
	// joins and leaves make, so that the rebalances are not a loop.
	Generations int64 `json:"generations" count:"generations"`
	// SinceStart: the member was not heard from before its eviction was
	// answered: silent at least since the capture began (SilentS is a
	// lower bound).
	SinceStart         bool `json:"since_start"`
	ExplainsRebalances bool `json:"explains_rebalances"`

	Last, Until time.Time
	Coordinator string

	// SilentMs is how long it was silent in milliseconds, a count.
	SilentMs int64 `count:"silent_ms"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	silent := text.Duration(f.silent()) + ", past its session timeout of " + text.Duration(time.Duration(f.SessionTimeoutMs)*time.Millisecond)
	switch {
	case f.SinceStart:
		silent = "at least " + text.Duration(f.silent()) + ", since before the capture began"
	case f.SessionTimeoutMs == 0:
		silent = text.Duration(f.silent()) + " (its session timeout not captured)"
	}
	s := fmt.Sprintf("%s (client %q on %s) evicted: silent for %s", f.who(), f.ClientID, f.Host, silent)
	if f.Back {
		s += "; back, answered " + f.Answer
	} else {
		s += "; not back at the end"
	}
	return s
}

// who names the member and its group. Member is empty for a client that
// came back with its member id cleared (librdkafka) and was not heard from
// before in the capture.
func (f *Finding) who() string {
	return fmt.Sprintf("%s of group %q", f.memberWord(), f.Group)
}

func (f *Finding) memberWord() string {
	if f.Member == "" {
		return "a member (its id cleared by the client)"
	}
	return fmt.Sprintf("member %q", f.Member)
}

// capital is s, not empty, with its first letter upper case.
func capital(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func (f *Finding) silent() time.Duration { return time.Duration(f.SilentS * float64(time.Second)) }

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	timeout := fmt.Sprintf("longer than the session timeout of %d ms its JoinGroup asked for", f.SessionTimeoutMs)
	if f.SessionTimeoutMs == 0 {
		timeout = "its JoinGroup, which names its session timeout, came before the capture; answered as it was when " +
			"it came back, the coordinator had dropped it"
	}
	s := fmt.Sprintf("%s sent its last group request to the coordinator %s at %s and nothing more until %s: "+
		"%s, %s. The coordinator dropped it and rebalanced the group without it; its partitions went to the other "+
		"members or unread. ", capital(f.memberWord()), f.Coordinator, text.Clock(f.Last), text.Clock(f.Until), text.Duration(f.silent()), timeout)
	if f.SinceStart {
		s = fmt.Sprintf("%s sent no group request from the capture's start (%s) until %s, at least %s, and was "+
			"then answered as a member the coordinator %s had dropped: evicted while silent. ",
			capital(f.memberWord()), text.Clock(f.Last), text.Clock(f.Until), text.Duration(f.silent()), f.Coordinator)
	}
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
		"(heartbeat.interval.ms a third of it).", f.Host, text.Clock(f.Last), f.ClientID, f.Group)
}
