package flows

// APICounts counts a connection's request frames by API key, in the order
// the keys were first seen. A connection uses a handful of keys, so a
// slice of pairs costs a tenth of a map: on captures of hundreds of
// thousands of short connections the maps were 9% of the live heap.
type APICounts []APICount

// APICount is how many request frames of one API key a connection carried.
type APICount struct {
	Key int16
	N   int
}

// Add counts one request of key.
func (a *APICounts) Add(key int16) {
	for i := range *a {
		if (*a)[i].Key == key {
			(*a)[i].N++
			return
		}
	}
	*a = append(*a, APICount{Key: key, N: 1})
}

// Get is how many requests of key were counted.
func (a APICounts) Get(key int16) int {
	for _, c := range a {
		if c.Key == key {
			return c.N
		}
	}
	return 0
}
