package detectors

import (
	"fmt"
	"strings"
)

// Describe writes the analyzers and their parameters with their defaults,
// for --list-detectors and docs/detectors.md.
func Describe(analyzers []*Analyzer) string {
	var b strings.Builder
	for _, a := range analyzers {
		fmt.Fprintf(&b, "%s (up to %s)\n", a.Name, a.Severity)
		for _, line := range wrap(a.Doc, 76) {
			fmt.Fprintf(&b, "    %s\n", line)
		}
		switch {
		case len(a.Recorded) > 0:
			for _, line := range wrap("recorded from real clients: "+strings.Join(a.Recorded, ", "), 76) {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		case a.NotRecorded != "":
			for _, line := range wrap("not recorded from real clients: "+a.NotRecorded, 76) {
				fmt.Fprintf(&b, "    %s\n", line)
			}
		}
		for _, p := range a.Params() {
			fmt.Fprintf(&b, "    -o %s.%s=%s (%s)\n", a.Name, p.Name, p.Default, p.Kind)
			doc := p.Doc
			if p.Alias != "" {
				doc += fmt.Sprintf(" (also -o %s.%s", a.Name, p.Alias)
				switch p.Kind {
				case "duration":
					doc += " in " + unitName(p.unit)
				case "size":
					doc += " in " + p.size.unitName()
				}
				doc += ")"
			}
			for _, line := range wrap(doc, 72) {
				fmt.Fprintf(&b, "        %s\n", line)
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func wrap(s string, width int) []string {
	var lines []string
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			lines = append(lines, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		lines = append(lines, line)
	}
	return lines
}
