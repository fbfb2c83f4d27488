package tally

import (
	"math/rand"
	"net/netip"
	"runtime"
	"testing"

	"github.com/kfsniff/kfsniff/internal/memtest"
)

func newestKey(i int) ConnKey {
	return ConnKey{ID: i, Client: netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, 2, byte(i >> 16), byte(i >> 8)}), uint16(i)),
		Server: netip.MustParseAddrPort("10.1.0.10:9092")}
}

// TestNewestCostsWhatItHolds: connections opened and closed at a steady
// rate (the soak's 50 short-lived clients a second) leave nothing behind
// once deleted: Newest with a bound of 65,536 holding 10 at a time costs
// a few kilobytes however many have passed through it. Before, its ring
// kept the key of every one of the last 65,536 put (72 bytes each, 4.7
// MB), filling for 22 minutes of the soak.
func TestNewestCostsWhatItHolds(t *testing.T) {
	heap := memtest.HeapLive
	before := heap()
	n := &Newest[*int]{Max: 1 << 16}
	v := new(int)
	for i := 0; i < 3<<16; i++ {
		n.Put(newestKey(i), v)
		if i >= 10 {
			n.Delete(newestKey(i - 10))
		}
	}
	grew := int64(heap()) - int64(before)
	if n.Len() != 10 || n.Forgotten != 0 {
		t.Fatalf("held %d, forgotten %d, want 10 and 0", n.Len(), n.Forgotten)
	}
	if grew > 256<<10 {
		t.Errorf("holding 10 connections after %d put and deleted costs %d bytes, want under 256 KiB", 3<<16, grew)
	}
	runtime.KeepAlive(n)
}

// TestNewestForgetsThePutMaxBefore: against a model of the rule (a put
// forgets the connection put Max puts of new connections before it, if
// still held), over random puts, re-puts and deletes.
func TestNewestForgetsThePutMaxBefore(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	for run := 0; run < 50; run++ {
		max := 1 + rng.Intn(8)
		n := &Newest[int]{Max: max}
		model := map[ConnKey]int{}
		seqOf := map[ConnKey]int{}
		var puts []ConnKey // keys in order of their puts as new
		var forgotten int64
		for step := 0; step < 400; step++ {
			k := newestKey(rng.Intn(24))
			switch rng.Intn(3) {
			case 0, 1:
				if _, ok := model[k]; !ok {
					if len(puts) >= max {
						old := puts[len(puts)-max]
						if _, ok := model[old]; ok && seqOf[old] == len(puts)-max {
							delete(model, old)
							forgotten++
						}
					}
					seqOf[k] = len(puts)
					puts = append(puts, k)
				}
				model[k] = step
				n.Put(k, step)
			case 2:
				delete(model, k)
				n.Delete(k)
			}
			if n.Len() != len(model) || n.Forgotten != forgotten {
				t.Fatalf("run %d step %d: held %d forgotten %d, model %d and %d", run, step, n.Len(), n.Forgotten, len(model), forgotten)
			}
			for mk, mv := range model {
				if got := n.Get(mk); got != mv {
					t.Fatalf("run %d step %d: Get(%d) = %d, want %d", run, step, mk.ID, got, mv)
				}
			}
		}
	}
}
