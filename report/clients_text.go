package report

import (
	"fmt"
	"strings"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/internal/text"
)

// clients prints the client inventory: who spoke, with which software,
// which API versions, topics and producer settings, and whether Kafka 4.0
// still serves the versions each used.
func (p *printer) clients(r *Report) {
	notReady := 0
	for _, c := range r.Clients {
		if !c.Kafka40Ready {
			notReady++
		}
	}
	p.f("\nClients")
	if len(r.Clients) > 0 {
		p.f(" (%d; Kafka 4.0: %d use request versions it removed, KIP-896)", len(r.Clients), notReady)
	}
	p.f("\n")
	if len(r.Clients) == 0 {
		p.f("  none\n")
	}
	for i := range r.Clients {
		p.client(&r.Clients[i])
	}
	if r.ClientsNotListed > 0 {
		p.f("  (%d requests of further clients not listed: more than %d clients)\n", r.ClientsNotListed, MaxClients)
	}
}

func (p *printer) client(c *ClientEntry) {
	sw := "software not told (no ApiVersions v3+ seen)"
	if len(c.Software) > 0 {
		sw = "software " + strings.Join(each(c.Software, softwareText), ", ")
	}
	p.f("  %s client-id %q  %s\n", c.Host, Clean(c.ClientID), sw)
	conns := each(c.Connections, ref)
	if c.ConnectionsNotListed > 0 {
		conns = append(conns, fmt.Sprintf("and %d more", c.ConnectionsNotListed))
	}
	p.f("     %d requests on connections %s to %s", c.Requests, strings.Join(conns, ", "), strings.Join(c.Servers, ", "))
	if len(c.Roles) > 0 {
		p.f("; roles: %s", strings.Join(c.Roles, ", "))
	}
	p.f("; from packet %s, %s .. %s\n", pkt(c.File, c.FirstPacket), c.First.UTC().Format("15:04:05.000000"), c.Last.UTC().Format("15:04:05.000000"))
	apis := each(c.APIs, apiText)
	var removed []string
	for _, a := range c.APIs {
		if a.RemovedIn40 {
			removed = append(removed, removedText(a))
		}
	}
	if c.APIsNotListed > 0 {
		apis = append(apis, fmt.Sprintf("%d requests of further versions", c.APIsNotListed))
	}
	p.f("     APIs: %s\n", strings.Join(apis, ", "))
	if len(removed) > 0 {
		p.f("     Kafka 4.0: not ready: %s\n", strings.Join(removed, "; "))
	}
	if len(c.Topics) > 0 || c.TopicsNotListed > 0 {
		topics := each(c.Topics, Clean)
		if c.TopicsNotListed > 0 {
			topics = append(topics, fmt.Sprintf("(%d mentions of further topics)", c.TopicsNotListed))
		}
		p.f("     topics: %s\n", strings.Join(topics, ", "))
	}
	if len(c.Acks) > 0 || len(c.Compression) > 0 || c.Idempotent || c.Transactional {
		var parts []string
		if len(c.Acks) > 0 {
			parts = append(parts, "acks "+kv(c.Acks))
		}
		if len(c.Compression) > 0 {
			parts = append(parts, "batches by codec "+kv(c.Compression))
		}
		idem := "no"
		if c.Idempotent {
			var how []string
			if c.InitProducerID > 0 {
				how = append(how, fmt.Sprintf("InitProducerId x%d", c.InitProducerID))
			}
			if len(c.ProducerIDs) > 0 {
				how = append(how, "producer ids "+text.IDs(c.ProducerIDs, 0))
			}
			idem = "yes (" + strings.Join(how, ", ") + ")"
		}
		parts = append(parts, "idempotent "+idem)
		txn := "no"
		if c.Transactional {
			txn = "yes"
			if len(c.TransactionalIDs) > 0 {
				txn += " (transactional ids " + strings.Join(each(c.TransactionalIDs, quoted), ", ") + ")"
			}
		}
		parts = append(parts, "transactional "+txn)
		p.f("     produce: %s\n", strings.Join(parts, "; "))
	}
	if len(c.Transactions) > 0 {
		p.f("     transactions: %s\n", kv(c.Transactions))
	}
	if len(c.TLS) > 0 {
		p.f("     TLS: %s\n", strings.Join(c.TLS, "; "))
	}
}

// softwareText is a client's software: its name and version.
func softwareText(s Software) string { return Clean(s.Name) + " " + Clean(s.Version) }

// apiText is a client's requests of an API version: "Fetch v12 x40".
func apiText(a ClientAPI) string { return fmt.Sprintf("%s v%d x%d", a.Name, a.Version, a.Requests) }

// removedText says which versions of an API Kafka 4.0 removed.
func removedText(a ClientAPI) string {
	r, _ := decode.RemovedIn40(a.Key, a.Version)
	s := fmt.Sprintf("%s v%d (4.0 serves v%d and up)", a.Name, a.Version, r.Below)
	if r.RestoredIn != "" {
		s = fmt.Sprintf("%s v%d (4.0.0 only: back in %s and 4.1)", a.Name, a.Version, r.RestoredIn)
	}
	return s
}
