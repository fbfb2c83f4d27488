package detectors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"math"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/s2"
	"github.com/klauspost/compress/zstd"
	"github.com/pierrec/lz4/v4"

	"github.com/kfsniff/kfsniff/decode"
)

// recordHash is the fingerprint of one record's content (timestamp, key,
// value, headers) and its offset delta in its batch. Two records with the
// same hash carry the same data, whatever batch, codec or producer id
// they travelled in.
type recordHash struct {
	h     uint64
	delta int32
}

// Outcomes of hashing a batch's records that are not malformed data.
var (
	errOverCap     = errors.New("records decompress past the cap")
	errNotHashable = errors.New("not a magic 2 batch")
)

// recordHasher decompresses record batches (gzip, snappy in both the raw
// and the xerial framing, lz4 frames, zstd) into one reused buffer, never
// past max bytes, and fingerprints their records. It keeps its decoders
// for reuse; it is not safe for concurrent use, like the detectors.
type recordHasher struct {
	seed maphash.Seed
	max  int
	out  bytes.Buffer
	lim  io.LimitedReader
	src  bytes.Reader
	gz   *gzip.Reader
	lz   *lz4.Reader
	zs   *zstd.Decoder
	zbuf []byte
	h    maphash.Hash
}

func newRecordHasher(max int) *recordHasher {
	r := &recordHasher{seed: maphash.MakeSeed(), max: max}
	r.h.SetSeed(r.seed)
	return r
}

// hashes appends to dst the fingerprints of b's records. b.Raw must be
// valid (it is read during the call and not kept).
func (r *recordHasher) hashes(b *decode.Batch, dst []recordHash) ([]recordHash, error) {
	if b.Magic != 2 || len(b.Raw) < 61 {
		return dst, errNotHashable
	}
	recs, err := r.decompress(b.Codec(), b.Raw[61:])
	if err != nil {
		return dst, err
	}
	return r.parse(recs, b.FirstTimestamp, int(b.Records), dst)
}

// idMix is a fingerprint of a topic id, folded into record fingerprints so
// that they match only within one topic incarnation (zero: id unknown).
func (r *recordHasher) idMix(id [16]byte) uint64 {
	if id == ([16]byte{}) {
		return 0
	}
	return maphash.Bytes(r.seed, id[:])
}

// decompress returns the records section of a batch, decompressed; the
// result is valid until the next call.
func (r *recordHasher) decompress(codec decode.Codec, src []byte) ([]byte, error) {
	switch codec {
	case decode.CodecNone:
		return src, nil
	case decode.CodecGzip:
		if r.gz == nil {
			r.gz = new(gzip.Reader)
		}
		r.src.Reset(src)
		if err := r.gz.Reset(&r.src); err != nil {
			return nil, fmt.Errorf("gzip: %w", err)
		}
		return r.readBounded(r.gz)
	case decode.CodecSnappy:
		return r.snappy(src)
	case decode.CodecLZ4:
		if r.lz == nil {
			r.lz = lz4.NewReader(nil)
		}
		r.src.Reset(src)
		r.lz.Reset(&r.src)
		return r.readBounded(r.lz)
	case decode.CodecZstd:
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
			return nil, errOverCap
		}
		if err != nil {
			return nil, fmt.Errorf("zstd: %w", err)
		}
		if cap(out) <= r.max {
			r.zbuf = out
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown codec %d", codec)
}

func (r *recordHasher) readBounded(src io.Reader) ([]byte, error) {
	r.out.Reset()
	r.lim.R, r.lim.N = src, int64(r.max)+1
	n, err := r.out.ReadFrom(&r.lim)
	if err != nil {
		return nil, err
	}
	if n > int64(r.max) {
		return nil, errOverCap
	}
	return r.out.Bytes(), nil
}

// xerialPrefix starts the snappy framing of the Java client.
var xerialPrefix = []byte{0x82, 'S', 'N', 'A', 'P', 'P', 'Y', 0}

// snappy decodes a raw snappy block or xerial-framed blocks (a 16-byte
// header, then big-endian block lengths and blocks), checking the decoded
// lengths the blocks claim against the cap before decoding.
func (r *recordHasher) snappy(src []byte) ([]byte, error) {
	if len(src) <= 16 || !bytes.HasPrefix(src, xerialPrefix) {
		n, err := s2.DecodedLen(src)
		if err != nil {
			return nil, fmt.Errorf("snappy: %w", err)
		}
		if n > r.max {
			return nil, errOverCap
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
			return nil, errOverCap
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
func (r *recordHasher) parse(b []byte, firstTS int64, n int, dst []recordHash) ([]recordHash, error) {
	if n < 0 || n > len(b) {
		return dst, errRecord
	}
	var ts [8]byte
	for i := 0; i < n; i++ {
		length, k := binary.Varint(b)
		if k <= 0 || length < 0 || length > int64(len(b)-k) {
			return dst, errRecord
		}
		rec := b[k : k+int(length)]
		b = b[k+int(length):]
		if len(rec) < 1 {
			return dst, errRecord
		}
		rec = rec[1:] // attributes: unused
		tsDelta, k := binary.Varint(rec)
		if k <= 0 {
			return dst, errRecord
		}
		rec = rec[k:]
		delta, k := binary.Varint(rec)
		if k <= 0 || delta < 0 || delta > math.MaxInt32 {
			return dst, errRecord
		}
		rec = rec[k:]
		r.h.Reset()
		binary.BigEndian.PutUint64(ts[:], uint64(firstTS+tsDelta))
		r.h.Write(ts[:])
		var ok bool
		if rec, ok = r.field(rec, true); !ok { // key
			return dst, errRecord
		}
		if rec, ok = r.field(rec, true); !ok { // value
			return dst, errRecord
		}
		headers, k := binary.Varint(rec)
		if k <= 0 || headers < 0 || headers > int64(len(rec)) {
			return dst, errRecord
		}
		rec = rec[k:]
		for range headers {
			if rec, ok = r.field(rec, false); !ok {
				return dst, errRecord
			}
			if rec, ok = r.field(rec, true); !ok {
				return dst, errRecord
			}
		}
		dst = append(dst, recordHash{h: r.h.Sum64(), delta: int32(delta)})
	}
	return dst, nil
}

// field hashes one length-prefixed field (-1 is null where nullable) and
// returns the bytes after it.
func (r *recordHasher) field(b []byte, nullable bool) ([]byte, bool) {
	l, k := binary.Varint(b)
	if k <= 0 || l < -1 || l > int64(len(b)-k) || (l == -1 && !nullable) {
		return nil, false
	}
	var lb [8]byte
	binary.BigEndian.PutUint64(lb[:], uint64(l))
	r.h.Write(lb[:]) // the length (or -1) keeps null apart from empty
	if l <= 0 {
		return b[k:], true
	}
	r.h.Write(b[k : k+int(l)])
	return b[k+int(l):], true
}
