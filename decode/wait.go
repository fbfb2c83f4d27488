package decode

import (
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// MaxWait is how long a broker may hold a request before answering it
// when it has nothing to answer with: the MaxWaitMillis of a Fetch or a
// ShareFetch (a long poll), 0 if negative. ok is false for any other
// request, and for nil.
func MaxWait(req kmsg.Request) (wait time.Duration, ok bool) {
	switch r := req.(type) {
	case *kmsg.FetchRequest:
		return time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond, true
	case *kmsg.ShareFetchRequest:
		return time.Duration(max(r.MaxWaitMillis, 0)) * time.Millisecond, true
	}
	return 0, false
}
