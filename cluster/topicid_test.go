package cluster_test

import (
	"testing"

	"github.com/kfsniff/kfsniff/cluster"
)

// TestTopicID: the id is shown as kafka-topics.sh --describe shows it.
func TestTopicID(t *testing.T) {
	id := [16]byte{0x14, 0x65, 0xf2, 0x31, 0x4f, 0x5b, 0xe3, 0x0c, 0x8a, 0x87, 0x43, 0xed, 0x63, 0x96, 0x81, 0xfa}
	if got := cluster.TopicID(id); got != "FGXyMU9b4wyKh0PtY5aB-g" {
		t.Errorf("TopicID = %q, want FGXyMU9b4wyKh0PtY5aB-g", got)
	}
}
