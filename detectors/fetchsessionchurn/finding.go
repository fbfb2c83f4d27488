package fetchsessionchurn

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client's fetch-session churn at one broker. Its exported
// fields are the finding's "fields".
type Finding struct {
	ClientID string   `json:"client_id"`
	Clients  []string `json:"clients"`
	Server   string   `json:"server"`
	// Fetcher is the follower's node id for a replica fetcher, -1 for a
	// consumer.
	Fetcher int32    `json:"fetcher"`
	Errors  []string `json:"errors"`
	// ResetsPerS is the session errors per second in the worst storm.
	ResetsPerS float64 `json:"resets_per_s"`
	// HeldS is the worst storm's span (to the end if still going).
	HeldS   float64 `json:"held_s"`
	Ongoing bool    `json:"ongoing"`
	// Creators are the clients that opened fetch sessions at the broker
	// since its first session error, most first.
	Creators []Creator `json:"creators,omitempty"`

	// The counts: session errors since the first, in Storms storms;
	// the client's fetches since, full and incremental; the sessions it
	// opened.
	SessionErrors      int64 `count:"session_errors"`
	Storms             int   `count:"storms"`
	Fetches            int64 `count:"fetches"`
	FullFetches        int64 `count:"full_fetches"`
	IncrementalFetches int64 `count:"incremental_fetches"`
	SessionsCreated    int64 `count:"sessions_created"`

	// What the prose says besides: the errors' names; the worst storm's
	// errors, first and last; how long the churn was held (to the end if
	// ongoing); sessions opened by clients not among Creators; session
	// errors of clients not followed (too many); the rule's max-gap.
	ErrorNames            []string
	WorstErrors           int64
	WorstFirst, WorstLast time.Time
	Held                  time.Duration
	MoreCreators, Dropped int64
	MaxGap                time.Duration
	// Episode is the worst storm as the severity policy grades it
	// (detectors.Episode: its intensity).
	Episode detectors.Episode
}

func (f *Finding) worstSpan() time.Duration { return f.WorstLast.Sub(f.WorstFirst) }

// Creator is a client and the fetch sessions it opened.
type Creator struct {
	ClientID string `json:"client_id"`
	Client   string `json:"client"`
	Sessions int64  `json:"sessions"`
}

func (r *rule) finding(p *detectors.Pass, ch *churn) detectors.Finding {
	worst, storms, held, ongoing := r.verdict(ch, p.End)
	var errs int64
	for _, c := range ch.codes {
		errs += c.N
	}
	f := &Finding{ClientID: ch.ID, Clients: ch.conns.Clients(), Server: p.Label(ch.server), Fetcher: ch.fetcher,
		Errors: ch.codes.Parts(), ResetsPerS: text.Rate(worst.n, worst.span()), HeldS: text.Seconds(held), Ongoing: ongoing,
		SessionErrors: errs, Storms: storms, Fetches: ch.fetches, FullFetches: ch.full, IncrementalFetches: ch.fetches - ch.full,
		SessionsCreated: ch.sessions, ErrorNames: ch.codes.Names(), WorstErrors: worst.n, WorstFirst: worst.first,
		WorstLast: worst.last, Held: held, Dropped: r.dropped, MaxGap: r.p.MaxGap}
	// The worst storm's intensity grades it too: thousands of resets a
	// second seen for half a second, still going at the end, are a
	// client fetching faster than any backoff allows (detectors.Episode).
	f.Episode = detectors.Episode{Seen: held, Ongoing: ongoing, Failures: worst.n, Clients: 1}
	if worst.n >= 2 {
		f.Episode.Rate = float64(worst.n-1) / max(worst.span(), time.Millisecond).Seconds()
	}
	if ongoing {
		f.Episode.Failing = 1
	}
	if b := r.brokers[ch.server]; b != nil {
		for c, n := range b.created {
			f.Creators = append(f.Creators, Creator{c.ID, c.Host.String(), n})
		}
		slices.SortFunc(f.Creators, func(a, b Creator) int {
			return cmp.Or(cmp.Compare(b.Sessions, a.Sessions), cmp.Compare(a.ClientID, b.ClientID), cmp.Compare(a.Client, b.Client))
		})
		f.Creators = f.Creators[:min(len(f.Creators), 5)]
		f.MoreCreators = b.more
	}
	code, _ := ch.codes.Top()
	return detectors.Finding{
		Severity: f.Episode.Grade(),
		First:    ch.first,
		Last:     ch.last,
		Conns:    ch.conns.IDs(),
		Nodes:    ch.conns.Nodes(p.Nodes),
		Evidence: ch.ev.List(),
		Subject: detectors.Subject{ClientIDs: []string{ch.ID}, Clients: []netip.Addr{ch.Host}, Servers: []netip.AddrPort{ch.server},
			Nodes: ch.conns.Nodes(p.Nodes), Error: code},
		Detail: f,
	}
}

