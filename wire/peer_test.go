package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

// TestPeer_RoundTrip: every request and answer frame decodes to what was
// encoded.
func TestPeer_RoundTrip(t *testing.T) {
	for _, q := range []wire.PeerRequest{
		{Version: wire.PeerVersion, Kind: wire.PeerFetch, From: 1, To: 1},
		{Version: wire.PeerVersion, Kind: wire.PeerFetch, From: 7, To: 1 << 40},
		{Version: wire.PeerVersion, Kind: wire.PeerSeal, Epoch: 3},
		{Version: wire.PeerMinVersion, Kind: wire.PeerSeal, Epoch: 3},
		{Version: wire.PeerVersion, Kind: wire.PeerStatus},
	} {
		b := wire.AppendPeerRequest(nil, &q)
		var got wire.PeerRequest
		if len(b) != wire.PeerRequestBytes || wire.DecodePeerRequest(b, &got) != nil || got != q {
			t.Fatalf("request %+v: %x decodes to %+v", q, b, got)
		}
	}

	pkt := bytes.Repeat([]byte{0xab}, 100)
	s := wire.PeerSealReply{Member: 2, Contiguous: 99, HeldEpoch: 4, LastStamp: 1_700_000_000_123_456_789}
	st := wire.PeerStatusReply{Member: 3, Epoch: 5, StartedAt: -1, Role: 2, Contiguous: 1 << 50}
	var b []byte
	b = wire.AppendPeerPacket(b, pkt)
	b = wire.AppendPeerSealReply(b, &s)
	b = wire.AppendPeerStatusReply(b, &st)
	b = wire.AppendPeerError(b, string(bytes.Repeat([]byte("x"), wire.PeerMaxErrorBytes+10)))
	b = wire.AppendPeerEnd(b, 1234)
	var kinds []uint8
	for len(b) > 0 {
		kind, n, err := wire.DecodePeerFrameHeader(b[:wire.PeerFrameHeaderBytes])
		if err != nil {
			t.Fatalf("header %x: %v", b[:wire.PeerFrameHeaderBytes], err)
		}
		body := b[wire.PeerFrameHeaderBytes : wire.PeerFrameHeaderBytes+n]
		b = b[wire.PeerFrameHeaderBytes+n:]
		kinds = append(kinds, kind)
		switch kind {
		case wire.PeerPacket:
			if !bytes.Equal(body, pkt) {
				t.Fatal("packet body differs")
			}
		case wire.PeerSealed:
			var got wire.PeerSealReply
			if err := wire.DecodePeerSealReply(body, &got); err != nil || got != s {
				t.Fatalf("seal reply %+v, %v; want %+v", got, err, s)
			}
		case wire.PeerState:
			var got wire.PeerStatusReply
			if err := wire.DecodePeerStatusReply(body, &got); err != nil || got != st {
				t.Fatalf("status reply %+v, %v; want %+v", got, err, st)
			}
		case wire.PeerError:
			if len(body) != wire.PeerMaxErrorBytes {
				t.Fatalf("error text of %d bytes, want it cut to %d", len(body), wire.PeerMaxErrorBytes)
			}
		case wire.PeerEnd:
			if held, err := wire.DecodePeerEnd(body); err != nil || held != 1234 {
				t.Fatalf("end: held %d, %v", held, err)
			}
		}
	}
	if want := []uint8{wire.PeerPacket, wire.PeerSealed, wire.PeerState, wire.PeerError, wire.PeerEnd}; !bytes.Equal(kinds, want) {
		t.Fatalf("frames %v, want %v", kinds, want)
	}
}

