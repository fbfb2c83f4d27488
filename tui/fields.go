package tui

import (
	"encoding/binary"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"github.com/kfsniff/kfsniff/decode"
	"github.com/kfsniff/kfsniff/report"
)

// detailTreeOf builds the decoded exchange: the request and the response,
// each re-decoded from the copied frame (header, then every field kmsg
// has, record batches with their CRC), with latency and packet numbers;
// the credentials shown if secrets.
func detailTreeOf(x *Exchange, req, resp []byte, secrets bool) *treeNode {
	b := &treeBuilder{&report.TreeBuilder{Secrets: secrets}}
	root := b.Node(fmt.Sprintf("%s v%d corr %d", x.API(), x.Version, x.Correlation), kindHeading)
	if x.Key < 0 {
		root.Text = fmt.Sprintf("unmatched response corr %d", x.Correlation)
	}
	root.Add(b.requestNode(x, req))
	root.Add(b.responseNode(x, resp))
	if b.Cut() {
		root.Add(b.Node(fmt.Sprintf("… tree cut at %d lines", report.MaxTreeNodes), kindDim))
	}
	return root
}

// The tree is report's (report/tree.go), which --frames -v prints too.
type (
	treeNode = report.TreeNode
	nodeKind = report.NodeKind
)

const (
	kindPlain   = report.KindPlain
	kindHeading = report.KindHeading
	kindGood    = report.KindGood
	kindBad     = report.KindBad
	kindDim     = report.KindDim
)

// treeBuilder adds the exchange's frames (headers, packets, latency) to
// report's body tree.
type treeBuilder struct{ *report.TreeBuilder }

var msTime = report.TreeTime

func quote(s string) string { return `"` + report.Clean(s) + `"` }

func (b *treeBuilder) requestNode(x *Exchange, frame []byte) *treeNode {
	switch {
	case x.ReqPacket == 0:
		return b.Node("Request: not captured (the response came first, or the capture began after it)", kindDim)
	case frame == nil:
		return b.Node(fmt.Sprintf("Request: packet %s, %d bytes: frame no longer kept (older frames are overwritten; past 16 MiB of frames a second, some are not kept)", pktStr(x.File, x.ReqPacket), x.ReqSize), kindDim)
	}
	n := b.Node(fmt.Sprintf("Request: packet %s, %d bytes, %s", pktStr(x.File, x.ReqPacket), x.ReqSize, x.Time.UTC().Format("15:04:05.000000")), kindHeading)
	h, err := decode.ParseRequestHeader(frame)
	if err != nil {
		n.Add(b.Node("header does not decode: "+err.Error(), kindBad))
		return n
	}
	hd := n.Add(b.Node("Header", kindPlain))
	hd.Add(b.Node(fmt.Sprintf("Key: %d (%s)", h.Key, decode.Name(h.Key)), kindPlain))
	hd.Add(b.Node(fmt.Sprintf("Version: %d", h.Version), kindPlain))
	hd.Add(b.Node(fmt.Sprintf("CorrelationID: %d", h.Correlation), kindPlain))
	if h.ClientIDNull {
		hd.Add(b.Node("ClientID: null", kindPlain))
	} else {
		hd.Add(b.Node("ClientID: "+quote(string(h.ClientID)), kindPlain))
	}
	hd.Add(b.Node(fmt.Sprintf("header v%d, %d bytes", h.HeaderVersion, h.Len), kindDim))
	if int(x.ReqSize)-decode.SizeLen > len(frame) {
		n.Add(b.Node(fmt.Sprintf("body not decoded: only the first %d of %d bytes are kept", len(frame), int(x.ReqSize)-decode.SizeLen), kindDim))
		return n
	}
	body, err := decode.DecodeRequest(h.Key, h.Version, frame[h.Len:])
	if err != nil {
		n.Add(b.Node("body does not decode: "+err.Error(), kindBad))
		if body == nil {
			return n
		}
	}
	b.Request = true // a request's records are at offsets of its own
	b.Fields(n, reflect.ValueOf(b.Shown(body)).Elem())
	b.Request = false
	return n
}

