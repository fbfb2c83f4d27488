package kafka40removedversions

import (
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is a client that sends request versions Kafka 4.0 removed; the
// finding's "fields" are its exported fields.
type Finding struct {
	ClientID string `json:"client_id"`
	Host     string `json:"client_host"`
	// Software is what the client told in ApiVersions v3+ (name and
	// version); Library the library it is, told or guessed from its
	// client id.
	Software string   `json:"software,omitempty"`
	Library  string   `json:"library,omitempty"`
	Removed  []string `json:"removed_versions"`
	Servers  []string `json:"servers"`
	Upgrade  string   `json:"upgrade"`

	LibraryTold  bool
	Versions     []Version
	First, Last  time.Time
	MoreVersions int64
	Dropped      int64
	ServerLabels []string
	Warning      bool
	MinRequests  int

	// The counts: the requests at removed versions, in all and by
	// version ("Produce v2").
	Requests  int64            `count:"removed_version_requests"`
	ByVersion map[string]int64 `count:",inline"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	what := "removed in Kafka 4.0 (KIP-896): it will fail on 4.0"
	switch {
	case f.restoredOnly():
		what = "refused by Kafka 4.0.0 only (served again from 4.0.1, KAFKA-19444)"
	case !f.Warning:
		what = "removed in Kafka 4.0 (KIP-896)"
	}
	s := fmt.Sprintf("client %q on %s sends %s, %s", f.ClientID, f.Host, text.List(f.Removed, 4), what)
	if who := f.who(); who != "" {
		s += "; " + who
	}
	return s
}

// who names the client software, saying how it is known.
func (f *Finding) who() string {
	switch {
	case f.Software != "" && f.Library != "":
		return f.Library + " (" + f.Software + ")"
	case f.Software != "":
		return f.Software
	case f.Library != "" && !f.LibraryTold && !strings.HasPrefix(f.Library, "Apache Kafka broker"):
		return f.Library + " by its default client id"
	}
	return f.Library
}

// restoredOnly reports whether every version sent is one 4.0.1 serves again.
func (f *Finding) restoredOnly() bool {
	return !slices.ContainsFunc(f.Versions, func(v Version) bool { return v.Removed.RestoredIn == "" })
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var parts []string
	var notes []string
	for _, v := range f.Versions {
		s := fmt.Sprintf("%s x%d (4.0 serves v%d and up)", f.Removed[len(parts)], v.N, v.Removed.Below)
		if v.Removed.RestoredIn != "" {
			s = fmt.Sprintf("%s x%d (4.0.0 refuses it; %s serves it again)", f.Removed[len(parts)], v.N, v.Removed.RestoredIn)
		}
		parts = append(parts, s)
		if v.Removed.Note != "" {
			notes = append(notes, f.Removed[len(parts)-1]+": "+v.Removed.Note+".")
		}
	}
	expl := fmt.Sprintf("%s from client id %q on %s to %s, between %s and %s, used versions that Apache Kafka 4.0 "+
		"removed (KIP-896): %s. A 4.0 broker refuses them (it answers UNSUPPORTED_VERSION or closes the "+
		"connection), so this client fails as soon as its brokers run 4.0, though 3.x brokers serve it today.",
		text.Plural(f.Requests, "request", "requests"), f.ClientID, f.Host, strings.Join(f.ServerLabels, ", "),
		text.Clock(f.First), text.Clock(f.Last), strings.Join(parts, ", "))
	if len(notes) > 0 {
		expl += " " + strings.Join(notes, " ")
	}
	switch {
	case f.Software != "":
		expl += fmt.Sprintf(" The client named itself %s in ApiVersions (KIP-511).", f.Software)
	case f.Library != "" && !f.LibraryTold && !strings.HasPrefix(f.Library, "Apache Kafka broker"):
		expl += fmt.Sprintf(" The client sent no ApiVersions v3+ naming its software (KIP-511 came with Kafka 2.4; "+
			"older clients do not say); its client id is %s's default.", f.Library)
	case f.Library == "":
		expl += " The client sent no ApiVersions v3+ naming its software (KIP-511 came with Kafka 2.4; older " +
			"clients do not say), and its client id is no library's default: ask its owner which library and " +
			"release it runs."
	}
	if f.restoredOnly() {
		expl += " These versions fail on 4.0.0 only: upgrading to 4.0.1 or later, not 4.0.0, is enough."
	} else if !f.Warning {
		expl += fmt.Sprintf(" Fewer than %d such requests (min-requests): info.", f.MinRequests)
	}
	if f.MoreVersions > 0 {
		expl += fmt.Sprintf(" (%d more requests at other removed versions are not itemised.)", f.MoreVersions)
	}
	if f.Dropped > 0 {
		expl += fmt.Sprintf(" (%d requests of further clients were not grouped: too many clients.)", f.Dropped)
	}
	return expl
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	api, v := "Produce", "2"
	if len(f.Versions) > 0 {
		first := f.Removed[0]
		api, v, _ = strings.Cut(first, " v")
	}
	return "To do: " + f.Upgrade + " Then capture this client again and run `kfsniff -r <capture> --fail-on " +
		"warning`: no finding of this rule means Kafka 4.0 serves every request in the capture. A capture sees " +
		"its window only: on the 3.7+ brokers, kafka.network:type=RequestMetrics,name=DeprecatedRequestsPerSec," +
		"request=" + api + ",version=" + v + ",clientSoftwareName=...,clientSoftwareVersion=... counts such " +
		"requests over time (3.7 counts some versions 4.0 kept too, such as Metadata v0-v3), and " +
		"kafka-broker-api-versions.sh --bootstrap-server <broker> shows what a broker serves. See KIP-896 and " +
		"the Kafka 4.0 upgrade notes."
}
