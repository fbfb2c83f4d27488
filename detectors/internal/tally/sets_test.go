package tally

import (
	"fmt"
	"net/netip"
	"testing"
)

func TestIDSets(t *testing.T) {
	replicas, isr, offline := IDs{}, IDs{}, IDs{}
	replicas.AddAll([]int32{3, 1, 2, -1})
	isr.AddAll([]int32{1})
	offline.AddAll([]int32{1})
	if got := fmt.Sprint(replicas.Sorted()); got != "[1 2 3]" {
		t.Errorf("AddAll skips unknown ids: %s", got)
	}
	if !isr.Within(offline) || replicas.Within(offline) || !(IDs{}).Within(offline) {
		t.Errorf("Within: in-sync replicas all offline, not every replica; an empty set is within any")
	}
	if got := fmt.Sprint(replicas.Minus(offline).Sorted()); got != "[2 3]" {
		t.Errorf("online replicas %s, want [2 3]", got)
	}
}

func TestServerLabels(t *testing.T) {
	aps := []netip.AddrPort{netip.MustParseAddrPort("10.0.0.9:9092"), netip.MustParseAddrPort("10.0.0.10:9092")}
	if got := fmt.Sprint(AddrStrings(aps)); got != "[10.0.0.9:9092 10.0.0.10:9092]" {
		t.Errorf("AddrStrings keeps the order: %s", got)
	}
	if got := fmt.Sprint(Labels(nil, aps)); got != "[10.0.0.9:9092 10.0.0.10:9092]" {
		t.Errorf("Labels without nodes: %s", got)
	}
}
