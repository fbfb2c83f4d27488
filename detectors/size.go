package detectors

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// Bytes is a size parameter, in bytes: written "16MiB", "512KiB", "1GiB",
// "300B" or a bare number in the parameter's unit.
type Bytes int64

// Size units.
const (
	KiB Bytes = 1 << 10
	MiB Bytes = 1 << 20
	GiB Bytes = 1 << 30
)

var sizeUnits = []struct {
	name string
	v    Bytes
}{{"GiB", GiB}, {"MiB", MiB}, {"KiB", KiB}, {"B", 1}}

// String writes the size in the largest unit that divides it.
func (b Bytes) String() string {
	for _, u := range sizeUnits {
		if b != 0 && b%u.v == 0 {
			return strconv.FormatInt(int64(b/u.v), 10) + u.name
		}
	}
	return "0B"
}

// parseBytes reads a size; a bare number is in unit. "" is unit itself (1
// of it), for the unit tag.
func parseBytes(s string, unit Bytes) (Bytes, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return unit, nil
	}
	for _, u := range sizeUnits {
		if num, ok := strings.CutSuffix(s, u.name); ok {
			s, unit = strings.TrimSpace(num), u.v
			break
		}
	}
	if s == "" {
		s = "1"
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || !(f >= 0) || math.IsInf(f, 0) || f*float64(unit) > math.MaxInt64/2 { // !(f >= 0): NaN too
		return 0, errors.New("not a size (e.g. 16MiB, 512KiB, 300B)")
	}
	return Bytes(f * float64(unit)), nil
}

// unitName names a size unit ("MiB").
func (b Bytes) unitName() string {
	for _, u := range sizeUnits {
		if b == u.v {
			return u.name
		}
	}
	return b.String() + " units"
}
