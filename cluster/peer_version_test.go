package cluster

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/wire"
)

// TestRequestSeal_OlderMemberAnswersVersion1: a member of an older
// release serves peer version 1 only and refuses a version 2 request
// with "unsupported version"; RequestSeal asks it again at version 1 and
// takes its 24-byte answer, with no stamp (a rolling upgrade still
// seals).
func TestRequestSeal_OlderMemberAnswersVersion1(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	versions := make(chan uint8, 4)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			var b [wire.PeerRequestBytes]byte
			if _, err := io.ReadFull(c, b[:]); err == nil {
				versions <- b[4]
				if b[4] != 1 {
					_, _ = c.Write(wire.AppendPeerError(nil, wire.ErrVersion.Error()))
				} else {
					_, _ = c.Write(wire.AppendPeerSealReplyVersion(nil, &wire.PeerSealReply{Member: 7, Contiguous: 41, HeldEpoch: 3}, 1))
				}
			}
			c.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	r, err := RequestSeal(ctx, ln.Addr().String(), 3)
	if err != nil {
		t.Fatal(err)
	}
	if r != (wire.PeerSealReply{Member: 7, Contiguous: 41, HeldEpoch: 3}) {
		t.Fatalf("answer %+v", r)
	}
	if v1, v2 := <-versions, <-versions; v1 != wire.PeerVersion || v2 != 1 {
		t.Fatalf("asked at versions %d then %d, want %d then 1", v1, v2, wire.PeerVersion)
	}
}
