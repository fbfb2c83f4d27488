package text

// First is the first item, or alt if there is none (the address to put in
// a suggested command: the first server seen, else a placeholder).
func First(items []string, alt string) string {
	if len(items) > 0 {
		return items[0]
	}
	return alt
}
