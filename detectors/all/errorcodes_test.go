package all

import (
	"fmt"
	"strings"

	"github.com/twmb/franz-go/pkg/kerr"

	"github.com/kfsniff/kfsniff/decode"
)

// CodeRow is one line of docs/detectors.md's error-code table: what
// kfsniff says when a client meets the code over and over.
type CodeRow struct {
	Code int16
	Name string
	// Rule is the rule that names the failure ("error-storm" when no
	// specific rule does: the generic rate rule).
	Rule string
	// Says is what the finding tells, in a few words.
	Says string
	// Recording is a committed capture of real clients meeting the code
	// (a path from the repository root), and Severity the severity Rule
	// gives it there; a test runs kfsniff on each and checks both.
	// NotRecorded says why there is none.
	Recording, Severity string
	NotRecorded         string
}

// specific are the codes a rule other than error-storm names, with the
// capture that shows it.
var specific = map[int16]CodeRow{
	1:   {Rule: "records-skipped", Says: "the consumer reset past records it will never read: offsets skipped, how many deleted", Recording: "fixtures/pcaps/clients/offset-reset-kgo.pcap", Severity: "warning"},
	2:   {Rule: "records-rejected", Says: "batches refused for good: records lost", NotRecorded: "kfake answers it only for a batch that does not parse, which no client sends"},
	5:   {Rule: "leader-election-stall", Says: "partitions without a leader, how long clients waited", Recording: "fixtures/pcaps/clients/election-stall-kgo.pcap", Severity: "warning"},
	6:   {Rule: "not-leader-loop", Says: "a client retrying the broker that refuses it (or leader-election-stall, advertised-listener-conflict when those are the cause)", Recording: "fixtures/pcaps/clients/notleader-8s-kgo.pcap", Severity: "warning"},
	7:   {Rule: "error-storm", Says: "retries faster than any client's backoff allows: a warning however brief, still failing at the end", Recording: "fixtures/pcaps/clients/storm-nobackoff-librdkafka.pcap", Severity: "warning"},
	10:  {Rule: "records-rejected", Says: "batches refused for good, records lost, the size limit where the capture shows it", Recording: "fixtures/pcaps/clients/too-large-kgo.pcap", Severity: "warning"},
	18:  {Rule: "records-rejected", Says: "batches refused for good: records lost", NotRecorded: "kfake does not check the record list against a segment size"},
	15:  {Rule: "no-progress", Says: "a group that finds no coordinator while its client keeps asking: how long", Recording: "fixtures/pcaps/clients/coordinator-stall-librdkafka.pcap", Severity: "warning"},
	19:  {Rule: "not-enough-replicas", Says: "acks=all writes refused for a shrunk ISR, how long partitions went unwritten", Recording: "fixtures/pcaps/clients/not-enough-replicas-kgo.pcap", Severity: "warning"},
	20:  {Rule: "not-enough-replicas", Says: "as NOT_ENOUGH_REPLICAS; a retry without idempotence writes the records twice", NotRecorded: "kfake never answers it (it has no replication); the rule's tests cover it"},
	22:  {Rule: "rebalance-loop", Says: "a consumer group rebalancing in a loop", NotRecorded: "kfake's groups answer it only to stale members; the rule's tests cover it"},
	25:  {Rule: "member-evicted", Says: "a member evicted after missing its session timeout: how long it was silent, against which timeout (rebalance-loop when a group loops)", Recording: "fixtures/pcaps/clients/evicted-kgo.pcap", Severity: "warning"},
	27:  {Rule: "rebalance-loop", Says: "a consumer group rebalancing in a loop: generations, how long no assignment held", Recording: "fixtures/pcaps/clients/rebalance-kgo-classic.pcap", Severity: "warning"},
	32:  {Rule: "records-rejected", Says: "batches refused for good: records lost", NotRecorded: "kfake does not check timestamps"},
	33:  {Rule: "sasl-failure", Says: "a client asking for a SASL mechanism the listener does not offer", Recording: "fixtures/pcaps/clients/sasl-kgo.pcap", Severity: "warning"},
	34:  {Rule: "sasl-failure", Says: "SASL exchanges out of order", NotRecorded: "no real client sends one; the rule's tests cover it"},
	45:  {Rule: "producer-sequence", Says: "an idempotent producer refused out of sequence: records rewritten or lost", Recording: "fixtures/pcaps/clients/producer-sequence-kgo.pcap", Severity: "warning"},
	47:  {Rule: "transactional-fencing", Says: "producers fenced over one transactional.id (producer-sequence for an idempotent producer without one)", Recording: "fixtures/pcaps/clients/fenced-kgo.pcap", Severity: "warning"},
	56:  {Rule: "stalled-fetch", Says: "a partition that fetches without progress (its log directory offline)", Recording: "fixtures/pcaps/clients/stalled-fetch-kgo.pcap", Severity: "warning"},
	58:  {Rule: "sasl-failure", Says: "authentication refused: which user and mechanism, how many attempts", Recording: "fixtures/pcaps/clients/sasl-kgo.pcap", Severity: "warning"},
	59:  {Rule: "producer-sequence", Says: "an idempotent producer the broker no longer knows", NotRecorded: "the rule's tests cover it"},
	70:  {Rule: "fetch-session-churn", Says: "fetch sessions evicted over and over: every other fetch a full one", Recording: "fixtures/pcaps/clients/fetch-session-churn-kgo.pcap", Severity: "warning"},
	71:  {Rule: "fetch-session-churn", Says: "fetch sessions out of step", NotRecorded: "the rule's tests cover it"},
	74:  {Rule: "not-leader-loop", Says: "a client retrying with a stale leader epoch", NotRecorded: "the rule's tests cover it"},
	76:  {Rule: "records-rejected", Says: "batches refused for good: records lost", NotRecorded: "kfake accepts every codec at every version"},
	79:  {Rule: "rebalance-loop", Says: "nothing: the first JoinGroup of a member is answered so (KIP-394), counted among a loop's joins only", NotRecorded: "every group recording has it once per member, quiet"},
	87:  {Rule: "records-rejected", Says: "batches refused for good: records lost", NotRecorded: "kfake does not validate records beyond parsing"},
	90:  {Rule: "transactional-fencing", Says: "producers fenced over one transactional.id: which id, which producers, transactions aborted", Recording: "fixtures/pcaps/clients/fenced-sarama.pcap", Severity: "warning"},
	100: {Rule: "topic-recreated", Says: "a client on a deleted topic's old id: the old and new ids", Recording: "fixtures/pcaps/clients/topic-recreated-kgo.pcap", Severity: "warning"},
	103: {Rule: "topic-recreated", Says: "a client on a deleted topic's old id", NotRecorded: "the rule's tests cover it"},
	110: {Rule: "rebalance-loop", Says: "a KIP-848 group whose members are fenced in a loop", Recording: "fixtures/pcaps/clients/rebalance-kgo-consumer.pcap", Severity: "warning"},
	129: {Rule: "advertised-listener-conflict", Says: "two node ids advertised at one host:port, clients sent back to their seeds", Recording: "fixtures/pcaps/clients/listener-conflict-kgo.pcap", Severity: "error"},
}

