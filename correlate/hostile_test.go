package correlate

import (
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/kfsniff/kfsniff/decode"
)

// Issue 31: records in the export topic are written by anyone with write
// access to it; each attack below is bounded (ROBUSTNESS.md, "The
// correlator's input").

func exchangeWith(extra string) string {
	return `{"v":1,"type":"exchange","agent":"mallory","ts_ns":1767225600000000000,"conn":1,"client":"10.0.0.9:4000",` +
		`"server":"10.0.0.1:9092","api":1,"ver":12,"corr":7,"status":"answered","latency_ns":1000` + extra + `}`
}

func repeat(item string, n int) string {
	return strings.TrimSuffix(strings.Repeat(item+",", n), ",")
}

// TestParseBounds: a record of 10,000 empty batches (30 KB of JSON) was
// parsed into about 1 MB of structs; now a record's batches, error codes,
// strings and size are bounded, and times at the ends of int64 are
// refused (they gave a finding "clients waited up to 2561451h").
func TestParseBounds(t *testing.T) {
	for _, c := range []struct {
		name, rec string
		want      error
	}{
		{"10000 empty batches", exchangeWith(`,"batches":[` + repeat("{}", 10000) + `]`), ErrTooLarge},
		{"513 batches", exchangeWith(`,"batches":[` + repeat("{}", MaxBatches+1) + `]`), ErrTooLarge},
		{"512 batches", exchangeWith(`,"batches":[` + repeat(`{"crc":1,"records":2}`, MaxBatches) + `]`), nil},
		{"257 error codes", exchangeWith(`,"errors":[` + repeat("[1,1]", MaxErrors+1) + `]`), ErrTooLarge},
		{"a record over 1 MiB", exchangeWith(`,"pad":"` + strings.Repeat("x", MaxRecordBytes) + `"`), ErrTooLarge},
		{"ts_ns at the start of int64", strings.Replace(exchangeWith(""), "1767225600000000000", fmt.Sprint(int64(math.MinInt64)), 1), ErrTime},
		{"ts_ns at the end of int64", strings.Replace(exchangeWith(""), "1767225600000000000", fmt.Sprint(int64(math.MaxInt64)), 1), ErrTime},
		{"end_ns in 2262", exchangeWith(`,"end_ns":9000000000000000000`), ErrTime},
		{"ts_ns before 1970", strings.Replace(exchangeWith(""), "1767225600000000000", "-1", 1), ErrTime},
		{"a latency of 300 years", exchangeWith(`,"latency_ns":9223372036854775807`), ErrTime},
		{"16385 record fingerprints", exchangeWith(`,"batches":[{"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 16*(MaxPrints-9))) +
			`"},{"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 16*10)) + `"}]`), ErrTooLarge},
		{"16384 record fingerprints", exchangeWith(`,"batches":[{"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 16*(MaxPrints-10))) +
			`"},{"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 16*10)) + `"}]`), nil},
		{"fingerprints of 15 bytes", exchangeWith(`,"batches":[{"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 15)) + `"}]`), ErrMalformed},
		{"deltas not one per fingerprint", exchangeWith(`,"batches":[{"fp_deltas":[0,2],"fp":"` + base64.StdEncoding.EncodeToString(make([]byte, 48)) + `"}]`), ErrMalformed},
	} {
		r, err := Parse([]byte(c.rec))
		if !errors.Is(err, c.want) || (c.want != nil && !errors.Is(err, ErrMalformed)) {
			t.Errorf("%s (%d bytes): error %v, want %v", c.name, len(c.rec), err, c.want)
		}
		if size := r.Size(); size > maxRecordSize(len(c.rec)) {
			t.Errorf("%s: decoded to %d bytes", c.name, size)
		}
	}
	long := strings.Repeat("é", 2000) // 4000 bytes
	r, err := Parse([]byte(exchangeWith(`,"client_id":"` + long + `","topic":"\u00e9` + strings.Repeat("t", 4000) + `"`)))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.ClientID.V) > MaxString || len(r.Topic) > MaxString || r.Clipped != 2 || !utf8.ValidString(r.ClientID.V) || !utf8.ValidString(r.Topic) {
		t.Errorf("4 KB strings: client id %d bytes, topic %d, clipped %d: want both cut to %d valid UTF-8 bytes, 2 counted",
			len(r.ClientID.V), len(r.Topic), r.Clipped, MaxString)
	}
}

// maxRecordSize is the most a record of n bytes may decode to: the
// struct, MaxBatches batches, MaxErrors error codes, MaxPrints record
// fingerprints, 15 strings of MaxString and the finding's copy of its
// bytes.
func maxRecordSize(n int) int {
	var r Record
	r.Batches, r.Errors = make([]Batch, MaxBatches), make([]ErrorCount, MaxErrors)
	r.Batches[0].Prints = make([]decode.RecordHash, MaxPrints)
	return r.Size() + 15*MaxString + n
}

// TestSkewKeepsNoStrings: the exchanges waiting for another agent's
// capture kept their client ids, whatever their size: 4 KB client ids
// made each waiting exchange cost 4 KB. They now cost the same whatever
// the strings.
func TestSkewKeepsNoStrings(t *testing.T) {
	heapOf := func(id string) uint64 {
		s := NewSkew(0)
		runtime.GC()
		var before runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range 20000 {
			r, err := Parse([]byte(strings.Replace(exchangeWith(`,"client_id":"`+id+`"`), `"corr":7`, fmt.Sprintf(`"corr":%d`, i), 1)))
			if err != nil {
				t.Fatal(err)
			}
			s.Add(&r)
		}
		runtime.GC()
		var after runtime.MemStats
		runtime.ReadMemStats(&after)
		runtime.KeepAlive(s)
		return (after.HeapAlloc - min(after.HeapAlloc, before.HeapAlloc)) / 20000
	}
	short, long := heapOf("c"), heapOf(strings.Repeat("x", 4096))
	t.Logf("bytes per waiting exchange: %d with a 1-byte client id, %d with 4 KiB", short, long)
	if long > short+64 || long > 400 {
		t.Errorf("a waiting exchange costs %d bytes with a 4 KiB client id, %d with 1 byte", long, short)
	}
}
