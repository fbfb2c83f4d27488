package notleaderloop

import (
	"net/netip"
	"time"

	"github.com/kfsniff/kfsniff/cluster"
	"github.com/kfsniff/kfsniff/detectors"
	"github.com/kfsniff/kfsniff/detectors/internal/peers"
	"github.com/kfsniff/kfsniff/flows"
)

// try is one attempt that did not reach the server: a request never
// answered (clientID set), a connection whose SYNs were never answered (n
// SYNs) or one refused (RST to its SYN: refused).
type try struct {
	client  cluster.Client // ID "" for a connection's
	server  netip.AddrPort
	t       time.Time
	n       int64
	conn    bool
	refused bool
}

// tries are the attempts, in the order they are seen, at most maxTries
// (past it they are counted in cut: the rule's bound).
type tries struct {
	list []try
	cut  int64
}

const maxTries = 4096

func (ts *tries) add(t try) {
	if len(ts.list) >= maxTries {
		ts.cut++
		return
	}
	ts.list = append(ts.list, t)
}

// Unreached counts a client's unanswered attempts to a leader.
type Unreached struct {
	Connects, Syns, Refused, Requests int64
}

func (u Unreached) any() bool { return u.Connects > 0 || u.Refused > 0 || u.Requests > 0 }

// lookBack is how far before a run's first refusal an unanswered attempt
// still counts as part of it: the attempt that timed out is what sends a
// client to other servers (KRaft's 2 s request timeout, the Java
// client's 10 s socket.connection.setup.timeout.ms and up to 30 s).
const lookBack = 30 * time.Second

// to counts the attempts of run e's client to leader v that got no
// answer: connection attempts from its host, requests from its host and
// client id, from lookBack before the run's first refusal to its last.
func (ts *tries) to(p *detectors.Pass, e *run, v Verdict) Unreached {
	var u Unreached
	eps := peers.Endpoints(p, v.Leader, v.Endpoint)
	from, until := e.first.Add(-lookBack), e.last
	for i := range ts.list {
		t := &ts.list[i]
		if t.client.Host != e.key.C.Host || t.t.Before(from) || t.t.After(until) {
			continue
		}
		if !t.conn && t.client.ID != e.key.C.ID {
			continue
		}
		if is, _ := peers.IsNode(p, t.server, v.Leader, eps); !is {
			continue
		}
		switch {
		case t.refused:
			u.Refused++
		case t.conn:
			u.Connects++
			u.Syns += t.n
		default:
			u.Requests++
		}
	}
	return u
}

// ConnEvent implements detectors.ConnHook: connection attempts never
// answered or refused.
func (r *rule) ConnEvent(_ *detectors.Pass, ev *detectors.ConnEvent) {
	switch ev.Kind {
	case flows.ConnUnanswered, flows.ConnRefused:
		r.tries.add(try{client: cluster.Client{Host: ev.Client.Addr()}, server: ev.Server, t: ev.Time, n: int64(max(ev.Attempts, 1)), conn: true,
			refused: ev.Kind == flows.ConnRefused})
	}
}

// Cut implements detectors.Bounded.
func (r *rule) Cut() map[string]int64 {
	if r.tries.cut == 0 {
		return nil
	}
	return map[string]int64{"unanswered_attempts": r.tries.cut}
}
