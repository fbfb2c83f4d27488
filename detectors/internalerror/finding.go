package internalerror

import "fmt"

// Finding is one connection abandoned after an internal error. Its
// exported fields are the finding's "fields".
type Finding struct {
	Client string `json:"client"`
	Server string `json:"server"`
	// Error is what the recovered panic said.
	Error string `json:"error"`

	// Conn is the connection's number, Packet the packet it broke at.
	Conn   int
	Packet uint64
	// RequestsBefore is the requests the connection carried before.
	RequestsBefore int64 `count:"requests_before"`
}

// Summary implements detectors.Detail.
func (f *Finding) Summary() string {
	return fmt.Sprintf("internal error on connection #%d %s -> %s at packet %d; the rest of that connection was not analysed",
		f.Conn, f.Client, f.Server, f.Packet)
}

// Explanation implements detectors.Detail.
func (f *Finding) Explanation() string {
	return "kfsniff recovered from a panic while decoding or analysing this connection. The connection's " +
		"counts stop at that packet; every other connection was analysed normally."
}

// Next implements detectors.Detail.
func (f *Finding) Next() string {
	return fmt.Sprintf("Report the bug with the capture (or `kfsniff -r FILE -c %d -w excerpt.pcap` around packet %d).",
		f.Packet, f.Packet)
}
