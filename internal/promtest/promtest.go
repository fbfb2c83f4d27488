// Package promtest reads Prometheus scrapes for tests: the text format an
// HTTP scrape returns, or a registry's gathered families, as one set of
// samples that can be summed by label.
package promtest

import (
	"fmt"
	"io"
	"sort"
	"strings"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Scrape is the metric families of one scrape, by name.
type Scrape map[string]*dto.MetricFamily

// Parse reads the text exposition format.
func Parse(r io.Reader) (Scrape, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, fmt.Errorf("parse the scrape: %w", err)
	}
	return Scrape(fams), nil
}

// FromFamilies indexes gathered families (prometheus.Gatherer.Gather).
func FromFamilies(fams []*dto.MetricFamily) Scrape {
	s := Scrape{}
	for _, f := range fams {
		s[f.GetName()] = f
	}
	return s
}

// Has reports whether the family name is in the scrape; for a
// histogram's _bucket, _sum and _count series, the histogram's.
func (s Scrape) Has(name string) bool {
	if _, ok := s[name]; ok {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if f, ok := s[strings.TrimSuffix(name, suffix)]; ok && strings.HasSuffix(name, suffix) && f.GetType() == dto.MetricType_HISTOGRAM {
			return true
		}
	}
	return false
}

// Sum adds up the values of the family's samples whose labels include
// match (a counter's or gauge's value, a histogram's sample count).
func (s Scrape) Sum(name string, match map[string]string) float64 {
	f := s[name]
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		if !matches(m, match) {
			continue
		}
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		case m.Untyped != nil:
			total += m.Untyped.GetValue()
		}
	}
	return total
}

// By sums the family's samples matching match, grouped by the values of
// the labels named (joined by "/").
func (s Scrape) By(name string, match map[string]string, labels ...string) map[string]float64 {
	out := map[string]float64{}
	f := s[name]
	if f == nil {
		return out
	}
	for _, m := range f.GetMetric() {
		if !matches(m, match) {
			continue
		}
		var key []string
		for _, l := range labels {
			key = append(key, Label(m, l))
		}
		k := strings.Join(key, "/")
		switch {
		case m.Counter != nil:
			out[k] += m.Counter.GetValue()
		case m.Gauge != nil:
			out[k] += m.Gauge.GetValue()
		case m.Histogram != nil:
			out[k] += float64(m.Histogram.GetSampleCount())
		}
	}
	return out
}

// Values lists the distinct values of a label in the family, sorted.
func (s Scrape) Values(name, label string) []string {
	seen := map[string]bool{}
	if f := s[name]; f != nil {
		for _, m := range f.GetMetric() {
			seen[Label(m, label)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for v := range seen {
		out = append(out, v)
	}
	sort.Strings(out)
	return out
}

// Label returns the value of a sample's label ("" if it has none).
func Label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func matches(m *dto.Metric, match map[string]string) bool {
	for k, v := range match {
		if Label(m, k) != v {
			return false
		}
	}
	return true
}
