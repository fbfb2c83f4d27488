package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/kfsniff/kfsniff/capture"
	"github.com/kfsniff/kfsniff/flows"
	"github.com/kfsniff/kfsniff/pipeline"
	"github.com/kfsniff/kfsniff/report"
)

// LiveConfig is what the command line asks of a live capture.
type LiveConfig struct {
	Interface string
	Snaplen   int
	BufferKiB int
	NoPromisc bool
}

// openLive opens the capture; a missing privilege gets the remedy.
func openLive(c LiveConfig, filter *capture.Filter) (*capture.Live, error) {
	l, err := capture.OpenLive(capture.LiveConfig{
		Interface:   c.Interface,
		Snaplen:     c.Snaplen,
		Filter:      filter,
		Promiscuous: !c.NoPromisc,
		BufferSize:  c.BufferKiB << 10,
	})
	if errors.Is(err, capture.ErrPermission) {
		return nil, fmt.Errorf("%s: run kfsniff as root, or grant the privilege once with: sudo setcap cap_net_raw,cap_net_admin+ep %s", strings.TrimPrefix(err.Error(), capture.ErrPermission.Error()+": "), executable())
	}
	if errors.Is(err, capture.ErrUnusable) {
		return nil, unusable(err)
	}
	return l, err
}

func executable() string {
	if p, err := os.Executable(); err == nil && !strings.Contains(p, "go-build") {
		return p
	}
	return "./kfsniff"
}

// createWriter opens the -w file for the packets' link types.
func createWriter(cfg Config, live *capture.Live, links []capture.LinkType, secrets ...capture.Secret) (*capture.Writer, error) {
	ng := strings.HasSuffix(strings.ToLower(cfg.Write), ".pcapng")
	if len(links) > 1 && !ng {
		return nil, fmt.Errorf("%s: the inputs have several link types (%v) and a pcap file holds one; write %s.pcapng", cfg.Write, links, strings.TrimSuffix(cfg.Write, ".pcap"))
	}
	link := capture.LinkEthernet
	if len(links) > 0 {
		link = links[0]
	}
	snaplen, ifname := capture.DefaultSnaplen, ""
	if live != nil {
		snaplen, ifname = live.Snaplen, live.Name
	}
	return capture.Create(cfg.Write, link, snaplen, ifname, secrets...)
}

// liveSummary prints tcpdump's closing counts.
func liveSummary(w io.Writer, res *pipeline.Result) {
	n := res.Report.Capture.Packets
	fmt.Fprintf(w, "kfsniff: %d packets captured", n)
	if res.Live != nil {
		fmt.Fprintf(w, ", %d received by filter, %d dropped by kernel", res.Live.Received, res.Live.Dropped)
	}
	fmt.Fprintf(w, " (%s)\n", res.Stop)
}

// lineFlusher follows the frame writer among the handlers and flushes
// each line as it is written, so live frames stream.
type lineFlusher struct{ fw *report.FrameWriter }

func (l lineFlusher) OnRequest(*flows.Message)   { l.fw.Flush() }
func (l lineFlusher) OnExchange(*flows.Exchange) { l.fw.Flush() }

// listInterfaces prints what -i accepts, like tcpdump -D.
func listInterfaces(stdout, stderr io.Writer) int {
	ifs, err := capture.Interfaces()
	if err != nil {
		fmt.Fprintf(stderr, "kfsniff: %v\n", err)
		return exitFailure
	}
	for _, it := range ifs {
		fmt.Fprintln(stdout, it)
	}
	return exitOK
}
