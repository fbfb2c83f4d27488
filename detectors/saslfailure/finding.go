package saslfailure

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one client id and host's SASL failures and connections closed
// at re-authentication time. Its exported fields are the finding's
// "fields".
type Finding struct {
	ClientID   string   `json:"client_id"`
	ClientHost string   `json:"client_host"`
	Servers    []string `json:"servers"`
	// Mechanisms are those the client asked for, Enabled those the
	// broker said it enables (in an UNSUPPORTED_SASL_MECHANISM answer).
	Mechanisms []string `json:"mechanisms,omitempty"`
	Enabled    []string `json:"enabled_mechanisms,omitempty"`
	Errors     []string `json:"errors,omitempty"`
	// Messages are the broker's error messages (the first few).
	Messages []string `json:"messages,omitempty"`
	// Healed is set when the client authenticated after its last
	// failure.
	Healed            bool  `json:"healed"`
	ReauthCloses      int64 `json:"reauth_closes,omitempty" count:"reauth_closes"`
	SessionLifetimeMs int64 `json:"session_lifetime_ms,omitempty"`

	// The counts besides: failed authentications, connections the
	// broker closed instead of answering, authentications that passed,
	// re-authentications.
	Failures  int64 `count:"failures"`
	Closed    int64 `count:"closed_unanswered"`
	Successes int64 `count:"authenticate_ok"`
	Reauths   int64 `count:"reauthentications"`

	// What the prose says besides: the first and last failure, the
	// first and last close at re-authentication time, the session
	// lifetime, the clients not followed (too many), the rule's
	// min-reauth-closes.
	FailFirst, FailLast   time.Time
	CloseFirst, CloseLast time.Time
	Lifetime              time.Duration
	Dropped               int64
	MinReauthCloses       int
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var parts []string
	if f.Failures > 0 {
		s := fmt.Sprintf("client %q on %s failed SASL authentication %s", f.ClientID, f.ClientHost, text.Plural(f.Failures, "time", "times"))
		if len(f.Mechanisms) > 0 {
			s += " (" + strings.Join(f.Mechanisms, ", ") + ")"
		}
		what := f.Errors
		if f.Closed > 0 {
			what = append(what[:len(what):len(what)], fmt.Sprintf("connection closed unanswered x%d", f.Closed))
		}
		s += ": " + strings.Join(what, ", ")
		if f.Healed {
			s += ", then authenticated"
		} else {
			s += ", never authenticated after"
		}
		parts = append(parts, s)
	}
	if f.ReauthCloses > 0 {
		s := fmt.Sprintf("%s closed at re-authentication time (session lifetime %s)",
			text.Plural(f.ReauthCloses, "connection", "connections"), text.Duration(f.Lifetime))
		if f.Failures == 0 {
			s = fmt.Sprintf("client %q on %s: %s", f.ClientID, f.ClientHost, s)
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	if f.Failures > 0 {
		fmt.Fprintf(&b, "Between %s and %s, client id %q on %s failed to authenticate %s with %s",
			text.Clock(f.FailFirst), text.Clock(f.FailLast), f.ClientID, f.ClientHost, text.Plural(f.Failures, "time", "times"), text.List(f.Servers, 3))
		if len(f.Errors) > 0 {
			fmt.Fprintf(&b, ", answered %s", strings.Join(f.Errors, ", "))
		}
		if f.Closed > 0 {
			fmt.Fprintf(&b, "; %s the broker closed the connection instead of answering", text.Plural(f.Closed, "time", "times"))
		}
		b.WriteString(". ")
		if len(f.Messages) > 0 {
			fmt.Fprintf(&b, "The broker said: %s. ", strings.Join(text.Quote(f.Messages), "; "))
		}
		if len(f.Enabled) > 0 {
			fmt.Fprintf(&b, "The client asked for %s; the listener enables %s only. ", text.Or(strings.Join(f.Mechanisms, ", "), "?"),
				strings.Join(f.Enabled, ", "))
		}
		b.WriteString("UNSUPPORTED_SASL_MECHANISM means the client's sasl.mechanism is not in the listener's " +
			"sasl.enabled.mechanisms; SASL_AUTHENTICATION_FAILED means wrong credentials, an unknown user (SCRAM " +
			"credentials are per cluster: kafka-configs.sh --describe --entity-type users), or an expired token; " +
			"ILLEGAL_SASL_STATE a client speaking the SASL exchange out of order. ")
		if f.Healed {
			b.WriteString("The client authenticated afterwards, so the failures healed (a credential rotation or a " +
				"listener restarting).")
		} else {
			b.WriteString("The client never authenticated afterwards: it cannot produce or consume until its " +
				"configuration or the broker's is fixed.")
		}
	}
	if f.ReauthCloses > 0 {
		if b.Len() > 0 {
			b.WriteString(" ")
		}
		fmt.Fprintf(&b, "Between %s and %s, %s of client id %q were closed after their SASL session lifetime (%s, "+
			"connections.max.reauth.ms) had run out, without the client re-authenticating on them (KIP-368). A "+
			"broker closes such a connection at the client's next request, which fails; a client that does not "+
			"re-authenticate (KIP-368 needs Java 2.2+, librdkafka 2.2+, recent sarama or franz-go; kafkajs has none) "+
			"loses its connections every lifetime. %d re-authentications were seen from this client.",
			text.Clock(f.CloseFirst), text.Clock(f.CloseLast), text.Plural(f.ReauthCloses, "connection", "connections"),
			f.ClientID, text.Duration(f.Lifetime), f.Reauths)
		if f.ReauthCloses < int64(f.MinReauthCloses) {
			fmt.Fprintf(&b, " Below %d such closes this may be the client's own close.", f.MinReauthCloses)
		}
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (SASL exchanges of %d further clients were not followed: too many clients.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return "On the broker, kafka.server:type=socket-server-metrics (failed-authentication-total, " +
		"successful-authentication-total, successful-reauthentication-total, reauthentication-latency-avg per " +
		"listener) and the broker's log (\"Failed authentication with /<client host>\") give the reason. Check the " +
		"listener's sasl.enabled.mechanisms and connections.max.reauth.ms (kafka-configs.sh --bootstrap-server " +
		"<broker> --describe --entity-type brokers --all), the user's credentials (kafka-configs.sh --describe " +
		"--entity-type users --entity-name <user>), and the client's sasl.mechanism, sasl.jaas.config / " +
		"username and password, and its KIP-368 support."
}
