package pipeline

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/kfsniff/kfsniff/detectors"
)

// TestRealClientsMirrorReplay: real clients made a MirrorMaker-like replay
// (fixtures/clients/mirror): a kgo consumer copied orders to
// primary.orders with idempotence off, committed its position at offset
// 80 only, stopped, and its restart re-produced everything since. The
// mirror knows which records it re-produced and where each copy landed
// (the sidecar's "injected"); the bytes, decoded with kmsg, give the
// batches of the target and their CRCs ("observed"). duplicate-batches
// must find exactly that replay, at the severity its Doc gives a replay of
// so many batches at one shift, and nothing else may warn.
func TestRealClientsMirrorReplay(t *testing.T) {
	for _, name := range []string{"mm2-replay-kgo", "mm2-replay-sarama"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join("..", "fixtures", "pcaps", "clients")
			data, err := os.ReadFile(filepath.Join(dir, name+".json"))
			if err != nil {
				t.Fatal(err)
			}
			var sc struct {
				Injected map[string]int64 `json:"injected"`
				Observed struct {
					Batches []struct {
						Base    int64  `json:"base_offset"`
						Records int32  `json:"records"`
						CRC     uint32 `json:"crc"`
					} `json:"batches"`
					ProducerIDs []int64 `json:"producer_ids"`
				} `json:"observed"`
			}
			if err := json.Unmarshal(data, &sc); err != nil {
				t.Fatal(err)
			}
			in := sc.Injected
			firstFrom, firstTo := in["first_copy_first_offset"], in["first_copy_last_offset"]
			from, to := in["replay_first_offset"], in["replay_last_offset"]
			shift := from - firstFrom
			if in["replayed_records"] != to-from+1 || to-from != firstTo-firstFrom || len(sc.Observed.ProducerIDs) != 1 {
				t.Fatalf("sidecar: %v, producer ids %v", in, sc.Observed.ProducerIDs)
			}
			// The replay's batches, and those byte-identical (same CRC
			// and record count) to the batch at their offset less the
			// shift; the others repeat records in batches built anew.
			byBase := map[int64]int{}
			for i, b := range sc.Observed.Batches {
				byBase[b.Base] = i
			}
			var batches, sameCRC int64
			for _, b := range sc.Observed.Batches {
				if b.Base < from || b.Base > to {
					continue
				}
				batches++
				if i, ok := byBase[b.Base-shift]; ok && sc.Observed.Batches[i].CRC == b.CRC && sc.Observed.Batches[i].Records == b.Records {
					sameCRC++
				}
			}
			want := detectors.Warning // the Doc: replay-batches (6) at one shift, or 1000 records, make an error
			if batches >= 6 || in["replayed_records"] >= 1000 {
				want = detectors.Error
			}
			compared := map[bool]string{true: "crc", false: "crc+records"}[sameCRC == batches]
			if sameCRC == 0 {
				compared = "records"
			}

			r := analyseWithDetectors(t, filepath.Join(dir, name+".pcap"))
			f := findingsOf(t, r.Findings, "duplicate-batches", 1)[0]
			if f.Severity != want {
				t.Errorf("severity %s, want %s for %d batches replayed at one shift: %s", f.Severity, want, batches, f.Summary)
			}
			if f.Counts["duplicate_records"] != in["replayed_records"] || f.Counts["duplicate_batches"] != batches ||
				f.Counts["duplicate_batches_by_records"] != batches-sameCRC {
				t.Errorf("counts %v; the mirror re-produced %d records, %d batches in the replay range, %d of them byte-identical",
					f.Counts, in["replayed_records"], batches, sameCRC)
			}
			if in["downstream_read_twice"] != f.Counts["duplicate_records"] {
				t.Errorf("the downstream consumer read %d records twice, the finding says %d", in["downstream_read_twice"], f.Counts["duplicate_records"])
			}
			var got struct {
				Topic                                string
				First, Last, RepeatFirst, RepeatLast int64
				Shift, PID                           int64
				Replay, Contiguous                   bool
				ClientID, Compared                   string
			}
			fieldAs(t, &f, "topic", &got.Topic)
			fieldAs(t, &f, "first_offset", &got.First)
			fieldAs(t, &f, "last_offset", &got.Last)
			fieldAs(t, &f, "repeat_first_offset", &got.RepeatFirst)
			fieldAs(t, &f, "repeat_last_offset", &got.RepeatLast)
			fieldAs(t, &f, "offset_shift", &got.Shift)
			fieldAs(t, &f, "producer_id", &got.PID)
			fieldAs(t, &f, "replay", &got.Replay)
			fieldAs(t, &f, "contiguous", &got.Contiguous)
			fieldAs(t, &f, "client_id", &got.ClientID)
			fieldAs(t, &f, "compared", &got.Compared)
			if got.Topic != "primary.orders" || got.First != firstFrom || got.Last != firstTo || got.RepeatFirst != from ||
				got.RepeatLast != to || got.Shift != shift || got.PID != sc.Observed.ProducerIDs[0] || !got.Replay ||
				!got.Contiguous || got.ClientID != "mm2-task" || got.Compared != compared {
				t.Errorf("fields %+v; the mirror wrote offsets %d-%d again at %d-%d (shift %d) with producer id %d, compared %s",
					got, firstFrom, firstTo, from, to, shift, sc.Observed.ProducerIDs[0], compared)
			}
			onlyInfoBesides(t, r.Findings, "duplicate-batches")
		})
	}
}
