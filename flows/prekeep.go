package flows

import (
	"slices"

	"github.com/kfsniff/kfsniff/decode"
)

// On a sharded analysis the Delivery runs on one goroutine for every
// worker, and fingerprinting the records of produced batches (Keep.Records:
// decompressing and hashing every record) made it the slowest stage on
// bulk produce traffic. A Prefinger lets each worker make them where the
// frame was just decoded, with twins of the handlers' hashers; the
// Delivery takes them in delivery order as its hashers would have made
// them (decode.RecordHasher.Replay), so that the fingerprints, the
// budgets' refusals and the counts are the same as one analyzer's.

// Prefinger makes, for one worker, the record fingerprints that the
// handlers of a Delivery asked to keep.
type Prefinger struct {
	keeps []preNeed
	// spare takes back from the Delivery the preprints it is done with
	// (release), so that a worker does not allocate and grow them anew
	// for every request.
	spare chan *preprints
}

// Bounds of the preprints kept for reuse: how many, and the largest
// (fingerprints of one request) worth keeping.
const (
	preSpares    = 64
	preSpareMost = 1 << 12
)

type preNeed struct {
	h       *decode.RecordHasher // a twin of the handler's
	batches func(b *BatchRef) bool
}

// preprints are the fingerprints made ahead for one request, one preKeep
// per Keep with Records, in the Delivery's order.
type preprints struct {
	keeps []preKeep
	spare chan<- *preprints
}

// recycle gives pp back to its Prefinger, unless it grew too large.
func (pp *preprints) recycle() {
	for i := range pp.keeps {
		if cap(pp.keeps[i].hashes) > preSpareMost {
			return
		}
	}
	select {
	case pp.spare <- pp:
	default:
	}
}

type preKeep struct {
	hashes  []decode.RecordHash
	batches []decode.Prehashed // one per batch of the message
}

// Prefinger returns a Prefinger for a worker whose events d delivers, or
// nil if no handler asked for record fingerprints. Each worker needs its
// own.
func (d *Delivery) Prefinger() *Prefinger {
	if len(d.keep.records) == 0 {
		return nil
	}
	p := &Prefinger{spare: make(chan *preprints, preSpares)}
	for _, k := range d.keep.records {
		p.keeps = append(p.keeps, preNeed{h: k.Records.Twin(), batches: k.Batches})
	}
	return p
}

// Request makes the fingerprints of m's batches, while its frame is there,
// for the Delivery to take when it delivers m.
func (p *Prefinger) Request(m *Message) {
	if p == nil || len(m.Batches) == 0 {
		return
	}
	var pp *preprints
	select {
	case pp = <-p.spare:
	default:
		pp = &preprints{keeps: make([]preKeep, len(p.keeps)), spare: p.spare}
	}
	for j := range p.keeps {
		need, k := &p.keeps[j], &pp.keeps[j]
		need.h.StartFrame()
		k.hashes = k.hashes[:0]
		k.batches = slices.Grow(k.batches[:0], len(m.Batches))[:len(m.Batches)]
		clear(k.batches)
		for i := range m.Batches {
			b := &m.Batches[i]
			if need.batches != nil && !need.batches(b) {
				continue
			}
			k.hashes, k.batches[i] = need.h.Prehash(&b.Batch, k.hashes)
		}
	}
	m.pre = pp
}
