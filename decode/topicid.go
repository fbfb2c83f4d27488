package decode

import "encoding/base64"

// TopicID shows a topic id as Kafka's tools print it: base64 URL encoding
// without padding ("FGXyMU9b4wyKh0PtY5aB-g").
func TopicID(id [16]byte) string { return base64.RawURLEncoding.EncodeToString(id[:]) }