// TestPeer_Malformed: each way a request or a frame header can be wrong is
// refused with its error.
func TestPeer_Malformed(t *testing.T) {
	fetch := func(mut func(b []byte)) []byte {
		b := wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerFetch, From: 1, To: 2})
		mut(b)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", fetch(func([]byte) {})[:31], wire.ErrShort},
		{"long", append(fetch(func([]byte) {}), 0), wire.ErrPeer},
		{"magic", fetch(func(b []byte) { b[0] = 'X' }), wire.ErrMagic},
		{"version", fetch(func(b []byte) { b[4] = 9 }), wire.ErrVersion},
		{"version 0", fetch(func(b []byte) { b[4] = 0 }), wire.ErrVersion},
		{"version 3", fetch(func(b []byte) { b[4] = 3 }), wire.ErrVersion},
		{"kind", fetch(func(b []byte) { b[5] = 9 }), wire.ErrKind},
		{"hdrLen", fetch(func(b []byte) { b[6] = 33 }), wire.ErrHeader},
		{"reserved", fetch(func(b []byte) { b[30] = 1 }), wire.ErrPeer},
		{"from 0", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerFetch, From: 0, To: 2}), wire.ErrPeerRange},
		{"reversed", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerFetch, From: 5, To: 3}), wire.ErrPeerRange},
		{"fetch with epoch", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerFetch, From: 1, To: 2, Epoch: 1}), wire.ErrPeer},
		{"seal of epoch 0", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerSeal}), wire.ErrPeer},
		{"seal with range", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerSeal, Epoch: 1, From: 1, To: 1}), wire.ErrPeer},
		{"status with epoch", wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerStatus, Epoch: 1}), wire.ErrPeer},
	} {
		var q wire.PeerRequest
		if err := wire.DecodePeerRequest(tc.b, &q); !errors.Is(err, tc.want) {
			t.Errorf("request %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	hdr := func(kind uint8, n int) []byte {
		b := make([]byte, wire.PeerFrameHeaderBytes)
		wire.PutPeerFrameHeader(b, kind, n)
		return b
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", hdr(wire.PeerPacket, 1)[:7], wire.ErrShort},
		{"reserved", func() []byte { b := hdr(wire.PeerPacket, 1); b[2] = 1; return b }(), wire.ErrPeer},
		{"kind", hdr(9, 1), wire.ErrKind},
		{"empty packet", hdr(wire.PeerPacket, 0), wire.ErrPeer},
		{"packet too large", hdr(wire.PeerPacket, wire.PeerMaxPacketBytes+1), wire.ErrPeer},
		{"end of 7", hdr(wire.PeerEnd, 7), wire.ErrPeer},
		{"error too long", hdr(wire.PeerError, wire.PeerMaxErrorBytes+1), wire.ErrPeer},
		{"seal reply of 4 GiB", hdr(wire.PeerSealed, 1<<32-1), wire.ErrPeer},
		{"status reply of 31", hdr(wire.PeerState, 31), wire.ErrPeer},
	} {
		if _, _, err := wire.DecodePeerFrameHeader(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("header %s: %v, want %v", tc.name, err, tc.want)
		}
	}
	var s wire.PeerSealReply
	if err := wire.DecodePeerSealReply(make([]byte, wire.PeerSealReplyBytes), &s); !errors.Is(err, wire.ErrPeer) {
		t.Errorf("seal reply of member 0: %v, want ErrPeer", err)
	}
	bad := wire.AppendPeerSealReply(nil, &wire.PeerSealReply{Member: 1})[wire.PeerFrameHeaderBytes:]
	bad[20] = 1 // the PeerHoldsOwn flag of old, never sent: reserved
	if err := wire.DecodePeerSealReply(bad, &s); !errors.Is(err, wire.ErrFlags) {
		t.Errorf("seal reply with the reserved word set: %v, want ErrFlags", err)
	}
	neg := wire.AppendPeerSealReply(nil, &wire.PeerSealReply{Member: 1, LastStamp: -1})[wire.PeerFrameHeaderBytes:]
	if err := wire.DecodePeerSealReply(neg, &s); !errors.Is(err, wire.ErrPeer) {
		t.Errorf("seal reply with a negative stamp: %v, want ErrPeer", err)
	}
	if err := wire.DecodePeerSealReply(make([]byte, wire.PeerSealReplyV1Bytes+1), &s); !errors.Is(err, wire.ErrPeer) {
		t.Errorf("seal reply of 25 bytes: %v, want ErrPeer", err)
	}
	st := wire.AppendPeerStatusReply(nil, &wire.PeerStatusReply{Member: 1})[wire.PeerFrameHeaderBytes:]
	st[30] = 1
	var sr wire.PeerStatusReply
	if err := wire.DecodePeerStatusReply(st, &sr); !errors.Is(err, wire.ErrPeer) {
		t.Errorf("status reply with reserved bytes set: %v, want ErrPeer", err)
	}
	if _, err := wire.DecodePeerEnd(make([]byte, 9)); !errors.Is(err, wire.ErrPeer) {
		t.Errorf("end of 9 bytes: %v, want ErrPeer", err)
	}
}

// TestPeer_SealReplyVersions: a version 2 request gets the stamp, a
// version 1 request (an older member) the 24-byte answer it reads, which
// decodes with no stamp.
func TestPeer_SealReplyVersions(t *testing.T) {
	s := wire.PeerSealReply{Member: 2, Contiguous: 99, HeldEpoch: 4, LastStamp: 77}
	for _, tc := range []struct {
		v    uint8
		n    int
		want wire.PeerSealReply
	}{
		{wire.PeerVersion, wire.PeerSealReplyBytes, s},
		{wire.PeerMinVersion, wire.PeerSealReplyV1Bytes, wire.PeerSealReply{Member: 2, Contiguous: 99, HeldEpoch: 4}},
	} {
		b := wire.AppendPeerSealReplyVersion(nil, &s, tc.v)
		kind, n, err := wire.DecodePeerFrameHeader(b[:wire.PeerFrameHeaderBytes])
		if err != nil || kind != wire.PeerSealed || n != tc.n || len(b) != wire.PeerFrameHeaderBytes+tc.n {
			t.Fatalf("version %d: kind %d, %d bytes (frame %d), %v; want %d", tc.v, kind, n, len(b), err, tc.n)
		}
		var got wire.PeerSealReply
		if err := wire.DecodePeerSealReply(b[wire.PeerFrameHeaderBytes:], &got); err != nil || got != tc.want {
			t.Fatalf("version %d: %+v, %v; want %+v", tc.v, got, err, tc.want)
		}
	}
}

// TestAllocs_Peer: the fetch path's codecs (request, frame header, packet
// frame, end) and the seal's allocate nothing.
func TestAllocs_Peer(t *testing.T) {
	buf := make([]byte, 0, 4096)
	pkt := make([]byte, 1000)
	q := wire.PeerRequest{Kind: wire.PeerFetch, From: 1, To: 100}
	s := wire.PeerSealReply{Member: 1, Contiguous: 5}
	var (
		q2 wire.PeerRequest
		s2 wire.PeerSealReply
	)
	n := testing.AllocsPerRun(100, func() {
		b := wire.AppendPeerRequest(buf[:0], &q)
		if wire.DecodePeerRequest(b, &q2) != nil {
			t.Fatal("request")
		}
		b = wire.AppendPeerPacket(buf[:0], pkt)
		b = wire.AppendPeerEnd(b, 9)
		b = wire.AppendPeerSealReply(b, &s)
		if _, _, err := wire.DecodePeerFrameHeader(b[:wire.PeerFrameHeaderBytes]); err != nil {
			t.Fatal(err)
		}
		body := b[len(b)-wire.PeerSealReplyBytes:]
		if wire.DecodePeerSealReply(body, &s2) != nil {
			t.Fatal("seal reply")
		}
	})
	if n != 0 {
		t.Fatalf("%v allocations per run, want 0", n)
	}
}
