package flows

import (
	"errors"
	"slices"
	"unsafe"

	"github.com/kfsniff/kfsniff/decode"
)

// A request's frame, and the record bytes its batches alias, are valid only
// while the request is delivered: the Delivery releases them before the
// request waits for its response, so that a waiting request pins no
// buffer. A handler that needs some of them when the exchange comes (the
// frame, for a detail view; the fingerprints of the records produced,
// whose offsets only the response tells) asks flows to keep it, instead of
// keeping a table of pending requests of its own: flows keeps it on the
// message, from the request's delivery to the end of its exchange's, in
// bounded memory (see keptRequests).

// Keeper is a handler that needs some of each request when its exchange is
// delivered. The Delivery asks it once, when it is made.
type Keeper interface {
	Keep() []Keep
}

// Keep is what a handler needs kept of each request.
type Keep struct {
	// Frame is how many bytes of each request's frame to keep, from its
	// start (0: none): Message.Frame holds them again while the request's
	// exchange is delivered.
	Frame int
	// Records, if set, fingerprints the records of each request's record
	// batches (Produce requests) with this hasher while their bytes are
	// there; Message.RecordHashes gives them until the exchange has been
	// delivered. The hasher is the handler's, so that the fingerprints
	// compare with those it makes of other batches (a Fetch response's).
	Records *decode.RecordHasher
	// Batches, if set, chooses the batches whose records are
	// fingerprinted (all of them if nil). It must depend on the batch
	// only: a sharded analysis calls it on its workers too (Prefinger).
	Batches func(b *BatchRef) bool
}

// The bounds of what is kept: at most keptRequests requests hold
// something kept, keptBytes in all (frames, fingerprints at 24 bytes
// each). Beyond either, what the oldest request holds is dropped
// (Delivery.KeptDropped counts them): a request whose exchange never comes
// (its connection forgotten, a handler that panicked) holds its share
// until then.
const (
	keptRequests = 1 << 14
	keptBytes    = 32 << 20
	// keptPooled bounds the kept values ready for reuse, keptBufMax the
	// buffers they keep.
	keptPooled = 64
	keptBufMax = 64 << 10
)

// hashSize is the bytes of one fingerprint kept.
const hashSize = int(unsafe.Sizeof(decode.RecordHash{}))

// ErrNotKept says that no fingerprints were kept for a batch: none were
// asked for, the batch was not chosen (Keep.Batches), or they were dropped
// to stay within the bounds.
var ErrNotKept = errors.New("record fingerprints not kept")

// RecordHashes returns the fingerprints of the records of m.Batches[i] made
// by h, for a request whose batches a handler asked flows to fingerprint
// (Keep.Records): from the request's delivery to the end of its exchange's
// (do not keep the slice). The error is h's (decode.ErrOverCap,
// decode.ErrNotHashable, malformed records), or ErrNotKept.
func (m *Message) RecordHashes(h *decode.RecordHasher, i int) ([]decode.RecordHash, error) {
	if m.kept == nil {
		return nil, ErrNotKept
	}
	for j := range m.kept.prints {
		p := &m.kept.prints[j]
		if p.h != h || i < 0 || i >= len(p.spans) {
			continue
		}
		s := p.spans[i]
		return p.hashes[s.from:s.to:s.to], s.err
	}
	return nil, ErrNotKept
}

// kept is what is kept of one request.
type kept struct {
	seq    uint64 // its place in keeping's order
	size   int
	frame  []byte
	prints []prints // one per Keep with Records, in keeping.records' order
}

// prints are one hasher's fingerprints of a request's batches: batch i's
// are hashes[spans[i].from:spans[i].to].
type prints struct {
	h      *decode.RecordHasher
	hashes []decode.RecordHash
	spans  []printSpan
}

type printSpan struct {
	from, to int32
	err      error
}

// keeping is a Delivery's part: what the handlers asked to keep, and what
// is kept, in the order it was, in a ring: the request kept n-th (from 0)
// is at ring[n % len(ring)] while it holds something.
type keeping struct {
	frame    int
	records  []Keep
	ring     []*Message
	next     uint64 // requests kept so far
	oldest   uint64 // no request kept before it holds anything
	bytes    int
	maxBytes int
	free     []*kept
	dropped  int64
}

func (kp *keeping) add(ks []Keep) {
	for _, k := range ks {
		kp.frame = max(kp.frame, k.Frame)
		if k.Records != nil {
			kp.records = append(kp.records, k)
		}
	}
}

func (kp *keeping) on() bool { return kp.frame > 0 || len(kp.records) > 0 }

