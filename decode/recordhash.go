package decode

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"
	"math/bits"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"
)

// RecordHash is the fingerprint of one record's content (timestamp, key,
// value, headers) and its offset delta in its batch. Two records with the
// same Sum carry the same data, whatever batch, codec or producer id they
// travelled in, for fingerprints made by one RecordHasher (each has a
// random seed, so that traffic cannot be built to collide).
//
// A printer's (NewRecordPrinter) fingerprints are fixed instead: the
// 128-bit Sum and Hi are the same on every host, for shipping.
type RecordHash struct {
	Sum   uint64
	Hi    uint64 // a printer's second half; 0 for a hasher's
	Delta int32
}

// Outcomes of fingerprinting a batch's records that are not malformed
// data: the records decompress past the hasher's bound, or the batch is
// not a magic 2 batch (legacy messages are not fingerprinted).
var (
	ErrOverCap     = errors.New("records decompress past the cap")
	ErrNotHashable = errors.New("not a magic 2 batch")
	// ErrOverBudget says that the batch was not decompressed: its frame's
	// or the run's decompression budget (Budget) was spent.
	ErrOverBudget = errors.New("decompression budget spent")
)

// Budget bounds decompression beyond one batch's cap, so that batches
// each within it cannot add up to hours (a few hundred bytes of zstd
// inflate to the cap): at most Frame bytes for the batches of one frame
// (StartFrame), and over the run at most Run bytes plus Ratio times the
// compressed bytes offered so far (time linear in the input). A batch is
// decompressed if the budget is not spent when it starts (so one batch's
// cap is the most a budget is passed by); past it, batches are refused
// with ErrOverBudget and counted (Counts). Zero fields: no such bound.
type Budget struct {
	Frame, Run, Ratio int64
}

// HasherCounts are what a RecordHasher refused and what it decompressed.
type HasherCounts struct {
	// OverCap counts batches whose records passed the per-batch cap;
	// OverFrame and OverRun those refused for the frame's or the run's
	// budget.
	OverCap, OverFrame, OverRun int64
	// In is the compressed bytes offered (refused ones included), Out
	// the bytes decompressed.
	In, Out int64
}

// RecordHasher decompresses record batches (gzip, snappy in both the raw
// and the xerial framing, lz4 frames, zstd) into one reused buffer, never
// past its bound, and fingerprints their records. It keeps its decoders
// for reuse; it is not safe for concurrent use.
type RecordHasher struct {
	seed   maphash.Seed
	max    int
	budget Budget
	frame  int64 // decompressed since StartFrame
	counts HasherCounts
	out    bytes.Buffer
	lim    io.LimitedReader
	src    bytes.Reader
	gz     *gzip.Reader
	lz     *lz4.Reader
	zs     *zstd.Decoder
	zbuf   []byte
	canon  []byte   // a record's content in its minimal encoding
	fixed  *printer // a printer's fixed function (NewRecordPrinter), else nil
}

// NewRecordHasher returns a hasher that decompresses at most limit bytes of
// one batch's records (at least 1).
func NewRecordHasher(limit int) *RecordHasher {
	return &RecordHasher{seed: maphash.MakeSeed(), max: max(limit, 1)}
}

// SetBudget sets the decompression budget beyond the per-batch cap.
func (r *RecordHasher) SetBudget(b Budget) { r.budget = b }

// StartFrame starts the budget of a new frame: the batches of one
// Produce request or Fetch response.
func (r *RecordHasher) StartFrame() { r.frame = 0 }

// Counts returns what the hasher refused and decompressed so far.
func (r *RecordHasher) Counts() HasherCounts { return r.counts }

// spent reports which budget, if any, refuses the next batch.
func (r *RecordHasher) spent() error {
	b := &r.budget
	switch {
	case b.Frame > 0 && r.frame >= b.Frame:
		r.counts.OverFrame++
		return ErrOverBudget
	case (b.Run > 0 || b.Ratio > 0) && r.counts.Out >= b.Run+b.Ratio*r.counts.In:
		r.counts.OverRun++
		return ErrOverBudget
	}
	return nil
}

// Hashes appends to dst the fingerprints of b's records, in order. b.Raw
// must be valid (it is read during the call and not kept). The error is
// ErrNotHashable, ErrOverCap or ErrOverBudget (nothing appended), or says
// why the records are malformed (the fingerprints of the records before
// the damage are appended).
func (r *RecordHasher) Hashes(b *Batch, dst []RecordHash) ([]RecordHash, error) {
	p := b.Payload()
	if p == nil {
		return dst, ErrNotHashable
	}
	recs, _, spent, err := r.unpack(b, p)
	if spent != nil {
		return dst, spent
	}
	if err != nil {
		return dst, err
	}
	return r.parse(recs, b.FirstTimestamp, int(b.Records), dst)
}

