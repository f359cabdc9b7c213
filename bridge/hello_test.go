package bridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// The first hello on a UDP flow goes out when the sending end's store
// takes the stream's first packet, not a HelloInterval later: with an
// interval of a minute, a far end that has heard nothing at start would
// otherwise learn the origin (and answer its site's NAKs, or refuse a
// loop) a minute late.
func TestSendEnd_FirstHelloWhenTheSessionIsKnown(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sink, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.IPv4(127, 0, 0, 1)})
	if err != nil {
		t.Fatal(err)
	}
	defer sink.Close()
	// The sending end starts before the sequencer runs: its hello
	// goroutine's first turn finds no session.
	srv := tcpSite(t)
	seqAddr := srv.(*tcp.Server).Addr().String()
	startSend(t, ctx, seqAddr, func(c *Config) {
		c.UDP = []string{sink.LocalAddr().String()}
		c.HelloInterval = time.Minute
	})
	time.Sleep(300 * time.Millisecond)
	runSequencer(t, ctx, srv, 77)
	sendNode(t, ctx, seqAddr, "ALICE", 1)

	buf := make([]byte, 65536)
	deadline := time.Now().Add(10 * time.Second)
	_ = sink.SetReadDeadline(deadline)
	for {
		n, _, err := sink.ReadFromUDP(buf)
		if err != nil {
			t.Fatalf("no hello in 10 s with a HelloInterval of a minute: %v", err)
		}
		k, body, err := wire.DecodeBridge(buf[:n])
		if err != nil || k != wire.BridgeHello {
			continue
		}
		var h wire.BridgeHelloFrame
		if err := wire.DecodeBridgeHello(body, &h); err != nil {
			t.Fatal(err)
		}
		if h.Session != 77 || h.Site() != "A" {
			t.Fatalf("hello of session %d origin %q, want 77 and A", h.Session, h.Site())
		}
		return
	}
}
