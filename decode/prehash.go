package decode

import "errors"

// Fingerprints made ahead: a sharded analysis decodes on several workers
// but delivers on one goroutine, whose hasher (a handler's) must make the
// fingerprints so that they compare, and must refuse batches by its own
// budget in delivery order. A worker's Twin makes them where the frame is
// (Prehash); the hasher then takes them (Replay) as if it had made them
// itself: the same budget checks, counts and results, without the
// decompression and hashing that made them.

// Prehashed is what Prehash found for one batch.
type Prehashed struct {
	// Done is false when the twin refused the batch for its own budget:
	// Replay then fingerprints it itself, if its budget allows.
	Done bool
	// Err is the outcome Hashes would give (nil, ErrNotHashable,
	// ErrOverCap, a malformed record or compression).
	Err error
	// N is the bytes the batch's decompression counts against the
	// budgets.
	N int64
	// From and To place its fingerprints in the slice Prehash appended
	// them to.
	From, To int32
}

// Twin returns a hasher making the same fingerprints as r (the same seed
// and cap), with a budget of its own as large as r's: for Prehash on
// another goroutine.
func (r *RecordHasher) Twin() *RecordHasher {
	t := &RecordHasher{seed: r.seed, max: r.max, budget: r.budget}
	if r.fixed != nil {
		t.fixed = newPrinter(r.fixed.key)
	}
	return t
}

// Prehash appends b's fingerprints to dst, as Hashes, and says what Replay
// needs to account for them. b.Raw must be valid.
func (r *RecordHasher) Prehash(b *Batch, dst []RecordHash) ([]RecordHash, Prehashed) {
	pre := Prehashed{Done: true, From: int32(len(dst))}
	p := b.Payload()
	if p == nil {
		pre.Err, pre.To = ErrNotHashable, pre.From
		return dst, pre
	}
	recs, n, spent, err := r.unpack(b, p)
	if spent != nil {
		return dst, Prehashed{From: pre.From, To: pre.From}
	}
	pre.N = n
	if err == nil {
		dst, err = r.parse(recs, b.FirstTimestamp, int(b.Records), dst)
	}
	pre.Err, pre.To = err, int32(len(dst))
	return dst, pre
}

// Replay appends to dst the fingerprints of b that a Twin of r made
// (hashes[pre.From:pre.To]) and returns what Hashes would have: it checks
// and spends r's budget and counts as Hashes does. A batch the twin did
// not do (pre.Done false) is fingerprinted here; b.Raw must then be
// valid.
func (r *RecordHasher) Replay(b *Batch, pre *Prehashed, hashes, dst []RecordHash) ([]RecordHash, error) {
	if !pre.Done {
		return r.Hashes(b, dst)
	}
	p := b.Payload()
	if p == nil {
		return dst, ErrNotHashable
	}
	if b.Codec() != CodecNone {
		r.counts.In += int64(len(p))
		if err := r.spent(); err != nil {
			return dst, err
		}
		if errors.Is(pre.Err, ErrOverCap) {
			r.counts.OverCap++
		}
		r.frame += pre.N
		r.counts.Out += pre.N
	}
	return append(dst, hashes[pre.From:pre.To]...), pre.Err
}
