package flows

import "testing"

// TestOrientPolicy: the ranking of evidence for a connection whose
// handshake was not captured (orient.go): pairing, then port, then content;
// a decision on port without agreeing requests, or on content alone, waits
// until the holding must end.
func TestOrientPolicy(t *testing.T) {
	for _, tc := range []struct {
		name   string
		ev     evidence
		port   int // server end by port, -1 none
		lower  int // end with the lower port number
		final  bool
		client int // -1: keep holding (or, final, not Kafka)
		by     ClientSide
	}{
		{"pairing beats port", evidence{paired: [2]bool{false, true}, reqs: [2]int{3, 1}}, 1, 1, false, 1, ClientByPairing},
		{"pairing without port", evidence{paired: [2]bool{true, false}, reqs: [2]int{1, 0}}, -1, 1, false, 0, ClientByPairing},
		{"both paired: port decides", evidence{paired: [2]bool{true, true}, reqs: [2]int{1, 1}}, 0, 1, false, 1, ClientByPort},
		{"port with agreeing requests", evidence{reqs: [2]int{0, 2}}, 0, 1, false, 1, ClientByPort},
		{"port against the content waits", evidence{reqs: [2]int{0, 2}}, 1, 1, false, -1, ""},
		{"port against the content, final: port", evidence{reqs: [2]int{0, 2}}, 1, 1, true, 0, ClientByPort},
		{"port, nothing decodes yet: waits", evidence{}, 1, 1, false, -1, ""},
		{"port, nothing decodes, final", evidence{}, 1, 1, true, 0, ClientByPort},
		{"content alone waits for pairing", evidence{reqs: [2]int{4, 0}}, -1, 1, false, -1, ""},
		{"content alone, final", evidence{reqs: [2]int{4, 0}}, -1, 1, true, 0, ClientByContent},
		{"content, more requests one way, final", evidence{reqs: [2]int{1, 5}}, -1, 1, true, 1, ClientByContent},
		{"one request: the port number decides", evidence{reqs: [2]int{0, 1}}, -1, 1, true, 0, ClientByPortNumber},
		{"one request, equal ports: content", evidence{reqs: [2]int{0, 1}}, -1, -1, true, 1, ClientByContent},
		{"nothing, final: not Kafka", evidence{plausible: [2]bool{true, false}}, -1, 1, true, -1, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			client, by, ok := orient(tc.ev, tc.port, tc.lower, tc.final)
			if !ok {
				client = -1
			}
			if client != tc.client || by != tc.by {
				t.Errorf("orient = client %d by %q (ok %v), want client %d by %q", client, by, ok, tc.client, tc.by)
			}
		})
	}
}
