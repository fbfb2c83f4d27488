package workload

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/internal/kmsgtest"
)

// frame is a Kafka frame encoded once and then patched in place before each
// send: the correlation id, the client id, and the fields located by marks
// (sentinel values written by kmsg where the real values go). Encoding a
// frame once and patching a few bytes is what keeps generating a gigabyte
// fast; the patched fields keep every connection's traffic distinct and its
// offsets moving forward, as a real client's are.
type frame struct {
	b        []byte
	corrAt   int // 8 in requests, 4 in responses
	clientAt int // first byte of the client id in requests, else 0
	clientN  int
	at, n    []int   // position and length of each mark
	digits   [][]int // per records mark: where each record's placeholders are, from the mark's start
}

// records marks a records section (one or more record batches made by
// batches) in a frame. Unlike other marks, equal sections may repeat in one
// frame (the same batch for several partitions): records marks are found in
// the order given, each after the previous one, so they must be given in
// wire order.
type records []byte

// Sentinels: values nothing else in a generated frame holds, each found
// exactly once where kmsg encoded it.
const (
	mark32 int32 = 0x7e570000
	mark64 int64 = 0x3c3c3c3c3c000000
)

func m32(k int) int32 { return mark32 + int32(k) }
func m64(k int) int64 { return mark64 + int64(k) }

// markBytes is what a mark looks like on the wire: an int32, an int64, a
// string (its bytes) or records.
func markBytes(m any) []byte {
	switch v := m.(type) {
	case int32:
		return binary.BigEndian.AppendUint32(nil, uint32(v))
	case int64:
		return binary.BigEndian.AppendUint64(nil, uint64(v))
	case string:
		return []byte(v)
	case records:
		return v
	}
	panic(fmt.Sprintf("workload: mark of type %T", m))
}

// clientMark is the client id every request template is encoded with; it is
// replaced by the connection's own id, which must have the same length.
var clientMark = strings.Repeat("~", clientIDLen)

// request encodes req with the placeholder client id and locates marks.
func request(req kmsg.Request, marks ...any) *frame {
	b := kmsgtest.AppendRequestFrame(nil, 0, &clientMark, req)
	f := locate(b, marks)
	f.corrAt = 8
	f.clientAt, f.clientN = 14, clientIDLen
	if !bytes.Equal(b[14:14+clientIDLen], []byte(clientMark)) {
		panic("workload: client id not where the request header puts it")
	}
	return f
}

// response encodes resp and locates marks.
func response(resp kmsg.Response, marks ...any) *frame {
	f := locate(kmsgtest.AppendResponseFrame(nil, 0, resp), marks)
	f.corrAt = 4
	return f
}

// locate finds each mark in b: exactly once, or for records, after the
// previous records mark. The templates are fixed, so a mark that is missing
// or ambiguous is a bug in this package: it panics (and the package test
// catches it).
func locate(b []byte, marks []any) *frame {
	f := &frame{b: b}
	from := 0 // where the next records mark is looked for
	for i, m := range marks {
		mb := markBytes(m)
		var digits []int
		at := -1
		if _, ok := m.(records); ok {
			if k := bytes.Index(b[from:], mb); k >= 0 {
				at = from + k
				from = at + len(mb)
			}
			for k := 0; ; {
				j := bytes.Index(mb[k:], []byte(placeholder))
				if j < 0 {
					break
				}
				digits = append(digits, k+j)
				k += j + len(placeholder)
			}
		} else if k := bytes.Index(b, mb); k >= 0 && bytes.Index(b[k+1:], mb) < 0 {
			at = k
		}
		if at < 0 {
			panic(fmt.Sprintf("workload: mark %d (%x) found %d times, want once", i, mb[:min(len(mb), 16)], bytes.Count(b, mb)))
		}
		f.at = append(f.at, at)
		f.n = append(f.n, len(mb))
		f.digits = append(f.digits, digits)
	}
	return f
}

func (f *frame) corr(v int32) { binary.BigEndian.PutUint32(f.b[f.corrAt:], uint32(v)) }

func (f *frame) client(id string) {
	if len(id) != f.clientN {
		panic(fmt.Sprintf("workload: client id %q is not %d bytes", id, f.clientN))
	}
	copy(f.b[f.clientAt:], id)
}

func (f *frame) put32(i int, v int32) { binary.BigEndian.PutUint32(f.b[f.at[i]:], uint32(v)) }

func (f *frame) put64(i int, v int64) { binary.BigEndian.PutUint64(f.b[f.at[i]:], uint64(v)) }

func (f *frame) putString(i int, s string) {
	if len(s) != f.n[i] {
		panic(fmt.Sprintf("workload: %q is not %d bytes", s, f.n[i]))
	}
	copy(f.b[f.at[i]:], s)
}

// fill writes the records at records mark i as the records of partition
// (topic, part) at offsets base, base+1, ...: each record's key and value
// name its topic, partition and offset, its timestamp follows from the
// offset (recordTime), and each batch gets its CRC-32C again. So any record
// has the same content wherever it is seen (in the Produce that wrote it,
// in every Fetch that reads it) and no two offsets hold the same data, as
// in a real log; a generator that repeated bytes would look like the
// MirrorMaker 2 replay the duplicate-batches detector reports. With
// produced, the batches keep base offset 0, as a producer sends them. It
// returns the offset after the last record.
func (f *frame) fill(i, topic int, part int32, base int64, produced bool) int64 {
	region := f.b[f.at[i] : f.at[i]+f.n[i]]
	digits := f.digits[i]
	off := base
	for pos := 0; pos+61 <= len(region); {
		batch := region[pos : pos+int(binary.BigEndian.Uint32(region[pos+8:]))+12]
		n := int64(binary.BigEndian.Uint32(batch[57:])) // records
		if !produced {
			binary.BigEndian.PutUint64(batch, uint64(off))
		}
		binary.BigEndian.PutUint64(batch[27:], uint64(recordTime(off)))     // first timestamp
		binary.BigEndian.PutUint64(batch[35:], uint64(recordTime(off+n-1))) // max timestamp
		for r := range n {
			for range 2 { // key and value
				putDigits(region[digits[0]:digits[0]+len(placeholder)], topic, part, off+r)
				digits = digits[1:]
			}
		}
		binary.BigEndian.PutUint32(batch[17:], crc32.Checksum(batch[21:], castagnoli))
		off += n
		pos += len(batch)
	}
	return off
}

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// placeholder is where a record's key and value name the record: two
// digits of topic, two of partition, ten of offset.
const placeholder = "##############"

func putDigits(dst []byte, topic int, part int32, off int64) {
	for i := len(dst) - 1; i >= 4; i-- {
		dst[i] = byte('0' + off%10)
		off /= 10
	}
	dst[0], dst[1] = byte('0'+topic/10%10), byte('0'+topic%10)
	dst[2], dst[3] = byte('0'+part/10%10), byte('0'+part%10)
}
