package flows

import (
	"reflect"
	"testing"
	"time"
)

// fill sets every field of v (a struct) to a non-zero value.
func fill(t *testing.T, v reflect.Value) {
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(i + 7))
		case reflect.Uint64:
			f.SetUint(uint64(i + 7))
		case reflect.String:
			f.SetString("why")
		case reflect.Map:
			m := reflect.MakeMap(f.Type())
			k := reflect.New(f.Type().Key()).Elem()
			if k.Kind() == reflect.String {
				k.SetString("gap")
			}
			m.SetMapIndex(k, reflect.ValueOf(3).Convert(f.Type().Elem()))
			f.Set(m)
		case reflect.Struct:
			if f.Type() == reflect.TypeOf(time.Time{}) {
				f.Set(reflect.ValueOf(time.Unix(int64(1000+i), 0)))
				continue
			}
			fill(t, f)
		default:
			t.Fatalf("Stats field %s of kind %s: teach fill and Stats.Add about it", v.Type().Field(i).Name, f.Kind())
		}
	}
}

// TestStatsAddCoversEveryField: adding an analyzer's counters to zero
// ones gives them back whole, so a counter added to Stats and forgotten
// in Add (the sharded pipeline's merge) fails here.
func TestStatsAddCoversEveryField(t *testing.T) {
	var o Stats
	fill(t, reflect.ValueOf(&o).Elem())
	var s Stats
	s.Add(&o)
	if !reflect.DeepEqual(s, o) {
		t.Fatalf("zero.Add(o) = %+v\nwant %+v", s, o)
	}
	s.Add(&o)
	if s.Packets != 2*o.Packets || s.Evicted.Skipped["gap"] != 6 || s.FirstTime != o.FirstTime || s.FirstBad != o.FirstBad {
		t.Fatalf("twice: %+v", s)
	}
}
