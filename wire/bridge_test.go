package wire_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

func TestBridge_RoundTrip(t *testing.T) {
	buf := make([]byte, 0, 256)
	body := []byte("a stream packet, byte for byte")
	for _, k := range []wire.BridgeKind{wire.BridgeData, wire.BridgeCommand} {
		f, err := wire.AppendBridgeFrame(buf, k, body)
		if err != nil {
			t.Fatal(err)
		}
		gk, gb, err := wire.DecodeBridge(f)
		if err != nil || gk != k || !bytes.Equal(gb, body) {
			t.Fatalf("kind %d: got %d %q %v", k, gk, gb, err)
		}
	}
	var h wire.BridgeHelloFrame
	h.Session, h.Tip = 77, 1234
	if err := h.SetSite("london"); err != nil {
		t.Fatal(err)
	}
	f, err := wire.AppendBridgeHello(buf, &h)
	if err != nil {
		t.Fatal(err)
	}
	k, b, err := wire.DecodeBridge(f)
	var g wire.BridgeHelloFrame
	if err != nil || k != wire.BridgeHello || wire.DecodeBridgeHello(b, &g) != nil || g != h || g.Site() != "london" {
		t.Fatalf("hello: %v %+v", err, g)
	}
}

func TestBridge_Refused(t *testing.T) {
	var h wire.BridgeHelloFrame
	if h.SetSite("") == nil || h.SetSite(string(make([]byte, wire.MaxSiteBytes+1))) == nil {
		t.Fatal("a site name out of 1..MaxSiteBytes was taken")
	}
	if _, err := wire.AppendBridgeFrame(make([]byte, 0, 3), wire.BridgeData, []byte{1}); !errors.Is(err, wire.ErrNoRoom) {
		t.Fatalf("no room: %v", err)
	}
	for _, tc := range []struct {
		name string
		b    []byte
		want error
	}{
		{"short", []byte{0x53, 0x42, 1}, wire.ErrShort},
		{"magic", []byte{0x53, 0x51, 1, 1}, wire.ErrMagic},
		{"version", []byte{0x53, 0x42, 9, 1}, wire.ErrVersion},
		{"kind", []byte{0x53, 0x42, 1, 9}, wire.ErrKind},
	} {
		if _, _, err := wire.DecodeBridge(tc.b); !errors.Is(err, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, err, tc.want)
		}
	}
	if err := wire.DecodeBridgeHello(make([]byte, 17), &h); !errors.Is(err, wire.ErrBridge) {
		t.Errorf("empty origin: %v", err)
	}
}

func TestBridge_EncodeAllocatesNothing(t *testing.T) {
	buf := make([]byte, 0, 2048)
	body := make([]byte, 1400)
	if n := testing.AllocsPerRun(100, func() {
		f, _ := wire.AppendBridgeFrame(buf, wire.BridgeData, body)
		_, _, _ = wire.DecodeBridge(f)
	}); n != 0 {
		t.Fatalf("%v allocations per frame", n)
	}
}

func FuzzDecodeBridge(f *testing.F) {
	buf := make([]byte, 0, 256)
	d, _ := wire.AppendBridgeFrame(buf, wire.BridgeData, []byte("pkt"))
	f.Add(append([]byte(nil), d...))
	var h wire.BridgeHelloFrame
	h.Session, h.Tip = 1, 2
	_ = h.SetSite("a")
	hb, _ := wire.AppendBridgeHello(buf, &h)
	f.Add(append([]byte(nil), hb...))
	f.Add([]byte{0x53, 0x42, 1, 3})
	f.Fuzz(func(t *testing.T, b []byte) {
		// The merge's header peek takes any bytes; where it says data, the
		// decoder agrees on the kind.
		if _, fs, _, ok := wire.PeekPacketSeqs(b); ok {
			var p wire.Packet
			if wire.DecodePacket(b, &p) == nil && (p.Kind != wire.KindData || p.FirstSeq != fs) {
				t.Fatalf("peek says data at %d, decode %+v", fs, p)
			}
		}
		k, body, err := wire.DecodeBridge(b)
		if err != nil {
			return
		}
		switch k {
		case wire.BridgeHello:
			var g wire.BridgeHelloFrame
			if wire.DecodeBridgeHello(body, &g) != nil {
				return
			}
			out, err := wire.AppendBridgeHello(make([]byte, 0, wire.BridgeHelloBytes), &g)
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("hello re-encodes to %x (%v), read %x", out, err, b)
			}
		default:
			out, err := wire.AppendBridgeFrame(make([]byte, 0, len(b)), k, body)
			if err != nil || !bytes.Equal(out, b) {
				t.Fatalf("frame re-encodes to %x (%v), read %x", out, err, b)
			}
		}
	})
}

// A control connection's record: what AppendBridgeRecord writes, the
// header decoder reads back; any bytes are refused or read within
// bounds.
func FuzzDecodeBridgeRecordHeader(f *testing.F) {
	rec, _ := wire.AppendBridgeRecord(nil, wire.BridgeCommand, []byte("cmd"))
	f.Add(rec)
	f.Add([]byte{0x53, 0x42, 1, 2, 0xff, 0xff, 0xff, 0xff})
	f.Add([]byte("SQRW\x01\x01\x20\x00"))
	f.Fuzz(func(t *testing.T, b []byte) {
		k, n, err := wire.DecodeBridgeRecordHeader(b)
		if err != nil {
			return
		}
		if n > wire.MaxBridgeRecordBody || (k != wire.BridgeHello && k != wire.BridgeCommand) {
			t.Fatalf("kind %d, length %d accepted", k, n)
		}
		body := make([]byte, n)
		out, err := wire.AppendBridgeRecord(nil, k, body)
		if err != nil || !bytes.Equal(out[:wire.BridgeRecordHeaderBytes], b[:wire.BridgeRecordHeaderBytes]) {
			t.Fatalf("re-encoded header %x, want %x (%v)", out[:wire.BridgeRecordHeaderBytes], b[:wire.BridgeRecordHeaderBytes], err)
		}
	})
}

func TestBridgeRecord_RoundTrip(t *testing.T) {
	rec, err := wire.AppendBridgeRecord([]byte("x"), wire.BridgeHello, []byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	k, n, err := wire.DecodeBridgeRecordHeader(rec[1:])
	if err != nil || k != wire.BridgeHello || n != 5 || string(rec[1+wire.BridgeRecordHeaderBytes:]) != "hello" {
		t.Fatalf("kind %d, length %d, %v", k, n, err)
	}
	if _, err := wire.AppendBridgeRecord(nil, wire.BridgeData, nil); err == nil {
		t.Fatal("a data record was written")
	}
	if _, _, err := wire.DecodeBridgeRecordHeader([]byte("SQRW\x01\x01\x20\x00")); err == nil {
		t.Fatal("a rewind request was read as a bridge record")
	}
}
