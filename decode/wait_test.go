package decode_test

import (
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

func TestMaxWait(t *testing.T) {
	fetch := func(ms int32) kmsg.Request { r := kmsg.NewPtrFetchRequest(); r.MaxWaitMillis = ms; return r }
	share := kmsg.NewPtrShareFetchRequest()
	share.MaxWaitMillis = 250
	for _, tc := range []struct {
		name string
		req  kmsg.Request
		wait time.Duration
		ok   bool
	}{
		{"a consumer's Fetch", fetch(500), 500 * time.Millisecond, true},
		{"a Fetch that does not wait", fetch(0), 0, true},
		{"a negative MaxWaitMillis is no wait", fetch(-1), 0, true},
		{"a ShareFetch", share, 250 * time.Millisecond, true},
		{"a Produce is not held", kmsg.NewPtrProduceRequest(), 0, false},
		{"a request whose body was not captured", nil, 0, false},
	} {
		if wait, ok := decode.MaxWait(tc.req); wait != tc.wait || ok != tc.ok {
			t.Errorf("%s: MaxWait = %v, %v, want %v, %v", tc.name, wait, ok, tc.wait, tc.ok)
		}
	}
}
