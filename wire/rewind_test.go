package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

func rewindPacket(t testing.TB, first uint64) []byte {
	var w wire.PacketWriter
	buf := make([]byte, 1472)
	if err := w.Reset(buf, wire.KindData, 3, 77, first, 1000, 1); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Record{Payload: []byte("hello"), Time: 1000, Account: 7, CmdSeq: 1}); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), w.Bytes()...)
}

// TestRewind_RoundTrip: requests, replies, stream and end frames decode
// to what was encoded.
func TestRewind_RoundTrip(t *testing.T) {
	q := wire.RewindRequest{Session: 9, FromSeq: 1234, Flags: wire.RewindFollow}
	var q2 wire.RewindRequest
	if err := wire.DecodeRewindRequest(wire.AppendRewindRequest(nil, &q), &q2); err != nil || q2 != q {
		t.Fatalf("request %+v, %v; want %+v", q2, err, q)
	}
	r := wire.RewindReply{Status: wire.RewindGone, Session: 9, Oldest: 100, Newest: 2000}
	var r2 wire.RewindReply
	if err := wire.DecodeRewindReply(wire.AppendRewindReply(nil, &r), &r2); err != nil || r2 != r {
		t.Fatalf("reply %+v, %v; want %+v", r2, err, r)
	}
	pkt := rewindPacket(t, 55)
	f := wire.AppendRewindFrame(nil, pkt)
	n, err := wire.RewindFrameLen(f, 1<<16)
	if err != nil || n != len(f) {
		t.Fatalf("frame len %d, %v; want %d", n, err, len(f))
	}
	got, _, _, err := wire.DecodeRewindFrame(f)
	if err != nil || !bytes.Equal(got, pkt) {
		t.Fatalf("frame: %v", err)
	}
	f[30] ^= 1
	if _, _, _, err := wire.DecodeRewindFrame(f); !errors.Is(err, wire.ErrRewindCRC) {
		t.Fatalf("flipped bit: %v, want ErrRewindCRC", err)
	}
	e := wire.AppendRewindEnd(nil, wire.RewindEndCorrupt, 4242)
	if n, err := wire.RewindFrameLen(e, 1<<16); err != nil || n != len(e) {
		t.Fatalf("end len %d %v", n, err)
	}
	if p, reason, next, err := wire.DecodeRewindFrame(e); err != nil || p != nil || reason != wire.RewindEndCorrupt || next != 4242 {
		t.Fatalf("end: %v %d %d %v", p, reason, next, err)
	}
	if err := wire.DecodeRewindRequest(wire.AppendRewindRequest(nil, &wire.RewindRequest{}), &q2); !errors.Is(err, wire.ErrZeroSeq) {
		t.Fatalf("from 0: %v", err)
	}
}

// FuzzRewind feeds arbitrary bytes to every rewind decoder: none panics
// or reads outside its input, and what decodes re-encodes to the same
// bytes.
func FuzzRewind(f *testing.F) {
	f.Add(wire.AppendRewindRequest(nil, &wire.RewindRequest{Session: 1, FromSeq: 1, Flags: wire.RewindFollow}))
	f.Add(wire.AppendRewindReply(nil, &wire.RewindReply{Session: 1, Oldest: 1, Newest: 9}))
	f.Add(wire.AppendRewindFrame(nil, rewindPacket(f, 1)))
	f.Add(wire.AppendRewindEnd(nil, wire.RewindEndTip, 10))
	f.Fuzz(func(t *testing.T, b []byte) {
		var q wire.RewindRequest
		if wire.DecodeRewindRequest(b, &q) == nil {
			if out := wire.AppendRewindRequest(nil, &q); !bytes.Equal(out, b[:wire.RewindRequestBytes]) {
				t.Fatalf("request re-encodes differently")
			}
		}
		var r wire.RewindReply
		if wire.DecodeRewindReply(b, &r) == nil {
			if out := wire.AppendRewindReply(nil, &r); !bytes.Equal(out, b[:wire.RewindReplyBytes]) {
				t.Fatalf("reply re-encodes differently")
			}
		}
		n, err := wire.RewindFrameLen(b, 1<<16)
		if err != nil || n > len(b) {
			return
		}
		pkt, reason, next, err := wire.DecodeRewindFrame(b[:n])
		if err != nil {
			return
		}
		if pkt == nil {
			if out := wire.AppendRewindEnd(nil, reason, next); !bytes.Equal(out, b[:n]) {
				t.Fatalf("end re-encodes differently")
			}
			return
		}
		if out := wire.AppendRewindFrame(nil, pkt); !bytes.Equal(out, b[:n]) {
			t.Fatalf("frame re-encodes differently")
		}
	})
}
