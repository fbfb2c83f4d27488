package transactionalfencing

import (
	"fmt"
	"strings"
	"time"

	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/internal/text"
)

// Finding is one transactional.id whose producers were fenced. Its
// exported fields are the finding's "fields".
type Finding struct {
	TransactionalID string     `json:"transactional_id"`
	Producers       []Producer `json:"producers"`
	Servers         []string   `json:"servers"`
	Errors          []string   `json:"errors"`
	// ByAPI counts the fenced answers by API ("EndTxn x12").
	ByAPI    []string `json:"fenced_by_api"`
	Fenced   int64    `json:"fenced_answers" count:"fenced_answers"`
	Episodes int64    `json:"episodes" count:"episodes"`
	// Committed and Aborted count the EndTxn requests answered without
	// error; CommitsRefused the commits answered fenced (the coordinator
	// aborted those transactions), AbortsRefused the aborts answered
	// fenced (already aborted).
	Committed      int64 `json:"committed" count:"committed"`
	Aborted        int64 `json:"aborted" count:"aborted"`
	CommitsRefused int64 `json:"commits_refused" count:"commits_refused"`
	AbortsRefused  int64 `json:"aborts_refused" count:"aborts_refused"`

	First, Last  time.Time
	ServerLabels []string
	More         int64
	Dropped      int64
	Severity     detectors.Severity
	Params       Params

	// ProducerCount is the producers (ids and epochs) seen, those not
	// listed included.
	ProducerCount int64 `count:"producers"`
}

// Producer is one client id and host using the transactional.id.
type Producer struct {
	ClientID string `json:"client_id"`
	Host     string `json:"host"`
	// Inits counts its InitProducerId calls answered, Epochs the epochs
	// they gave; Fenced its fenced answers, Episodes how many times it was
	// fenced after an InitProducerId.
	Inits    int64 `json:"inits"`
	Epochs   []int `json:"epochs"`
	Fenced   int64 `json:"fenced"`
	Episodes int64 `json:"episodes" count:"episodes"`
}

func (p Producer) label() string { return fmt.Sprintf("%q on %s", p.ClientID, p.Host) }

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	var fenced []string
	for _, p := range f.Producers {
		if p.Episodes > 0 {
			fenced = append(fenced, p.label())
		}
	}
	return fmt.Sprintf("transactional.id %q: %s fenced %s by %s (%s); %s of %d producer(s)",
		f.TransactionalID, text.List(fenced, 3), text.Plural(f.Episodes, "time", "times"), text.List(f.ServerLabels, 2),
		strings.Join(f.Errors, ", "), text.Plural(f.Fenced, "fenced answer", "fenced answers"), len(f.Producers))
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Between %s and %s, %d answer(s) told producers with transactional.id %q that they were fenced "+
		"(%s). ", text.Clock(f.First), text.Clock(f.Last), f.Fenced, f.TransactionalID, strings.Join(f.ByAPI, ", "))
	var ps []string
	for _, p := range f.Producers {
		ps = append(ps, fmt.Sprintf("%s: %d InitProducerId (epochs %s), fenced %d time(s)", p.label(), p.Inits,
			text.IDs(p.Epochs, 6), p.Episodes))
	}
	b.WriteString("Producers: " + strings.Join(ps, "; ") + ". ")
	b.WriteString("Each InitProducerId with a transactional.id bumps its epoch and aborts the transaction the " +
		"previous holder had open; that producer's next request is refused and it must stop. ")
	if f.Severity >= detectors.Warning {
		fmt.Fprintf(&b, "Fenced %d times, at least %d: more than one live instance uses this transactional.id, each "+
			"restarted when fenced and fencing the other in turn, so that transactions keep being aborted. ",
			f.Episodes, f.Params.MinEpisodes)
	} else {
		b.WriteString("Fenced once: a replacement stopping a zombie is what fencing is for; it is a problem only if " +
			"the fenced instance was meant to be live. ")
	}
	fmt.Fprintf(&b, "Transactions: %d committed, %d aborted by their producers, %d commits and %d aborts refused as "+
		"fenced (aborted by the coordinator); each fencing episode aborted the fenced producer's open transaction.",
		f.Committed, f.Aborted, f.CommitsRefused, f.AbortsRefused)
	if f.More > 0 {
		fmt.Fprintf(&b, " (%d fenced answers to further producers are not listed.)", f.More)
	}
	if f.Dropped > 0 {
		fmt.Fprintf(&b, " (%d answers for further transactional ids were not followed: too many.)", f.Dropped)
	}
	return b.String()
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("kafka-transactions.sh --bootstrap-server <broker> describe --transactional-id %s shows the "+
		"current producer id and epoch; find every deployment configured with transactional.id %q (the client ids and "+
		"hosts above): each live instance needs its own (Kafka Streams and Connect derive one per task). Look for a "+
		"supervisor restarting the fenced instance.", f.TransactionalID, f.TransactionalID)
}