// unpack decompresses b's payload p and counts what it cost against the
// budgets: the bytes offered, refused or not, and the bytes out (a batch
// past the cap cost the cap), n. spent is the budget's refusal before
// anything was decompressed; err the decompression's. Hashes and Prehash
// share it, so that a worker's fingerprints cost what the merger's would.
func (r *RecordHasher) unpack(b *Batch, p []byte) (recs []byte, n int64, spent, err error) {
	codec := b.Codec()
	if codec != CodecNone {
		r.counts.In += int64(len(p))
		if spent = r.spent(); spent != nil {
			return nil, 0, spent, nil
		}
	}
	recs, err = r.decompress(codec, p)
	if codec != CodecNone {
		n = int64(len(recs))
		if errors.Is(err, ErrOverCap) {
			n = int64(r.max)
			r.counts.OverCap++
		}
		r.frame += n
		r.counts.Out += n
	}
	return recs, n, nil, err
}

// TopicMix is a fingerprint of a topic id, to fold into record
// fingerprints (Sum ^ TopicMix) so that they match only within one topic
// incarnation; 0 for the zero id (unknown: the topic was named).
func (r *RecordHasher) TopicMix(id [16]byte) uint64 {
	if id == ([16]byte{}) {
		return 0
	}
	return maphash.Bytes(r.seed, id[:])
}

