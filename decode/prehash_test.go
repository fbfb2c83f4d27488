package decode_test

import (
	"errors"
	"fmt"
	"slices"
	"testing"

	"github.com/twmb/franz-go/pkg/kgo"

	"github.com/kfsniff/kfsniff/decode"
)

// TestReplayIsHashes: fingerprints made ahead by a twin and replayed by
// the hasher give what the hasher's own Hashes gives, batch by batch:
// the same fingerprints, the same errors (cap, budgets of the frame and
// the run, a batch that is not magic 2), and the same counts; also when
// the twin's own budget refuses batches that the hasher's allows (it then
// fingerprints them itself). A sharded analysis relies on it for reports
// identical to one worker's.
func TestReplayIsHashes(t *testing.T) {
	var batches []decode.Batch
	for i := range 40 {
		codec := []*kgo.CompressionCodec{nil, codecOf(kgo.SnappyCompression()), codecOf(kgo.ZstdCompression()), codecOf(kgo.GzipCompression())}[i%4]
		batches = append(batches, compressed(t, codec, sourceRecords(i*10, 5+i%7*20)))
	}
	legacy := batches[3]
	legacy.Magic = 1
	batches = append(batches, legacy)
	// Frames of 1 to 5 batches.
	var frames [][]decode.Batch
	for i := 0; i < len(batches); {
		n := min(1+i%5, len(batches)-i)
		frames = append(frames, batches[i:i+n])
		i += n
	}
	budget := decode.Budget{Frame: 16 << 10, Run: 60 << 10, Ratio: 3}
	for _, twinBudget := range []decode.Budget{budget, {Frame: 8 << 10, Run: 10 << 10, Ratio: 1}} {
		t.Run(fmt.Sprintf("twin budget %+v", twinBudget), func(t *testing.T) {
			h := decode.NewRecordHasher(12 << 10) // some batches past the cap
			h.SetBudget(budget)
			ref := h.Twin() // the same seed and budget: what h would do alone
			twin := h.Twin()
			twin.SetBudget(twinBudget)
			var refused, notDone int
			for fi, fr := range frames {
				ref.StartFrame()
				twin.StartFrame()
				h.StartFrame()
				var ahead []decode.RecordHash
				pres := make([]decode.Prehashed, len(fr))
				for i := range fr {
					ahead, pres[i] = twin.Prehash(&fr[i], ahead)
					if !pres[i].Done {
						notDone++
					}
				}
				for i := range fr {
					want, wantErr := ref.Hashes(&fr[i], nil)
					got, gotErr := h.Replay(&fr[i], &pres[i], ahead, nil)
					if !slices.Equal(got, want) || !errors.Is(gotErr, wantErr) && fmt.Sprint(gotErr) != fmt.Sprint(wantErr) {
						t.Fatalf("frame %d batch %d: replayed %d fingerprints, %v; Hashes %d, %v", fi, i, len(got), gotErr, len(want), wantErr)
					}
					if errors.Is(wantErr, decode.ErrOverBudget) {
						refused++
					}
				}
			}
			if h.Counts() != ref.Counts() {
				t.Fatalf("counts: replayed %+v, Hashes %+v", h.Counts(), ref.Counts())
			}
			if c := ref.Counts(); refused == 0 || c.OverCap == 0 {
				t.Fatalf("the budgets refused %d batches, the cap %d: the test does not reach them", refused, c.OverCap)
			}
			if twinBudget != budget && notDone == 0 {
				t.Fatal("the twin's smaller budget refused nothing: the fallback is not tested")
			}
		})
	}
}
