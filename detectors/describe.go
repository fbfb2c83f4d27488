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
		wrap(&b, a.Doc, "    ", 76)
		switch {
		case len(a.Recorded) > 0:
			wrap(&b, "recorded from real clients: "+strings.Join(a.Recorded, ", "), "    ", 76)
		case a.NotRecorded != "":
			wrap(&b, "not recorded from real clients: "+a.NotRecorded, "    ", 76)
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
			wrap(&b, doc, "        ", 72)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

// wrap writes s into b in lines of at most width characters (but for a
// longer word), each after indent.
func wrap(b *strings.Builder, s, indent string, width int) {
	line := ""
	for _, w := range strings.Fields(s) {
		if line != "" && len(line)+1+len(w) > width {
			fmt.Fprintf(b, "%s%s\n", indent, line)
			line = ""
		}
		if line != "" {
			line += " "
		}
		line += w
	}
	if line != "" {
		fmt.Fprintf(b, "%s%s\n", indent, line)
	}
}