// decompress returns the records section of a batch, decompressed; the
// result is valid until the next call.
func (r *RecordHasher) decompress(codec Codec, src []byte) ([]byte, error) {
	switch codec {
	case CodecNone:
		return src, nil
	case CodecGzip:
		if r.gz == nil {
			r.gz = new(gzip.Reader)
		}
		r.src.Reset(src)
		if err := r.gz.Reset(&r.src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return r.readBounded(r.gz)
	case CodecSnappy:
		return r.snappy(src)
	case CodecLZ4:
		if r.lz == nil {
			r.lz = lz4.NewReader(nil)
		}
		r.src.Reset(src)
		r.lz.Reset(&r.src)
		return r.readBounded(r.lz)
	case CodecZstd:
		if r.zs == nil {
			zs, err := zstd.NewReader(nil,
				zstd.WithDecoderConcurrency(1),
				zstd.WithDecoderLowmem(true),
				zstd.WithDecoderMaxMemory(uint64(max(r.max, 1))))
			if err != nil {
				return nil, fmt.Errorf("zstd: %w", err)
			}
			r.zs = zs
		}
		out, err := r.zs.DecodeAll(src, r.zbuf[:0])
		if errors.Is(err, zstd.ErrDecoderSizeExceeded) || errors.Is(err, zstd.ErrWindowSizeExceeded) || len(out) > r.max {
			return nil, ErrOverCap
		}
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		// Kept for the next batch, as large as the cap's growth by
		// append makes it (a 16 MiB batch is then decompressed into
		// it, not into a new buffer each time: the garbage of a
		// run of large batches passed the heap bound).
		if cap(out) <= r.max+r.max/2 {
			r.zbuf = out
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

func (r *RecordHasher) readBounded(src io.Reader) ([]byte, error) {
	r.out.Reset()
	r.lim.R, r.lim.N = src, int64(r.max)+1
	n, err := r.out.ReadFrom(&r.lim)
	if err != nil {
		return nil, err
	}
	if n > int64(r.max) {
		return nil, ErrOverCap
	}
	return r.out.Bytes(), nil
}

// xerialPrefix starts the snappy framing of the Java client.
var xerialPrefix = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappy decodes a raw snappy block or xerial-framed blocks (a 16-byte
// header, then big-endian block lengths and blocks), checking the decoded
// lengths the blocks claim against the cap before decoding.
func (r *RecordHasher) snappy(src []byte) ([]byte, error) {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > r.max {
			return nil, ErrOverCap
		}
		out, err := s2.Decode(r.zbuf[:0], src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		r.zbuf = out
		return out, nil
	}
	out := r.zbuf[:0]
	for rem := src[16:]; len(rem) > 0; {
		if len(rem) < 4 {
			return nil, errors.New("snappy: malformed xerial framing")
		}
		size := int(binary.BigEndian.Uint32(rem))
		rem = rem[4:]
		if size < 0 || size > len(rem) {
			return nil, errors.New("snappy: malformed xerial framing")
		}
		n, err := s2.DecodedLen(rem[:size])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > r.max-len(out) {
			return nil, ErrOverCap
		}
		block, err := s2.Decode(out[len(out):cap(out)], rem[:size])
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		out = append(out, block...)
		rem = rem[size:]
	}
	r.zbuf = out
	return out, nil
}

var errRecord = errors.New("malformed record")

// parse fingerprints n records: length, attributes, timestamp delta,
// offset delta, key, value, headers, with zigzag varints. The timestamp
// is hashed as an absolute time, so records re-batched under another
// first timestamp still match.
//
// A record's content (key, value, headers) is hashed in one call over its
// bytes as they are on the wire, from the key's length to the end of the
// last header: that encoding is a one-to-one image of the content when
// its varints are minimal, as every producer writes them. A record with a
// longer varint (the wire allows it) or with bytes after its headers is
// hashed as its minimal encoding, rebuilt, so that equal content always
// gives equal fingerprints.
func (r *RecordHasher) parse(b []byte, firstTS int64, n int, dst []RecordHash) ([]RecordHash, error) {
	if n < 0 || n > len(b) {
		return dst, errRecord
	}
	for i := 0; i < n; i++ {
		length, k := varint(b)
		if k <= 0 || length < 0 || length > int64(len(b)-k) {
			return dst, errRecord
		}
		rec := b[k : k+int(length)]
		b = b[k+int(length):]
		if len(rec) < 1 {
			return dst, errRecord
		}
		rec = rec[1:] // attributes: unused
		tsDelta, k := varint(rec)
		if k <= 0 {
			return dst, errRecord
		}
		rec = rec[k:]
		delta, k := varint(rec)
		if k <= 0 || delta < 0 || delta > math.MaxInt32 {
			return dst, errRecord
		}
		rec = rec[k:]
		end, minimal, ok := contentEnd(rec)
		if !ok {
			return dst, errRecord
		}
		content := rec[:end]
		if !minimal || end != len(rec) {
			r.canon = canonical(r.canon[:0], content)
			content = r.canon
		}
		if r.fixed != nil {
			lo, hi := r.fixed.print(content, firstTS+tsDelta)
			dst = append(dst, RecordHash{Sum: lo, Hi: hi, Delta: int32(delta)})
			continue
		}
		h := maphash.Bytes(r.seed, content) ^ uint64(firstTS+tsDelta)*0x9e3779b97f4a7c15
		dst = append(dst, RecordHash{Sum: fmix64(h), Delta: int32(delta)})
	}
	return dst, nil
}

// contentEnd walks a record's key, value and headers, checking them as
// field checks each, and returns where they end and whether every length
// is a minimal varint.
func contentEnd(rec []byte) (end int, minimal, ok bool) {
	minimal = true
	at := 0
	if at, ok = skipField(rec, at, true, &minimal); !ok { // key
		return 0, false, false
	}
	if at, ok = skipField(rec, at, true, &minimal); !ok { // value
		return 0, false, false
	}
	headers, k := varint(rec[at:])
	if k <= 0 || headers < 0 || headers > int64(len(rec)-at) {
		return 0, false, false
	}
	minimal = minimal && k == varintLen(headers)
	at += k
	for range headers {
		if at, ok = skipField(rec, at, false, &minimal); !ok {
			return 0, false, false
		}
		if at, ok = skipField(rec, at, true, &minimal); !ok {
			return 0, false, false
		}
	}
	return at, minimal, true
}

// skipField checks the length-prefixed field at rec[at:] (-1 is null
// where nullable) and returns where it ends.
func skipField(rec []byte, at int, nullable bool, minimal *bool) (int, bool) {
	l, k := varint(rec[at:])
	if k > 1 && k != varintLen(l) {
		*minimal = false
	}
	if k <= 0 || l < -1 || l > int64(len(rec)-at-k) || (l == -1 && !nullable) {
		return 0, false
	}
	return at + k + max(int(l), 0), true
}

// canonical appends the minimal encoding of content, a record's key,
// value and headers already checked by contentEnd.
func canonical(dst, content []byte) []byte {
	field := func() {
		l, k := binary.Varint(content)
		dst = binary.AppendVarint(dst, l)
		content = content[k:]
		if l > 0 {
			dst = append(dst, content[:l]...)
			content = content[l:]
		}
	}
	field()
	field()
	headers, k := binary.Varint(content)
	dst = binary.AppendVarint(dst, headers)
	content = content[k:]
	for range headers {
		field()
		field()
	}
	return dst
}

// varint is binary.Varint, with the one- and two-byte encodings, nearly
// all of a record's, decoded inline.
func varint(b []byte) (int64, int) {
	if len(b) > 0 && b[0] < 0x80 {
		u := uint64(b[0])
		return int64(u>>1) ^ -int64(u&1), 1
	}
	if len(b) > 1 && b[1] < 0x80 {
		u := uint64(b[0]&0x7f) | uint64(b[1])<<7
		return int64(u>>1) ^ -int64(u&1), 2
	}
	return binary.Varint(b)
}

// varintLen is the length of v's minimal zigzag varint.
func varintLen(v int64) int {
	ux := uint64(v)<<1 ^ uint64(v>>63)
	return (bits.Len64(ux|1) + 6) / 7
}

// fmix64 is MurmurHash3's finaliser: a bijection that spreads every input
// bit over the output.
func fmix64(h uint64) uint64 {
	h ^= h >> 33
	h *= 0xff51afd7ed558ccd
	h ^= h >> 33
	h *= 0xc4ceb9fe1a85ec53
	h ^= h >> 33
	return h
}
