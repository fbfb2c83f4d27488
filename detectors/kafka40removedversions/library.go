package kafka40removedversions

import (
	"slices"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/flows"
)

// library is a client library as an operator knows it: how it names itself
// in ApiVersions v3+ (ClientSoftwareName, KIP-511), the client ids it uses
// when none is configured, and what to upgrade to so that Kafka 4.0 serves
// every version it sends.
//
// The versions are those KIP-896 checked when it chose what to remove
// ("we take the latest client release at the end of 2021"): librdkafka
// 1.8.2, KafkaJS 1.15.0, Sarama 1.30.1, kafka-python 2.0.2, and for the
// Java client Kafka 2.1, the KIP's baseline (Kafka 4.0's upgrade notes:
// "Clients ... must be on version 2.1 or higher"). A library that picks
// request versions from a setting rather than from the broker's ApiVersions
// answer sends old versions whatever its release if that setting is old:
// the advice says which setting.
type library struct {
	name string
	// software are ClientSoftwareName values, exact, or prefixes when
	// they end in '-'.
	software []string
	// clientIDs are default client ids, exact, or prefixes when they end
	// in '-'.
	clientIDs []string
	advice    string
}

var libraries = []library{
	{
		name:      "Apache Kafka Java client",
		software:  []string{"apache-kafka-java"},
		clientIDs: []string{"console-producer", "console-consumer", "producer-", "consumer-", "adminclient-"},
		advice: "upgrade the application's kafka-clients (and Kafka Streams or Connect) to 2.1 or later: Kafka 4.0's " +
			"upgrade notes require clients on 2.1 or higher, and 4.0 serves every version a 2.1 client sends.",
	},
	{
		name:      "librdkafka",
		software:  []string{"librdkafka", "confluent-kafka-"},
		clientIDs: []string{"rdkafka"},
		advice: "upgrade librdkafka (and the client built on it: confluent-kafka-python, -go, -dotnet, node-rdkafka) to " +
			"1.8.2 or later, the release KIP-896 checked, and keep api.version.request=true (the default) so that it " +
			"picks versions from the broker's ApiVersions answer; with Kerberos, 2.11.0 or later (KAFKA-19444).",
	},
	{
		name:      "kafka-python",
		software:  []string{"kafka-python"},
		clientIDs: []string{"kafka-python-"},
		advice: "upgrade kafka-python to 2.0.2 or later (the release KIP-896 checked; 2.1.3 and later are tested " +
			"against Kafka 4.0 brokers) and leave api_version unset, or set it to (2, 1) or higher: kafka-python picks " +
			"request versions from the broker version it detects or is given, so an old api_version sends old " +
			"versions whatever the release.",
	},
	{
		name:      "Sarama",
		software:  []string{"sarama"},
		clientIDs: []string{"sarama"},
		advice: "upgrade Sarama to 1.30.1 or later (the release KIP-896 checked) and set Config.Version to " +
			"sarama.V2_1_0_0 or higher: Sarama picks request versions from Config.Version, not from the broker.",
	},
	{
		name:      "KafkaJS",
		clientIDs: []string{"kafkajs"},
		advice: "upgrade KafkaJS to 1.15.0 or later, the release KIP-896 checked (it picks versions from the " +
			"broker's ApiVersions answer).",
	},
	{
		name:     "franz-go (kgo)",
		software: []string{"kgo"},
		advice: "franz-go picks the highest version the broker serves: a kgo client sending these was pinned " +
			"(kgo.MaxVersions, kversion) or talked to a broker older than 2.1; remove the pin.",
	},
}

// genericAdvice is what to do when the library is not known.
const genericAdvice = "upgrade the client library to a release that picks request versions from the broker's " +
	"ApiVersions answer (KIP-35) and knows Kafka 2.1's: the releases KIP-896 checked were the Java client 2.1, " +
	"librdkafka 1.8.2, KafkaJS 1.15.0, Sarama 1.30.1 and kafka-python 2.0.2."

// brokerAdvice is what to do when a broker sent them (replication).
const brokerAdvice = "a broker sent these as a replica fetcher: its inter.broker.protocol.version is below 2.1. " +
	"Kafka 4.0 accepts brokers from 3.3 on (KRaft, metadata.version 3.3 or later): upgrade the cluster to 3.3-3.9 " +
	"and finish that upgrade first."

// identify names the library of a client: from the software it told
// (told), else from its client id (a guess).
func identify(software, clientID string) (lib *library, told bool) {
	for i := range libraries {
		if software != "" && match(libraries[i].software, software) {
			return &libraries[i], true
		}
	}
	if software != "" {
		return nil, false
	}
	for i := range libraries {
		if match(libraries[i].clientIDs, clientID) {
			return &libraries[i], false
		}
	}
	return nil, false
}

func match(patterns []string, s string) bool {
	return slices.ContainsFunc(patterns, func(p string) bool { return strings.HasSuffix(p, "-") && strings.HasPrefix(s, p) || s == p })
}

// told keeps the software a client names in ApiVersions v3+.
func (r *rule) told(m *flows.Message) {
	q, ok := m.Req.(*kmsg.ApiVersionsRequest)
	if !ok || q.ClientSoftwareName == "" && q.ClientSoftwareVersion == "" {
		return
	}
	k := m.Client
	if _, ok := r.software[k]; ok || len(r.software) >= maxSoftware {
		return
	}
	r.software[k] = software{q.ClientSoftwareName, q.ClientSoftwareVersion}
}