func (b *treeBuilder) responseNode(x *Exchange, frame []byte) *treeNode {
	switch {
	case x.State == Unanswered:
		return b.Node("Response: none (unanswered)", kindBad)
	case x.State == NoResponse:
		return b.Node("Response: none expected (acks=0)", kindDim)
	case x.State == NotCaptured:
		return b.Node("Response: not captured (the capture holds no packet from the server)", kindDim)
	case x.RespPacket == 0:
		return b.Node("Response: none", kindDim)
	case frame == nil:
		return b.Node(fmt.Sprintf("Response: packet %s, %d bytes: frame no longer kept (older frames are overwritten; past 16 MiB of frames a second, some are not kept)", pktStr(x.File, x.RespPacket), x.RespSize), kindDim)
	}
	text := fmt.Sprintf("Response: packet %s, %d bytes", pktStr(x.File, x.RespPacket), x.RespSize)
	if x.State == Answered {
		text += ", latency " + msStr(x.Latency) + " ms"
	}
	n := b.Node(text, kindHeading)
	corr, _ := decode.Correlation(frame)
	hd := n.Add(b.Node("Header", kindPlain))
	hd.Add(b.Node(fmt.Sprintf("CorrelationID: %d", corr), kindPlain))
	if x.Key < 0 {
		n.Add(b.Node("body not decoded: its request (API and version) was not captured", kindDim))
		return n
	}
	if int(x.RespSize)-decode.SizeLen > len(frame) {
		n.Add(b.Node(fmt.Sprintf("body not decoded: only the first %d of %d bytes are kept", len(frame), int(x.RespSize)-decode.SizeLen), kindDim))
		return n
	}
	hl, err := decode.ResponseHeaderLen(frame, x.Key, x.Version)
	if err != nil {
		n.Add(b.Node("header does not decode: "+err.Error(), kindBad))
		return n
	}
	hd.Add(b.Node(fmt.Sprintf("header v%d, %d bytes", decode.ResponseHeaderVersion(x.Key, x.Version), hl), kindDim))
	body, err := decode.DecodeResponse(x.Key, x.Version, frame[hl:])
	if err != nil {
		n.Add(b.Node("body does not decode: "+err.Error(), kindBad))
		if body == nil {
			return n
		}
	} else if body.GetVersion() != x.Version {
		n.Add(b.Node(fmt.Sprintf("body in the v%d layout: the broker refused v%d (UNSUPPORTED_VERSION)", body.GetVersion(), x.Version), kindPlain))
	}
	b.Fields(n, reflect.ValueOf(b.Shown(body)).Elem())
	return n
}

func pktStr(file int, n uint64) string {
	if file > 0 {
		return fmt.Sprintf("%d:%d", file, n)
	}
	return strconv.FormatUint(n, 10)
}

// hexDump renders a frame as Wireshark does: offset, 16 bytes in hex,
// and the printable ASCII, the 4-byte size prefix first. It shows at most
// limit bytes of the frame.
func hexDump(b *strings.Builder, frame []byte, size int, limit int) {
	full := make([]byte, 0, decode.SizeLen+min(len(frame), limit))
	full = binary.BigEndian.AppendUint32(full, uint32(size))
	full = append(full, frame[:min(len(frame), limit)]...)
	for off := 0; off < len(full); off += 16 {
		line := full[off:min(off+16, len(full))]
		fmt.Fprintf(b, "%04x  ", off)
		for i := 0; i < 16; i++ {
			if i < len(line) {
				fmt.Fprintf(b, "%02x ", line[i])
			} else {
				b.WriteString("   ")
			}
			if i == 7 {
				b.WriteByte(' ')
			}
		}
		b.WriteString(" |")
		for _, c := range line {
			if c >= 0x20 && c < 0x7f {
				b.WriteByte(c)
			} else {
				b.WriteByte('.')
			}
		}
		b.WriteString("|\n")
	}
	if kept := len(frame); kept > limit || kept < size {
		fmt.Fprintf(b, "… %d of %d bytes shown\n", min(kept, limit)+decode.SizeLen, size+decode.SizeLen)
	}
}