func (f *Finding) who() string {
	if f.Fetcher >= 0 {
		return fmt.Sprintf("follower node %d (client id %q, %s)", f.Fetcher, f.ClientID, text.List(f.Clients, 3))
	}
	return fmt.Sprintf("consumer %q (%s)", f.ClientID, text.List(f.Clients, 3))
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	s := fmt.Sprintf("%s at %s: %s %s in %s (%g/s), %d of %d fetches full", f.who(), f.Server, strings.Join(f.ErrorNames, "/"),
		text.Plural(f.WorstErrors, "time", "times"), text.Duration(f.worstSpan()), f.ResetsPerS, f.FullFetches, f.Fetches)
	if f.Ongoing || f.Episode.Fast() {
		return s + "; " + f.Episode.Felt()
	}
	return s
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s answered %s of %s with %s, in %s (errors no more than %s apart); the worst ran from %s to %s: "+
		"%s in %s, %g session resets per second.", f.Server, text.Plural(f.Fetches, "Fetch request", "Fetch requests"), f.who(),
		strings.Join(f.Errors, ", "), text.Plural(f.Storms, "storm", "storms"), text.Duration(f.MaxGap),
		text.Clock(f.WorstFirst), text.Clock(f.WorstLast), text.Plural(f.WorstErrors, "error", "errors"),
		text.Duration(f.worstSpan()), f.ResetsPerS)
	fmt.Fprintf(&b, " Since its first session error the client sent %d full fetches (session epoch 0 or -1, naming every "+
		"partition) and %d incremental ones, and opened %s.", f.FullFetches, f.IncrementalFetches, text.Plural(f.SessionsCreated, "session", "sessions"))
	b.WriteString(" An incremental fetch session (KIP-227) lets a client send only what changed; the broker keeps at most " +
		"max.incremental.fetch.session.cache.slots sessions (1000 by default) and evicts one to make room for a new " +
		"one. FETCH_SESSION_ID_NOT_FOUND means the session is gone (evicted, or the broker restarted); " +
		"INVALID_FETCH_SESSION_EPOCH that client and broker disagree on its epoch (a response lost, or throttled without " +
		"its session id, KAFKA-6946). Each costs a round trip and a full fetch; one now and then heals itself " +
		"(KAFKA-20713 lowered the client's log of it to DEBUG), a storm means sessions are evicted faster than they are " +
		"used: a cache too small for the clients, or brokers before 2.4.0, which evicted live sessions (KAFKA-9137).")
	if len(f.Creators) > 0 {
		fmt.Fprintf(&b, " Sessions opened at this broker since its first session error: %s", text.List(creators(f.Creators), 5))
		if f.MoreCreators > 0 {
			fmt.Fprintf(&b, " (and %d by clients not listed)", f.MoreCreators)
		}
		b.WriteString("; a client that opens many is filling the cache, one that opens a session on every fetch defeats it.")
	}
	if f.Ongoing {
		fmt.Fprintf(&b, " It was still going when the capture ended, %s after it began: how long it went on is unknown.", text.Duration(f.Held))
	}
	if f.Episode.Fast() && f.Held < detectors.FeltAfter {
		fmt.Fprintf(&b, " A warning however short: %d session errors at %.0f a second is a client fetching again faster than "+
			"any client's backoff allows (%.0f a second or more), a load on the broker for every other client.", f.Episode.Failures, f.Episode.Rate, detectors.FastRate)
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d session errors of further clients were not followed: too many.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return "On the broker, kafka.server:type=FetchSessionCache,name=NumIncrementalFetchSessions (against " +
		"max.incremental.fetch.session.cache.slots), name=NumIncrementalFetchPartitionsCached and " +
		"name=IncrementalFetchSessionEvictionsPerSec show the cache filling and evicting; kafka-configs.sh " +
		"--bootstrap-server <broker> --describe --entity-type brokers --entity-default shows the slots, which a rolling " +
		"config change can raise. Count the fetching clients per broker (kafka-consumer-groups.sh --describe --all-groups " +
		"--members) and look for clients that open a session on every fetch (session id 0, epoch 0 every time: kfsniff " +
		"--frames --api Fetch). Brokers before 2.4.0 should be upgraded (KAFKA-9137)."
}

func creators(cs []Creator) []string {
	out := make([]string, len(cs))
	for i, c := range cs {
		out[i] = fmt.Sprintf("%q (%s) %s", c.ClientID, c.Client, text.Plural(c.Sessions, "session", "sessions"))
	}
	return out
}