// request keeps what the handlers need of m, while its bytes are valid.
func (kp *keeping) request(m *Message) {
	frame := min(len(m.Frame), kp.frame)
	if frame == 0 && (len(kp.records) == 0 || len(m.Batches) == 0) {
		return
	}
	k := kp.alloc()
	k.frame = append(k.frame[:0], m.Frame[:frame]...)
	k.size = 64 + len(k.frame)
	k.prints = k.prints[:0] // a reused value held another request's
	if len(m.Batches) > 0 {
		k.prints = slices.Grow(k.prints, len(kp.records))[:len(kp.records)]
		for j := range kp.records {
			kp.fingerprint(&k.prints[j], &kp.records[j], m, j)
			k.size += hashSize*len(k.prints[j].hashes) + 24*len(k.prints[j].spans)
		}
	}
	if kp.maxBytes == 0 {
		kp.maxBytes = keptBytes
	}
	if k.size > kp.maxBytes {
		kp.dropped++
		kp.recycle(k)
		return
	}
	if kp.ring == nil {
		kp.ring = make([]*Message, keptRequests)
	}
	n := uint64(len(kp.ring))
	if kp.next >= n {
		// The slot's request, kept len(ring) requests ago, goes.
		kp.oldest = max(kp.oldest, kp.next-n+1)
		if old := kp.ring[kp.next%n]; old != nil {
			kp.drop(old)
		}
	}
	k.seq = kp.next
	m.kept = k
	kp.ring[kp.next%n] = m
	kp.next++
	kp.bytes += k.size
	for kp.bytes > kp.maxBytes {
		for !kp.live(kp.oldest) {
			kp.oldest++
		}
		kp.drop(kp.ring[kp.oldest%n])
	}
}

// fingerprint fills p with need's fingerprints of m's batches: those
// made ahead for the j-th Keep with Records, if a Prefinger made them
// (taken as need's hasher would have made them, see decode.Replay), else
// made here.
func (kp *keeping) fingerprint(p *prints, need *Keep, m *Message, j int) {
	p.h = need.Records
	p.h.StartFrame()
	p.hashes = p.hashes[:0]
	p.spans = slices.Grow(p.spans[:0], len(m.Batches))[:len(m.Batches)]
	var pre *preKeep
	if m.pre != nil && j < len(m.pre.keeps) && len(m.pre.keeps[j].batches) == len(m.Batches) {
		pre = &m.pre.keeps[j]
	}
	for i := range m.Batches {
		b := &m.Batches[i]
		if need.Batches != nil && !need.Batches(b) {
			p.spans[i] = printSpan{err: ErrNotKept}
			continue
		}
		from := len(p.hashes)
		var err error
		if pre != nil {
			p.hashes, err = need.Records.Replay(&b.Batch, &pre.batches[i], pre.hashes, p.hashes)
		} else {
			p.hashes, err = need.Records.Hashes(&b.Batch, p.hashes)
		}
		p.spans[i] = printSpan{from: int32(from), to: int32(len(p.hashes)), err: err}
	}
}

// live reports whether the request kept seq-th still holds something.
func (kp *keeping) live(seq uint64) bool {
	m := kp.ring[seq%uint64(len(kp.ring))]
	return m != nil && m.kept != nil && m.kept.seq == seq
}

// release lets go of what m holds, its exchange delivered.
func (kp *keeping) release(m *Message) {
	k := m.kept
	m.kept, m.Frame = nil, nil
	kp.bytes -= k.size
	if i := k.seq % uint64(len(kp.ring)); kp.ring[i] == m {
		kp.ring[i] = nil
	}
	kp.recycle(k)
}

// drop lets go of what m holds before its exchange, to stay in bounds.
func (kp *keeping) drop(m *Message) {
	kp.dropped++
	kp.release(m)
}

func (kp *keeping) alloc() *kept {
	if n := len(kp.free); n > 0 {
		k := kp.free[n-1]
		kp.free = kp.free[:n-1]
		return k
	}
	return &kept{}
}

func (kp *keeping) recycle(k *kept) {
	if len(kp.free) >= keptPooled || cap(k.frame) > keptBufMax {
		return
	}
	for j := range k.prints {
		p := &k.prints[j]
		if hashSize*cap(p.hashes) > keptBufMax {
			return
		}
		clear(p.spans) // the errors
		p.h = nil
	}
	kp.free = append(kp.free, k)
}

// KeptDropped is how many requests had what handlers asked to keep dropped
// before their exchange, to stay within the bounds (Keeper).
func (d *Delivery) KeptDropped() int64 { return d.keep.dropped }
