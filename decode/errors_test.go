package decode_test

import (
	"maps"
	"reflect"
	"strings"
	"testing"

	"github.com/kfsniff/kfsniff/internal/kmsgtest"

	"github.com/twmb/franz-go/pkg/kmsg"

	"github.com/kfsniff/kfsniff/decode"
)

func TestErrorName(t *testing.T) {
	for _, tc := range []struct {
		code int16
		want string
	}{
		{0, "NONE"},
		{-1, "UNKNOWN_SERVER_ERROR"},
		{1, "OFFSET_OUT_OF_RANGE"},
		{3, "UNKNOWN_TOPIC_OR_PARTITION"},
		{5, "LEADER_NOT_AVAILABLE"},
		{6, "NOT_LEADER_OR_FOLLOWER"}, // kerr's NOT_LEADER_FOR_PARTITION was renamed in Kafka 2.7
		{15, "COORDINATOR_NOT_AVAILABLE"},
		{9999, "UNKNOWN_ERROR_CODE_9999"},
		{-2, "UNKNOWN_ERROR_CODE_-2"},
		{-32768, "UNKNOWN_ERROR_CODE_-32768"},
	} {
		if got := decode.ErrorName(tc.code); got != tc.want {
			t.Errorf("ErrorName(%d) = %q, want %q", tc.code, got, tc.want)
		}
	}
}

func TestErrorCodes(t *testing.T) {
	for _, tc := range []struct {
		name string
		resp kmsg.Response
		want map[int16]int
	}{
		{
			name: "Fetch: top-level and partition errors",
			resp: &kmsg.FetchResponse{
				Version:   12,
				ErrorCode: 0,
				Topics: []kmsg.FetchResponseTopic{
					{Topic: "orders", Partitions: []kmsg.FetchResponseTopicPartition{
						{Partition: 0, ErrorCode: 6},
						{Partition: 1},
						{Partition: 2, ErrorCode: 1},
					}},
					{Topic: "audit", Partitions: []kmsg.FetchResponseTopicPartition{
						{Partition: 0, ErrorCode: 6},
					}},
				},
			},
			want: map[int16]int{6: 2, 1: 1},
		},
		{
			name: "Fetch: session error only",
			resp: &kmsg.FetchResponse{Version: 12, ErrorCode: 70},
			want: map[int16]int{70: 1},
		},
		{
			name: "Metadata: topic and partition errors",
			resp: &kmsg.MetadataResponse{
				Version: 12,
				Topics: []kmsg.MetadataResponseTopic{
					{Topic: kmsg.StringPtr("missing"), ErrorCode: 3},
					{Topic: kmsg.StringPtr("orders"), Partitions: []kmsg.MetadataResponseTopicPartition{
						{Partition: 0, ErrorCode: 5, Leader: -1},
						{Partition: 1, Leader: 2},
						{Partition: 2, ErrorCode: 9, Leader: 1},
					}},
				},
			},
			want: map[int16]int{3: 1, 5: 1, 9: 1},
		},
		{
			name: "no errors",
			resp: &kmsg.MetadataResponse{Version: 12, Topics: []kmsg.MetadataResponseTopic{{Topic: kmsg.StringPtr("t"), Partitions: make([]kmsg.MetadataResponseTopicPartition, 3)}}},
			want: map[int16]int{},
		},
		{
			name: "OffsetCommit partition errors",
			resp: &kmsg.OffsetCommitResponse{Version: 8, Topics: []kmsg.OffsetCommitResponseTopic{{Topic: "t", Partitions: []kmsg.OffsetCommitResponseTopicPartition{{ErrorCode: 27}, {ErrorCode: 25}}}}},
			want: map[int16]int{27: 1, 25: 1},
		},
		{
			name: "typed nil",
			resp: (*kmsg.FetchResponse)(nil),
			want: map[int16]int{},
		},
		{
			name: "nil",
			want: map[int16]int{},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := map[int16]int{}
			decode.ErrorCodes(tc.resp, func(code int16) { got[code]++ })
			if !maps.Equal(got, tc.want) {
				t.Errorf("error codes %v, want %v", got, tc.want)
			}
		})
	}
}

// TestErrorCodesEveryResponse fills every response kmsg knows with
// non-zero values and checks that ErrorCodes reports every int16 error
// field, whatever its depth.
func TestErrorCodesEveryResponse(t *testing.T) {
	f := &kmsgtest.Filler{}
	for key := int16(0); key <= kmsg.MaxKey; key++ {
		if kmsg.ResponseForKey(key) == nil {
			continue
		}
		resp := f.Response(key, 0)
		want := countErrorFields(reflect.ValueOf(resp).Elem())
		got := 0
		decode.ErrorCodes(resp, func(code int16) {
			if code == 0 {
				t.Errorf("%s: zero code reported", kmsg.NameForKey(key))
			}
			got++
		})
		if got != want {
			t.Errorf("%s: %d error codes reported, want %d", kmsg.NameForKey(key), got, want)
		}
	}
}

// countErrorFields counts the int16 fields named like error codes in v,
// through structs, slices and pointers.
func countErrorFields(v reflect.Value) int {
	n := 0
	switch v.Kind() {
	case reflect.Struct:
		for i := 0; i < v.NumField(); i++ {
			sf := v.Type().Field(i)
			if sf.Type.Kind() == reflect.Int16 && strings.Contains(sf.Name, "Error") {
				if v.Field(i).Int() != 0 {
					n++
				}
				continue
			}
			if sf.IsExported() {
				n += countErrorFields(v.Field(i))
			}
		}
	case reflect.Slice:
		if v.Type().Elem().Kind() == reflect.Uint8 {
			return 0
		}
		for i := 0; i < v.Len(); i++ {
			n += countErrorFields(v.Index(i))
		}
	case reflect.Pointer:
		if !v.IsNil() {
			n += countErrorFields(v.Elem())
		}
	}
	return n
}
