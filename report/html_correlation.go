package report

import "fmt"

// corrView is the page's Correlation section (kfsniff -r kafka://...):
// what the text report's Correlation section says, agents and topics as
// sortable tables. Agent, cluster and topic names come from the records:
// they reach the page as text, cleaned as the text report cleans them.
type corrView struct {
	Lines  []string
	Agents table
	Skew   string
	E2E    string
	Topics table
}

func correlationView(c *Correlation) *corrView {
	if c == nil {
		return nil
	}
	v := &corrView{}
	s := fmt.Sprintf("%d records read", c.Records)
	if n := c.Unreadable.Version + c.Unreadable.Malformed; n > 0 {
		s += fmt.Sprintf("; %d unreadable: %d of another schema version, %d malformed", n, c.Unreadable.Version, c.Unreadable.Malformed)
	}
	v.Lines = append(v.Lines, s+".")
	if c.Reference != "" {
		v.Lines = append(v.Lines, "Clocks are relative to agent "+Clean(c.Reference)+"'s (the agent with the most records when clocks were first compared).")
	}
	v.Agents = table{ID: "agents", Title: "Agents", Columns: []column{{Name: "agent"}, {Name: "records", Num: true}, {Name: "exchanges", Num: true},
		{Name: "connection events", Num: true}, {Name: "findings", Num: true}, {Name: "first (its clock)"}, {Name: "last (its clock)"},
		{Name: "clock offset"}}}
	agents := firstRows(c.Agents, &v.Agents, "agents")
	if c.AgentsNotListed > 0 {
		v.Agents.Note += fmt.Sprintf(" %d records of further agents not followed.", c.AgentsNotListed)
	}
	for i := range agents {
		a := &agents[i]
		first, last := cell{Text: "-"}, cell{Text: "-"}
		if a.First != nil && a.Last != nil {
			first.Text, last.Text = a.First.UTC().Format(TimeLayout), a.Last.UTC().Format(TimeLayout)
		}
		// Unknown: its times cannot be put on the others' clock.
		clock := cell{Text: clockText(a, c.Reference), Bad: a.Clock == nil && a.Agent != c.Reference}
		v.Agents.Rows = append(v.Agents.Rows, []cell{{Text: Clean(a.Agent), Code: true}, n64(a.Records), n64(a.Exchanges), n64(a.Conns),
			n64(a.Findings), first, last, clock})
	}
	sk := &c.Skew
	v.Skew = fmt.Sprintf("Clock offsets from %d exchanges seen by two agents, of %d answered exchanges; %d left the window of %d per agent unmatched.",
		sk.Matched, sk.Exchanges, sk.Evicted, sk.Window)
	e := &c.E2E
	v.E2E = fmt.Sprintf("%d batches produced, %d fetched by consumers; %d left the window of %d unfetched.", e.Produced, e.Fetched, e.Evicted, e.Window)
	v.Topics = table{ID: "e2e", Title: "Producer to consumer latency", Columns: []column{{Name: "cluster"}, {Name: "topic"},
		{Name: "batches", Num: true}, {Name: "p50 ms", Num: true}, {Name: "p99 ms", Num: true}, {Name: "max ms", Num: true}, {Name: "not measured"}}}
	topics := firstRows(e.Topics, &v.Topics, "topics")
	if e.TopicsNotListed > 0 {
		v.Topics.Note += fmt.Sprintf(" %d batches of further topics not followed.", e.TopicsNotListed)
	}
	for i := range topics {
		t := &topics[i]
		nm := notMeasured(t)
		v.Topics.Rows = append(v.Topics.Rows, []cell{{Text: Clean(t.Cluster), Code: true}, {Text: Clean(t.Topic), Code: true}, n64(t.Batches),
			msCell(t.Latency.P50, t.Batches), msCell(t.Latency.P99, t.Batches), msCell(t.Latency.Max, t.Batches),
			{Text: nm, Bad: nm != "-"}})
	}
	if len(v.Topics.Rows) == 0 && v.Topics.Note == "" {
		v.Topics.Note = "No batch was both produced and fetched by a consumer in the records read."
	}
	return v
}
