// Command toether rewrites captures of any link type kfsniff reads
// (Linux cooked v1/v2, raw IP, loopback, Ethernet) as one Ethernet pcap,
// for replaying them onto an interface with tcpreplay (bench/live.sh):
//
//	toether -o OUT.pcap IN...
//
// Each packet keeps its IP layer and gets an Ethernet header from
// 02:00:00:00:00:01 to 02:00:00:00:00:02; packets with no IP layer are left
// out. The inputs are written one after the other, in order.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/kfsniff/kfsniff/capture"
)

func main() {
	out := flag.String("o", "", "write the Ethernet pcap to `FILE`")
	flag.Parse()
	if *out == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "toether: usage: toether -o OUT.pcap IN...")
		os.Exit(2)
	}
	n, skipped, err := run(*out, flag.Args())
	if err != nil {
		fmt.Fprintln(os.Stderr, "toether:", err)
		os.Exit(1)
	}
	fmt.Printf("%s: %d packets (%d without IP left out)\n", *out, n, skipped)
}

func run(out string, ins []string) (n, skipped int, err error) {
	w, err := capture.Create(out, capture.LinkEthernet, 262144, "toether")
	if err != nil {
		return 0, 0, err
	}
	buf := make([]byte, 0, 70000)
	for i, in := range ins {
		f, err := capture.Open(in, i)
		if err != nil {
			w.Close()
			return n, skipped, err
		}
		var p capture.Packet
		for {
			err := f.Next(&p)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				f.Close()
				w.Close()
				return n, skipped, fmt.Errorf("%s: %w", in, err)
			}
			et, l3, _, ok := p.Link.Network(p.Data)
			if !ok || (et != 0x0800 && et != 0x86dd) {
				skipped++
				continue
			}
			buf = append(buf[:0], 2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1, byte(et>>8), byte(et))
			buf = append(buf, l3...)
			q := p
			q.Link, q.Data = capture.LinkEthernet, buf
			q.Len = p.Len - (len(p.Data) - len(l3)) + 14
			if err := w.WritePacket(&q); err != nil {
				f.Close()
				w.Close()
				return n, skipped, err
			}
			n++
		}
		f.Close()
	}
	return n, skipped, w.Close()
}
