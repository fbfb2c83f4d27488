package text

// Filter is " --name value", a filter for a kfsniff command a finding
// suggests, when values hold exactly one value and it can be pasted into a
// shell as one word (ShellWord); "" otherwise, as a filter on one of
// several values would hide the others.
func Filter(name string, values []string) string {
	if len(values) != 1 || !ShellWord(values[0]) {
		return ""
	}
	return " --" + name + " " + values[0]
}
