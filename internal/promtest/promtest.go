// Package promtest reads Prometheus scrapes for tests: the text format an
// HTTP scrape returns, or a registry's gathered families, as one set of
// samples that can be summed by label.
package promtest

import (
	"encoding/json"
	"fmt"
	"io"
	"regexp"
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

// Dashboard is the PromQL of a Grafana dashboard's panels.
type Dashboard struct {
	Title string
	// Exprs are the panels' queries, Grafana's variables left in.
	Exprs []string
	// Variables are the dashboard's template variables.
	Variables []Variable
}

// Variable is a Grafana template variable: its query (label_values...),
// whether several values or All may be chosen, and All's value ("" for
// Grafana's default: every value the query lists).
type Variable struct {
	Name, Type, Query string
	Multi, IncludeAll bool
	AllValue          string
}

var metricName = regexp.MustCompile(`\bkfsniff_[a-z0-9_]+`)

// ReadDashboard reads a Grafana dashboard JSON (panels, rows' panels) and
// returns its queries. A panel target without an expression is an error.
func ReadDashboard(data []byte) (*Dashboard, error) {
	type panel struct {
		Title   string `json:"title"`
		Type    string `json:"type"`
		Targets []struct {
			Expr string `json:"expr"`
		} `json:"targets"`
		Panels []json.RawMessage `json:"panels"`
	}
	var d struct {
		Title      string            `json:"title"`
		Panels     []json.RawMessage `json:"panels"`
		Templating struct {
			List []struct {
				Name       string          `json:"name"`
				Type       string          `json:"type"`
				Query      json.RawMessage `json:"query"`
				Multi      bool            `json:"multi"`
				IncludeAll bool            `json:"includeAll"`
				AllValue   string          `json:"allValue"`
			} `json:"list"`
		} `json:"templating"`
	}
	if err := json.Unmarshal(data, &d); err != nil {
		return nil, fmt.Errorf("dashboard: %w", err)
	}
	out := &Dashboard{Title: d.Title}
	for _, v := range d.Templating.List {
		tv := Variable{Name: v.Name, Type: v.Type, Multi: v.Multi, IncludeAll: v.IncludeAll, AllValue: v.AllValue}
		var q struct {
			Query string `json:"query"`
		}
		if json.Unmarshal(v.Query, &q) == nil {
			tv.Query = q.Query
		} else {
			json.Unmarshal(v.Query, &tv.Query)
		}
		out.Variables = append(out.Variables, tv)
	}
	var walk func([]json.RawMessage) error
	walk = func(ps []json.RawMessage) error {
		for _, raw := range ps {
			var p panel
			if err := json.Unmarshal(raw, &p); err != nil {
				return fmt.Errorf("dashboard panel: %w", err)
			}
			if p.Type != "row" && len(p.Targets) == 0 {
				return fmt.Errorf("dashboard panel %q has no query", p.Title)
			}
			for _, t := range p.Targets {
				if strings.TrimSpace(t.Expr) == "" {
					return fmt.Errorf("dashboard panel %q has a target without an expression", p.Title)
				}
				out.Exprs = append(out.Exprs, t.Expr)
			}
			if err := walk(p.Panels); err != nil {
				return err
			}
		}
		return nil
	}
	return out, walk(d.Panels)
}

// Metrics returns the kfsniff_* series names the queries use, sorted.
func (d *Dashboard) Metrics() []string {
	seen := map[string]bool{}
	for _, e := range d.Exprs {
		for _, n := range metricName.FindAllString(e, -1) {
			seen[n] = true
		}
	}
	out := make([]string, 0, len(seen))
	for n := range seen {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// PromQL returns the queries with Grafana's variables replaced by values
// Prometheus accepts: a rate interval, match-all regexes.
func (d *Dashboard) PromQL() []string {
	r := strings.NewReplacer("$__rate_interval", "1m", "$__interval", "1m", "$__range", "1h",
		"$instance", ".*", "$api", ".*", "$broker", ".*", "$mode", "agent")
	out := make([]string, len(d.Exprs))
	for i, e := range d.Exprs {
		out[i] = r.Replace(e)
	}
	return out
}

// RulesFile writes the queries as Prometheus recording rules, for
// `promtool check rules` to parse them.
func RulesFile(exprs []string) []byte {
	var b strings.Builder
	b.WriteString("groups:\n  - name: dashboard\n    rules:\n")
	for i, e := range exprs {
		q, _ := json.Marshal(e) // a JSON string is a YAML string
		fmt.Fprintf(&b, "      - record: dashboard:query_%d\n        expr: %s\n", i+1, q)
	}
	return []byte(b.String())
}
