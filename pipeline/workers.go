package pipeline

import (
	"os"
	"strings"

	"github.com/kfsniff/kfsniff/capture"
)

// smallInput is the size under which a run of files uses one worker
// unless told otherwise (Options.Workers 0): sharding costs a few
// milliseconds of set-up (an analyzer per worker with its reassembly
// pages, round buffers, three more goroutines) and a copy of most frames,
// which a capture analysed in tens of milliseconds never wins
// back. A gzip file counts gzipRatio times its size.
const (
	smallInput = 16 << 20
	gzipRatio  = 8
)

// defaultWorkers returns 1 when files are regular files together under
// smallInput, else 0 (one per CPU, see workers).
func defaultWorkers(files []*capture.File) int {
	var total int64
	for _, f := range files {
		if f.Name == "-" {
			return 0
		}
		st, err := os.Stat(f.Name)
		if err != nil || !st.Mode().IsRegular() {
			return 0
		}
		n := st.Size()
		if strings.HasSuffix(f.Format, "gzip") {
			n *= gzipRatio
		}
		total += n
	}
	if len(files) == 0 || total >= smallInput {
		return 0
	}
	return 1
}
