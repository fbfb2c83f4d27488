module github.com/kfsniff/kfsniff

go 1.26.8

require (
	github.com/google/gopacket v1.1.19
	github.com/klauspost/compress v1.20.4
	github.com/pierrec/lz4/v4 v4.1.33
	github.com/spf13/pflag v1.1.0
	github.com/twmb/franz-go v1.22.3
	github.com/twmb/franz-go/pkg/kfake v0.0.0-20260918054303-01f206a7e32c
	github.com/twmb/franz-go/pkg/kmsg v1.15.1
)

require (
	golang.org/x/net v0.25.0 // indirect
	golang.org/x/sys v0.29.0 // indirect
)
