package tui

import (
	"strings"

	"github.com/kfsniff/kfsniff/report"
)

// tagBreak follows every '[' of wire text shown in the UI: U+034F
// COMBINING GRAPHEME JOINER, a combining mark that draws nothing and joins
// the bracket's cell.
//
// tview (v0.42) reads "[...]" in any text it prints (table cells, titles,
// tree nodes, text views with dynamic colours) as a style tag
// "[fg:bg:attrs:url]" or a region tag `["name"]`, and "[x[]" as an escaped
// tag. tview.Escape adds a '[' before the ']' of tags made of
// `[a-zA-Z0-9_,;: \-."#]` only, and an added '[' cannot stop the fourth
// field: a URL takes every byte up to the next ']', '[' included, so
// `[red::b:https://evil.example/]` stays a tag that styles the text after
// it and makes the terminal print OSC 8 hyperlinks. tview's tag parser
// (parseTag) accepts after '[' only '"', a letter, a digit, '#', ':' or
// '-', and its escaped-tag pattern needs '[' directly before ']': a
// bracket followed by this mark is neither, so it is drawn as a bracket,
// whatever follows.
const tagBreak = "\u034f"

// literal makes every '[' of s literal for tview's tag parser, so that s
// is drawn as the characters it holds, with the style of the text around
// it. s must already be safe for a terminal (report.Clean).
func literal(s string) string {
	if strings.IndexByte(s, '[') < 0 {
		return s
	}
	return strings.ReplaceAll(s, "[", "["+tagBreak)
}

// safe makes a wire-derived string safe to show: control characters and
// escape sequences escaped (report.Clean), and every '[' made literal for
// tview (literal), so packet data can neither drive the terminal nor
// restyle the UI.
func safe(s string) string { return literal(report.Clean(s)) }

// safeText is safe for a detector's prose quoting wire strings (a
// finding's summary, evidence, explanation), which quoted them already:
// backslashes are not doubled (report.CleanProseText).
func safeText(s string) string { return literal(report.CleanProseText(s)) }
