package report

import (
	"encoding/json"
	"io"
	"regexp"
	"sync"
)

// WriteHTMLData writes the page's data as indented JSON: what the HTML
// report's charts and map draw (the goldens of the HTML report).
func WriteHTMLData(w io.Writer, r *Report) error {
	b, err := json.MarshalIndent(BuildPage(r), "", "  ")
	if err != nil {
		return err
	}
	// A line's points on one line, as [x,y] pairs: the golden reads as a
	// table of lines rather than a column of numbers.
	b = pairRE().ReplaceAll(b, []byte("[$1,$2]"))
	b = pointsRE().ReplaceAllFunc(b, func(m []byte) []byte {
		return spaceRE().ReplaceAll(m, nil)
	})
	_, err = w.Write(append(SafeJSON(b), '\n'))
	return err
}

var (
	pairRE   = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\[\s*(-?[0-9.e+-]+),\s*(-?[0-9.e+-]+)\s*\]`) })
	pointsRE = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`"points": \[[\s\[\]0-9.e+,-]*\]`) })
	spaceRE  = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`\n\s*`) })
)
