package floor

import (
	"context"
	"io"
	"net"
	"os"
	"testing"

	"github.com/kfsniff/kfsniff/capture"
)

// TestLiveReassembles: the live floor captures a TCP connection on lo and
// reassembles every byte sent (needs CAP_NET_RAW, as `make test` has;
// KFSNIFF_SKIP_LIVE=1 skips it).
func TestLiveReassembles(t *testing.T) {
	if os.Getenv("KFSNIFF_SKIP_LIVE") == "1" {
		t.Skip("KFSNIFF_SKIP_LIVE=1: live capture test skipped")
	}
	l, err := capture.OpenLive(capture.LiveConfig{Interface: "lo", BufferSize: 8 << 20})
	if err != nil {
		t.Fatalf("cannot capture on lo (run as root, or KFSNIFF_SKIP_LIVE=1): %v", err)
	}
	defer l.Close()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ctx, cancel := context.WithCancel(context.Background())
	type out struct {
		r   Result
		st  capture.LiveStats
		err error
	}
	done := make(chan out)
	go func() {
		r, st, err := LiveOn(ctx, l)
		done <- out{r, st, err}
	}()
	const sent = 1 << 20
	got := make(chan int64)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			got <- -1
			return
		}
		n, _ := io.Copy(io.Discard, c)
		c.Close()
		got <- n
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Write(make([]byte, sent)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	if n := <-got; n != sent {
		t.Fatalf("the server read %d bytes of %d", n, sent)
	}
	cancel()
	o := <-done
	if o.err != nil {
		t.Fatal(o.err)
	}
	if o.r.Reassembled < sent || o.r.TCP == 0 {
		t.Errorf("reassembled %d bytes of %d sent (%d TCP packets, %d dropped)", o.r.Reassembled, sent, o.r.TCP, o.st.Dropped)
	}
}
