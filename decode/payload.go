package decode

import "hash/crc32"

// The records a batch carries, apart from its header: what stays the same
// when a client sends the same records again under another producer id,
// epoch or sequence (or at another offset), which the header, and the CRC
// over it, do not.

// Payload is a magic-2 batch's records section as on the wire, after the
// 61-byte header (compressed if the batch is); nil for magic 0/1 messages
// and once Raw is gone.
func (b *Batch) Payload() []byte {
	if b.Magic != 2 || len(b.Raw) < batchHeaderLen {
		return nil
	}
	return b.Raw[batchHeaderLen:]
}

// PayloadSum fingerprints the records of a magic-2 batch: a CRC-32C of its
// first timestamp and Payload in the high half, the payload's length in the
// low half (bit 31 set, so that no sum is 0). Two batches with
// the same sum carry the same records (byte for byte, as the producer
// encoded them) but for a 2^-32 chance; the producer id, epoch, base
// sequence and base offset do not count. 0 when there is no payload.
func (b *Batch) PayloadSum() uint64 {
	p := b.Payload()
	if p == nil {
		return 0
	}
	// The first timestamp as on the wire (a local copy would cost an
	// allocation: crc32 keeps its argument from escape analysis).
	ts := b.Raw[27:35]
	sum := crc32.Update(crc32.Checksum(ts, castagnoli), castagnoli, p)
	return uint64(sum)<<32 | uint64(uint32(len(p))) | 1<<31
}
