package cluster

import (
	"context"
	"errors"
	"net"
	"strings"
	"testing"

	"github.com/seqd/seqd/wire"
)

// failingSource serves one chunk of one packet frame, then fails as a
// store that lost its disk does.
type failingSource struct{ calls int }

func (f *failingSource) FetchRange(dst []byte, from, to uint64, maxBytes int) ([]byte, uint64, bool, uint64, error) {
	f.calls++
	if f.calls > 1 {
		return dst, from, true, 0, errors.New("disk gone")
	}
	var hdr [wire.PeerFrameHeaderBytes]byte
	wire.PutPeerFrameHeader(hdr[:], wire.PeerPacket, 3)
	return append(append(dst, hdr[:]...), "pkt"...), from + 1, false, 9, nil
}

// TestPeerServer_AStoreThatFailsMidFetchEndsItWithAnErrorFrame: the
// chunks served before the failure reach the client, then the store's
// error text, refused.
func TestPeerServer_AStoreThatFailsMidFetchEndsItWithAnErrorFrame(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	src := &failingSource{}
	ps, err := NewPeerServer(DefaultPeerServerConfig(), src, ln)
	if err != nil {
		t.Fatal(err)
	}
	go ps.Serve()
	defer ps.Close()
	var got []string
	_, err = Fetch(context.Background(), ps.Addr().String(), 1, 5, func(pkt []byte) error {
		got = append(got, string(pkt))
		return nil
	})
	if !errors.Is(err, ErrFetchRefused) || !strings.HasSuffix(err.Error(), ": disk gone") {
		t.Fatalf("err %v; want ErrFetchRefused ending in the store's text", err)
	}
	if len(got) != 1 || got[0] != "pkt" {
		t.Fatalf("got packets %q before the error; want [pkt]", got)
	}
}
