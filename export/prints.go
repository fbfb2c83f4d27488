package export

import (
	"encoding/base64"
	"encoding/binary"
	"errors"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/flows"
)

// Record fingerprints (schema 3): what duplicate-batches compares of
// batches rebuilt or recompressed on the way (MirrorMaker 2), made where
// the batches' bytes are and shipped beside their headers. A file's
// analysis fingerprints records under a random seed; an agent's must
// equal every other agent's, so they are fixed (decode.NewRecordPrinter:
// SHA-256, or HMAC-SHA256 under Config.PrintKey, cut to 128 bits).

// MaxPrints bounds the fingerprints shipped: a batch of more records
// than MaxPrints ships none ("fp_err": "records", compared by CRC only
// at the correlator), and a partition's batches whose fingerprints
// would take one record past MaxPrints go on in another record (as past
// maxBatchesPerRecord batches). 16,384 fingerprints are 350 KB of
// base64, so that a record stays below the sink's default 1 MiB.
const MaxPrints = 16384

// The decompression bounds of the agent's printer: duplicate-batches'
// defaults (max-decompressed, -frame, -run, max-inflation), so that the
// agent refuses the batches a file's analysis would.
const (
	printCap        = 16 << 20
	printFrameBytes = 64 << 20
	printRunBytes   = 256 << 20
	printInflation  = 64
)

// newPrinter is the exporter's printer, or nil with fingerprints off.
func newPrinter(cfg *Config) *decode.RecordHasher {
	if cfg.NoPrints {
		return nil
	}
	p := decode.NewRecordPrinter(printCap, cfg.PrintKey)
	p.SetBudget(decode.Budget{Frame: printFrameBytes, Run: printRunBytes, Ratio: printInflation})
	return p
}

// Keep implements flows.Keeper: a Produce request's records are
// fingerprinted while its bytes are there (a sharded analysis does it on
// its workers), for its exchange's records.
func (e *Exporter) Keep() []flows.Keep {
	if e.printer == nil {
		return nil
	}
	return []flows.Keep{{Records: e.printer, Batches: printable}}
}

// printable reports a batch whose records duplicate-batches compares
// (its recordsComparable): the others ship no fingerprints.
func printable(b *flows.BatchRef) bool {
	return b.Magic == 2 && !b.Control() && !b.Transactional() && b.CRCOK
}

// fingerprint fills the fingerprints of e.batches (collect's), into e.fps:
// a Produce request's as flows kept them, a Fetch response's made here
// (their bytes are there during the exchange).
func (e *Exporter) fingerprint(x *flows.Exchange) {
	e.fps = e.fps[:0]
	if e.printer == nil {
		return
	}
	fetchFrame := true
	for i := range e.batches {
		bo := &e.batches[i]
		bo.from, bo.to, bo.fpErr = 0, 0, ""
		if !printable(bo.b) {
			continue
		}
		if bo.b.Records > MaxPrints {
			bo.fpErr = "records"
			continue
		}
		from := len(e.fps)
		var err error
		base := bo.offset // a produced batch's offset in the log, -1 unknown
		if base == -2 {
			base = bo.b.BaseOffset
		}
		k := keyOf(x.Conn.Server, bo.b, base)
		if hs, ok := e.lookup(k); ok {
			e.fps = append(e.fps, hs...)
		} else if bo.offset != -2 {
			var hs []decode.RecordHash
			if hs, err = x.Req.RecordHashes(e.printer, bo.i); err == nil && base >= 0 {
				e.prints.put(k, hs)
			}
			e.fps = append(e.fps, hs...)
		} else {
			if fetchFrame {
				e.printer.StartFrame()
				fetchFrame = false
			}
			if e.fps, err = e.printer.Hashes(&bo.b.Batch, e.fps); err == nil {
				e.prints.put(k, e.fps[from:])
			}
		}
		if err != nil {
			e.fps = e.fps[:from]
			bo.fpErr = printErr(err)
			continue
		}
		bo.from, bo.to = int32(from), int32(len(e.fps))
	}
}

// lookup returns the fingerprints made of a batch at k before, if any.
func (e *Exporter) lookup(k printKey) ([]decode.RecordHash, bool) {
	if k.base < 0 {
		return nil, false
	}
	return e.prints.get(k)
}

// printErr names why a batch ships no fingerprints (docs/export.md's
// fp_err).
func printErr(err error) string {
	switch {
	case errors.Is(err, flows.ErrNotKept):
		return "dropped"
	case errors.Is(err, decode.ErrOverCap):
		return "cap"
	case errors.Is(err, decode.ErrOverBudget):
		return "budget"
	}
	return "bad"
}

// appendPrints appends a batch's fingerprint fields: fp, base64 of 16
// bytes a record (Sum then Hi, big-endian), and fp_deltas when the
// records' offset deltas are not 0, 1, 2... (a compacted batch); or
// fp_err.
func (e *Exporter) appendPrints(b []byte, bo *batchOut) []byte {
	if bo.fpErr != "" {
		return appendStr(b, "fp_err", bo.fpErr)
	}
	ps := e.fps[bo.from:bo.to]
	if len(ps) == 0 {
		return b
	}
	e.body = e.body[:0]
	seq := true
	for i, p := range ps {
		e.body = binary.BigEndian.AppendUint64(e.body, p.Sum)
		e.body = binary.BigEndian.AppendUint64(e.body, p.Hi)
		seq = seq && p.Delta == int32(i)
	}
	b = appendField(b, "fp")
	b = append(b, '"')
	b = base64.StdEncoding.AppendEncode(b, e.body)
	b = append(b, '"')
	if !seq {
		b = appendField(b, "fp_deltas")
		b = append(b, '[')
		for i, p := range ps {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendIntRaw(b, int64(p.Delta))
		}
		b = append(b, ']')
	}
	return b
}

// cut splits each partition's batches into records of at most
// maxBatchesPerRecord batches and MaxPrints fingerprints (e.cuts).
func (e *Exporter) cut() {
	e.cuts = e.cuts[:0]
	for i := range e.parts {
		p := &e.parts[i]
		p.cutFrom, p.cutTo = len(e.cuts), len(e.cuts)
		if !p.hasBatch {
			continue
		}
		n, prints := 0, 0
		for j := p.firstBatch; j < p.lastBatch; j++ {
			bo := &e.batches[j]
			k := int(bo.to - bo.from)
			if n == 0 || n == maxBatchesPerRecord || prints+k > MaxPrints {
				e.cuts = append(e.cuts, j)
				n, prints = 0, 0
			}
			n++
			prints += k
		}
		p.cutTo = len(e.cuts)
	}
}
