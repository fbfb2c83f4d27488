package report_test

import (
	"regexp"
	"strings"
	"testing"
)

// TestFramesVerboseTree: --frames -v prints a field tree a person reads,
// as tshark -V does, on a real Kafka cluster's recording: fields by name,
// topic ids as Kafka prints them (base64url, 22 characters), record
// batches as offsets, records, CRC checked and codec with their records,
// never the batch bytes in base64 or a topic id as 16 numbers.
func TestFramesVerboseTree(t *testing.T) {
	outs, _ := analyse(t, goldenCase{capture: fixtures + "/kafka/kraft-listener-conflict.pcap.gz", outputs: []output{framesV}}, 1)
	text := string(outs[framesV.ext])
	for _, want := range []*regexp.Regexp{
		// a Produce request's topic by id, then its batch summarised
		regexp.MustCompile(`(?m)Produce v13 req .*\n(?: +.*\n)*? +\[0\] topic id [A-Za-z0-9_-]{22}\n +Topic: ""\n +TopicID: [A-Za-z0-9_-]{22}\n`),
		regexp.MustCompile(`(?m)^ +Records: \d+ bytes, 1 batches\n +batch 0: offsets 0\.\.\d+, \d+ records, \d+ bytes\n +CRC [0-9a-f]{8} ok\n +magic 2, codec none\n`),
		// the records of a batch, key and value as text
		regexp.MustCompile(`(?m)^ +record 0  \d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}  key k-\d+  value seq=\d+;`),
		// the metadata log's topic id named
		regexp.MustCompile(`(?m)^ +TopicID: AAAAAAAAAAAAAAAAAAAAAQ \(__cluster_metadata\)$`),
		// error codes named
		regexp.MustCompile(`(?m)^ +ErrorCode: 6 NOT_LEADER_OR_FOLLOWER$`),
	} {
		if !want.MatchString(text) {
			t.Errorf("-v lacks %s", want)
		}
	}
	for _, bad := range []*regexp.Regexp{
		regexp.MustCompile(`"TopicID": \[`),                   // 16 numbers, as encoding/json writes [16]byte
		regexp.MustCompile(`"Records": "[A-Za-z0-9+/=]{40,}`), // a batch in base64
		regexp.MustCompile(`UnknownTags`),                     // kmsg's empty tag maps
	} {
		if loc := bad.FindStringIndex(text); loc != nil {
			t.Errorf("-v has %s: %q", bad, text[loc[0]:min(loc[1]+40, len(text))])
		}
	}
	// Every body line is indented under its frame's line.
	for _, l := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if !strings.HasPrefix(l, "        ") && !regexp.MustCompile(`^ *\d+ \d\d:\d\d:\d\d\.\d{6} #\d+ `).MatchString(l) {
			t.Fatalf("line neither a frame nor indented under one: %q", l)
		}
	}
}
