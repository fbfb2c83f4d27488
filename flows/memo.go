package flows

import (
	"bytes"
	"slices"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

// memo keeps, per direction of a connection, the last bodies decoded by
// API key and version, so that a frame whose bytes after the correlation
// id equal those of an earlier one gets that body again instead of being
// decoded: a client in a retry loop sends the same Metadata request and
// gets the same Metadata answer, or the same NOT_LEADER_OR_FOLLOWER
// Produce answer, thousands of times.
//
// A body remembered is decoded from the memo's own copy of the bytes,
// which is never written again, so whatever in it aliases its bytes (kmsg
// keeps bytes fields, unknown tags and record sets as slices of the
// input) stays valid however long handlers keep it, on any goroutine; the
// record sets of such a body are not dropped after delivery
// (Message.shared), as they do not pin a frame. The bodies and error
// counts handed out are shared by every message they are handed to:
// handlers read them and never write them (TestMemoUnchanged holds every
// handler to it).
type memo struct {
	slots []memoSlot // up to memoSlots
	// tick orders the slots' uses: a new body takes the least recently
	// used slot (several for one key: a producer's answers differ by
	// the partitions a request carried, and alternate).
	tick uint32
	// misses counts frames in a row that matched no slot; past
	// memoMisses, the next skip frames are decoded without being
	// copied, backoff (doubling while nothing matches, up to
	// memoMaxSkip) of them: traffic that never repeats, such as a
	// producer's batches, pays few copies.
	misses  uint8
	skip    uint16
	backoff uint16
}

// memoSlot is a body decoded earlier.
type memoSlot struct {
	key, version int16
	used         bool
	last         uint32 // memo.tick when last used
	// b is the bytes after the correlation id the body was decoded
	// from (its header's rest, then the body at b[at:]).
	b     []byte
	at    int
	req   kmsg.Request
	resp  kmsg.Response
	codes []ErrorCount
	// enc is the body's encoding when remembered (only with memoCheck).
	enc []byte
}

const (
	memoSlots = 8
	// memoMaxFrame bounds the frames remembered, and memoBudget what
	// one analyzer's memos hold together (held: a slot, the copy and
	// about memoBodyFactor times its size for the decoded body); past
	// it no new body is remembered until a connection ends.
	memoMaxFrame   = 256 << 10
	memoBudget     = 2 << 20
	memoSlotCost   = 160
	memoBodyFactor = 4
	memoMisses     = 4
	memoSkip       = 32
	memoMaxSkip    = 1024
)

// memoCheck, set by tests only, re-encodes a body at every reuse and
// tells it whether the body or its error counts changed since they were
// remembered (a handler wrote to them).
var memoCheck func(key int16, response, changed bool)

// recall returns the slot of key and version whose bytes equal b (the
// frame after the correlation id), or nil; a miss counts towards
// skipping.
func (f *framer) recall(key, version int16, b []byte) *memoSlot {
	return f.memo.recall(key, version, b)
}

// recall is framer.recall in mm (nil: none).
func (mm *memo) recall(key, version int16, b []byte) *memoSlot {
	if mm == nil {
		return nil
	}
	for i := range mm.slots {
		s := &mm.slots[i]
		if s.used && s.key == key && s.version == version && bytes.Equal(s.b, b) {
			mm.misses, mm.backoff = 0, 0
			mm.tick++
			s.last = mm.tick
			if memoCheck != nil {
				memoCheck(key, s.resp != nil, s.changed())
			}
			return s
		}
	}
	if mm.skip > 0 {
		mm.skip--
	} else if mm.misses++; mm.misses >= memoMisses {
		mm.backoff = min(max(2*mm.backoff, memoSkip), memoMaxSkip)
		mm.misses, mm.skip = 0, mm.backoff
	}
	return nil
}

// copyFor returns a copy of b, a frame of key, to decode from and
// remember, or nil if b is not to be remembered: the first frame of its
// key in the direction (most connections send an API once or twice: they
// pay for no memo), frames skipped after misses, too large, or over the
// analyzer's budget.
func (f *framer) copyFor(key int16, b []byte) []byte {
	bit := uint64(1) << (uint16(key) % 64)
	if f.seen&bit == 0 {
		f.seen |= bit
		return nil
	}
	if len(b) > memoMaxFrame || f.s.a.memoHeld+held(b) > memoBudget || f.memo != nil && f.memo.skip > 0 {
		return nil
	}
	return append([]byte(nil), b...)
}

// remember keeps a body decoded from b (a copy from copyFor) at b[at:].
func (f *framer) remember(key, version int16, b []byte, at int, req kmsg.Request, resp kmsg.Response, codes []ErrorCount) {
	if f.memo == nil {
		f.memo = new(memo)
	}
	f.memo.keep(f.s.a, key, version, b, at, req, resp, codes)
}

// keep is remember in mm, counted in a's budget.
func (mm *memo) keep(a *Analyzer, key, version int16, b []byte, at int, req kmsg.Request, resp kmsg.Response, codes []ErrorCount) {
	var s *memoSlot
	if len(mm.slots) < memoSlots {
		mm.slots = append(mm.slots, memoSlot{})
		s = &mm.slots[len(mm.slots)-1]
	} else {
		s = &mm.slots[0]
		for i := range mm.slots {
			if mm.slots[i].last < s.last {
				s = &mm.slots[i]
			}
		}
		a.memoHeld -= held(s.b)
	}
	a.memoHeld += held(b)
	mm.tick++
	*s = memoSlot{key: key, version: version, used: true, last: mm.tick, b: b, at: at, req: req, resp: resp, codes: codes[:len(codes):len(codes)]}
	if memoCheck != nil {
		s.enc = s.encode()
	}
}

// held is what a slot remembering b is counted for in the budget.
func held(b []byte) int64 { return memoSlotCost + memoBodyFactor*int64(len(b)) }

// forget drops the direction's bodies from the analyzer's budget (the
// connection ends).
func (f *framer) forget() {
	f.memo.drop(f.s.a)
	f.memo = nil
}

// drop takes mm's bodies (nil: none) off a's budget.
func (mm *memo) drop(a *Analyzer) {
	if mm == nil {
		return
	}
	for i := range mm.slots {
		a.memoHeld -= held(mm.slots[i].b)
	}
}

// changed reports whether the slot's body or error counts changed since
// they were remembered.
func (s *memoSlot) changed() bool {
	var codes []ErrorCount
	if s.resp != nil {
		codes = errorCounts(s.resp, nil)
	}
	return !bytes.Equal(s.encode(), s.enc) || !slices.Equal(codes, s.codes)
}

func (s *memoSlot) encode() []byte {
	if s.req != nil {
		return s.req.AppendTo(nil)
	}
	return s.resp.AppendTo(nil)
}

// decodeRequest decodes the body of a request frame whose header is h,
// or recalls it; shared says the body is the memo's (see Message.shared).
func (f *framer) decodeRequest(h decode.RequestHeader, frame []byte) (req kmsg.Request, shared bool, err error) {
	const after = 8 // key, version, correlation id
	rest := frame[after:]
	if s := f.recall(h.Key, h.Version, rest); s != nil {
		return s.req, true, nil
	}
	b := f.copyFor(h.Key, rest)
	if b == nil {
		// (Into a body given back, msgpool.go.)
		req, err = decode.DecodeRequestInto(f.s.a.msgs.requestBody(h.Key), h.Key, h.Version, frame[h.Len:])
		return req, false, err
	}
	req, err = decode.DecodeRequest(h.Key, h.Version, b[h.Len-after:])
	if err != nil {
		return req, false, err
	}
	f.remember(h.Key, h.Version, b, h.Len-after, req, nil, nil)
	return req, true, nil
}

// decodeResponse decodes the body of a response frame to key at version
// and counts its error codes, or recalls both; shared as for
// decodeRequest.
func (f *framer) decodeResponse(key, version int16, frame []byte) (resp kmsg.Response, codes []ErrorCount, shared bool, err error) {
	const after = 4 // correlation id
	hl, err := decode.ResponseHeaderLen(frame, key, version)
	if err != nil {
		return nil, nil, false, err
	}
	rest := frame[after:]
	if wideKey(key) {
		return f.decodeWide(key, version, rest, hl-after)
	}
	if s := f.recall(key, version, rest); s != nil {
		return s.resp, s.codes, true, nil
	}
	b := f.copyFor(key, rest)
	if b == nil {
		// (Into a body given back, msgpool.go.)
		resp, err = decode.DecodeResponseInto(f.s.a.msgs.responseBody(key), key, version, frame[hl:])
	} else {
		resp, err = decode.DecodeResponse(key, version, b[hl-after:])
	}
	if err != nil {
		return resp, nil, false, err
	}
	codes = errorCounts(resp, nil)
	if b == nil {
		return resp, codes, false, nil
	}
	f.remember(key, version, b, hl-after, nil, resp, codes)
	return resp, codes, true, nil
}

// Some answers are the same on every connection, not only on one: every
// client's first Metadata request of a cluster gets the same answer (a
// short-lived admin client's, each on a new connection, 400 partitions
// on the small shape: over half of what flows allocated there), and
// ApiVersions' too. The memo of a connection never sees them twice, so
// the responses of these keys are remembered by the analyzer instead
// (Analyzer.wide), shared by all its connections as a connection's memo
// shares its bodies among its messages, under the same budget, until
// replaced or the analysis ends.

// wideKey reports whether the responses of key are remembered by the
// analyzer (Analyzer.wide) rather than by their connection.
func wideKey(key int16) bool {
	return key == int16(kmsg.Metadata) || key == int16(kmsg.ApiVersions)
}

// decodeWide is decodeResponse for a key of wideKey: rest is the frame
// after the correlation id, the body at rest[at:].
func (f *framer) decodeWide(key, version int16, rest []byte, at int) (resp kmsg.Response, codes []ErrorCount, shared bool, err error) {
	a := f.s.a
	if s := a.wide.recall(key, version, rest); s != nil {
		return s.resp, s.codes, true, nil
	}
	if len(rest) > memoMaxFrame || a.memoHeld+held(rest) > memoBudget || a.wide != nil && a.wide.skip > 0 {
		resp, err = decode.DecodeResponse(key, version, rest[at:])
		if err != nil {
			return resp, nil, false, err
		}
		return resp, errorCounts(resp, nil), false, nil
	}
	b := append([]byte(nil), rest...)
	resp, err = decode.DecodeResponse(key, version, b[at:])
	if err != nil {
		return resp, nil, false, err
	}
	codes = errorCounts(resp, nil)
	if a.wide == nil {
		a.wide = new(memo)
	}
	a.wide.keep(a, key, version, b, at, nil, resp, codes)
	return resp, codes, true, nil
}