// realOnly are codes only real Kafka makes a client meet (the
// fixtures/kafka harness), not recorded yet.
var realOnly = map[int16]string{
	14: "a coordinator loading its partition after a move: real Kafka only, not recorded yet",
	16: "a coordinator moving: real Kafka only, not recorded yet",
	29: "an authorizer denying: real Kafka only (kfake's ACLs answer it too, not recorded yet)",
	30: "an authorizer denying: real Kafka only (kfake's ACLs answer it too, not recorded yet)",
	31: "an authorizer denying: real Kafka only (kfake's ACLs answer it too, not recorded yet)",
}

// generic is what error-storm says of any code.
const generic = "the same error from one API over and over (rate, clients), graded by how long clients were held up"

// ErrorCodes lists every error code kerr knows (franz-go's list of what a
// client can meet), in order, with what kfsniff says of it.
func ErrorCodes() []CodeRow {
	var rows []CodeRow
	for code := int16(-1); code < 1024; code++ {
		if code == 0 {
			continue
		}
		if e := kerr.TypedErrorForCode(code); e == nil || e.Code != code {
			continue
		}
		r, ok := specific[code]
		if !ok {
			r = CodeRow{Rule: "error-storm", Says: generic, NotRecorded: "no recording of its own"}
			if why, ok := realOnly[code]; ok {
				r.NotRecorded = why
			}
		}
		r.Code, r.Name = code, decode.ErrorName(code)
		rows = append(rows, r)
	}
	return rows
}

// ErrorCodesDoc is the error-code table of docs/detectors.md.
func ErrorCodesDoc() string {
	var b strings.Builder
	b.WriteString("## Error codes\n\n" +
		"Every error code franz-go's kerr lists, and what kfsniff says when a client meets it over and over. " +
		"A specific rule names the failure; any code, named or not, also feeds error-storm, which drops to info " +
		"when the specific finding explains it. Where a committed recording of real clients shows the code, " +
		"its rule and severity there are given, and `pipeline/errorcodes_test.go` runs kfsniff on it and " +
		"checks them.\n\n" +
		"| code | name | rule | what it says | recording | severity |\n| --- | --- | --- | --- | --- | --- |\n")
	for _, r := range ErrorCodes() {
		rec, sev := r.Recording, r.Severity
		if rec == "" {
			rec, sev = "none: "+r.NotRecorded, "-"
		} else {
			rec = "`" + rec + "`"
		}
		fmt.Fprintf(&b, "| %d | %s | %s | %s | %s | %s |\n", r.Code, r.Name, r.Rule, r.Says, rec, sev)
	}
	return b.String()
}
