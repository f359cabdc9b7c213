package wire_test

import (
	"bytes"
	"testing"

	"github.com/seqd/seqd/wire"
)

// The peer protocol's decoders under fuzzing (they were cluster's fetch
// decoders, FuzzDecodeFetchRequest and FuzzDecodeFetchHeader): what
// decodes re-encodes to the same bytes, and malformed input is an error,
// never a panic.

// FuzzDecodePeerRequest: a request that decodes re-encodes to the same
// bytes; nothing panics.
func FuzzDecodePeerRequest(f *testing.F) {
	for _, q := range []wire.PeerRequest{{Kind: wire.PeerFetch, From: 1, To: 100}, {Kind: wire.PeerSeal, Epoch: 2}, {Version: 1, Kind: wire.PeerSeal, Epoch: 2}, {Kind: wire.PeerStatus}, {Kind: wire.PeerFetch, From: 9, To: 3}} {
		f.Add(wire.AppendPeerRequest(nil, &q))
	}
	f.Add([]byte("SQPR"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q wire.PeerRequest
		if wire.DecodePeerRequest(b, &q) != nil {
			return
		}
		if q.Kind == wire.PeerFetch && (q.From == 0 || q.To < q.From) {
			t.Fatalf("decoded an invalid range %d..%d", q.From, q.To)
		}
		if out := wire.AppendPeerRequest(nil, &q); !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to %+v but re-encodes as %x", b, q, out)
		}
	})
}

// FuzzDecodePeerFrameHeader: a header that decodes re-encodes to the same
// bytes and never declares more than its kind may hold.
func FuzzDecodePeerFrameHeader(f *testing.F) {
	for _, h := range []struct {
		kind uint8
		n    int
	}{{wire.PeerPacket, 100}, {wire.PeerEnd, 8}, {wire.PeerError, 20}, {wire.PeerSealed, 24}, {wire.PeerSealed, 32}, {wire.PeerState, 32}, {wire.PeerState, 40}, {wire.PeerPacket, 0}, {9, 1}} {
		b := make([]byte, wire.PeerFrameHeaderBytes)
		wire.PutPeerFrameHeader(b, h.kind, h.n)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		kind, n, err := wire.DecodePeerFrameHeader(b)
		if err != nil {
			return
		}
		if n < 0 || n > wire.PeerMaxPacketBytes {
			t.Fatalf("header declares %d bytes", n)
		}
		out := make([]byte, wire.PeerFrameHeaderBytes)
		wire.PutPeerFrameHeader(out, kind, n)
		if !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to kind %d len %d but re-encodes as %x", b, kind, n, out)
		}
	})
}

// FuzzDecodePeerSealReply: a seal reply that decodes re-encodes to the
// same bytes.
func FuzzDecodePeerSealReply(f *testing.F) {
	f.Add(wire.AppendPeerSealReply(nil, &wire.PeerSealReply{Member: 2, Contiguous: 99, HeldEpoch: 4, LastStamp: 5})[wire.PeerFrameHeaderBytes:])
	f.Add(wire.AppendPeerSealReplyVersion(nil, &wire.PeerSealReply{Member: 2, Contiguous: 99, HeldEpoch: 4}, 1)[wire.PeerFrameHeaderBytes:])
	f.Add(make([]byte, wire.PeerSealReplyBytes))
	f.Add(make([]byte, wire.PeerSealReplyV1Bytes))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r wire.PeerSealReply
		if wire.DecodePeerSealReply(b, &r) != nil {
			return
		}
		v := uint8(wire.PeerVersion)
		if len(b) == wire.PeerSealReplyV1Bytes {
			v = 1
		}
		if r.LastStamp < 0 {
			t.Fatalf("decoded a negative stamp %d", r.LastStamp)
		}
		if out := wire.AppendPeerSealReplyVersion(nil, &r, v)[wire.PeerFrameHeaderBytes:]; !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to %+v but re-encodes as %x", b, r, out)
		}
	})
}

// FuzzDecodePeerStatusReply: a status reply that decodes re-encodes to
// the same bytes.
func FuzzDecodePeerStatusReply(f *testing.F) {
	f.Add(wire.AppendPeerStatusReply(nil, &wire.PeerStatusReply{Member: 3, Epoch: 5, StartedAt: 1e18, Role: 2, Contiguous: 9})[wire.PeerFrameHeaderBytes:])
	f.Add(wire.AppendPeerStatusReplyVersion(nil, &wire.PeerStatusReply{Member: 3, Epoch: 5, StartedAt: 1e18, Role: 2}, 1)[wire.PeerFrameHeaderBytes:])
	f.Add(make([]byte, wire.PeerStatusReplyBytes))
	f.Add(make([]byte, wire.PeerStatusReplyV1Bytes))
	f.Fuzz(func(t *testing.T, b []byte) {
		var r wire.PeerStatusReply
		if wire.DecodePeerStatusReply(b, &r) != nil {
			return
		}
		v := uint8(wire.PeerVersion)
		if len(b) == wire.PeerStatusReplyV1Bytes {
			v = 1
		}
		if out := wire.AppendPeerStatusReplyVersion(nil, &r, v)[wire.PeerFrameHeaderBytes:]; !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to %+v but re-encodes as %x", b, r, out)
		}
	})
}

// FuzzDecodePeerEnd: an end body that decodes re-encodes to the same
// bytes.
func FuzzDecodePeerEnd(f *testing.F) {
	f.Add(wire.AppendPeerEnd(nil, 77)[wire.PeerFrameHeaderBytes:])
	f.Add([]byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		held, err := wire.DecodePeerEnd(b)
		if err != nil {
			return
		}
		if out := wire.AppendPeerEnd(nil, held)[wire.PeerFrameHeaderBytes:]; !bytes.Equal(out, b) {
			t.Fatalf("%x decodes to %d but re-encodes as %x", b, held, out)
		}
	})
}
