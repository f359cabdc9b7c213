package wire_test

import (
	"testing"

	"github.com/seqd/seqd/wire"
)

// reencode decodes b with the decoder for name and, if it is valid, encodes
// the decoded value again with the matching encoder.
func reencode(name string, b []byte) ([]byte, bool) {
	switch name {
	case "packet", "heartbeat":
		return reencodePacket(b)
	case "command":
		return reencodeCommand(b)
	case "nak":
		var n wire.Nak
		if wire.DecodeNak(b, &n) != nil {
			return nil, false
		}
		out, err := wire.AppendNak(make([]byte, wire.NakBytes), &n)
		return out, err == nil || panicf("AppendNak refused a decoded NAK: %v", err)
	case "gone":
		var g wire.Gone
		if wire.DecodeGone(b, &g) != nil {
			return nil, false
		}
		out, err := wire.AppendGone(make([]byte, wire.GoneBytes), &g)
		return out, err == nil || panicf("AppendGone: %v", err)
	case "internal":
		var m wire.Internal
		if wire.DecodeInternal(b, &m) != nil {
			return nil, false
		}
		out, err := wire.AppendInternal(make([]byte, wire.InternalBytes), &m)
		return out, err == nil || panicf("AppendInternal: %v", err)
	case "status":
		var st wire.Status
		if wire.DecodeStatus(b, &st) != nil {
			return nil, false
		}
		out, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &st)
		return out, err == nil || panicf("AppendStatus refused a decoded status: %v", err)
	case "timer":
		var tr wire.TimerRequest
		if wire.DecodeTimerRequest(b, &tr) != nil {
			return nil, false
		}
		out, err := wire.AppendTimerRequest(make([]byte, wire.TimerRequestBytes), &tr)
		return out, err == nil || panicf("AppendTimerRequest refused a decoded request: %v", err)
	case "control":
		var r wire.ControlRequest
		if wire.DecodeControl(b, &r) != nil {
			return nil, false
		}
		out, err := wire.AppendControl(make([]byte, wire.ControlBytes), &r)
		return out, err == nil || panicf("AppendControl refused a decoded request: %v", err)
	}
	panic("reencode: unknown frame " + name)
}

// panicf reports an encoder refusing what its decoder accepted: a broken
// invariant of the codec pair, which must surface in the fuzzer.
func panicf(format string, err error) bool {
	panic(format + ": " + err.Error())
}

func reencodePacket(b []byte) ([]byte, bool) {
	var p wire.Packet
	if wire.DecodePacket(b, &p) != nil {
		return nil, false
	}
	var w wire.PacketWriter
	if err := w.Reset(make([]byte, len(b)), p.Kind, p.Epoch, p.Session, p.FirstSeq, p.BaseTime, p.EpochStart); err != nil {
		panicf("PacketWriter.Reset", err)
	}
	var r wire.Record
	n := 0
	for p.Next(&r) {
		if err := w.Append(&r); err != nil {
			panicf("PacketWriter.Append refused a decoded record", err)
		}
		n++
	}
	if n != p.Count {
		panic("Next returned a different number of records than Count")
	}
	out := w.Bytes()
	wire.SetStable(out, p.Stable)
	wire.SetPacketFlags(out, p.Flags)
	return out, true
}

func reencodeCommand(b []byte) ([]byte, bool) {
	var p wire.CommandPacket
	if wire.DecodeCommand(b, &p) != nil {
		return nil, false
	}
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, len(b)), p.Account, p.Instance, p.Incarnation, p.Session); err != nil {
		panicf("CommandWriter.Reset", err)
	}
	if p.HotHot {
		w.SetHotHot()
	}
	var c wire.Command
	n := 0
	for p.Next(&c) {
		if err := w.Append(&c); err != nil {
			panicf("CommandWriter.Append refused a decoded command", err)
		}
		n++
	}
	if n != p.Count {
		panic("Next returned a different number of commands than Count")
	}
	return w.Bytes(), true
}

func fuzzReencode(f *testing.F, name string, seeds ...[]byte) {
	for _, s := range seeds {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if out, ok := reencode(name, b); ok && string(out) != string(canonical(name, b)) {
			t.Fatalf("%s %x decodes but re-encodes as %x", name, b, out)
		}
	})
}

// canonical is the one encoding of a frame that decoded: header bytes past
// the fixed layout (fields of a later version, which this one skips) are
// dropped, and internal payloads are cut to the fields this version knows.
func canonical(name string, b []byte) []byte {
	fixed := map[string]int{
		"packet": wire.PacketHeaderBytes, "heartbeat": wire.PacketHeaderBytes, "command": wire.CommandHeaderBytes,
		"nak": wire.NakBytes, "gone": wire.GoneBytes, "status": wire.StatusBytes,
	}
	if name == "internal" {
		return b[:wire.InternalBytes]
	}
	if name == "status" && le.Uint16(b[20:])&wire.StatusStandby != 0 {
		fixed[name] = wire.StatusStandbyBytes
	}
	n, ok := fixed[name]
	if !ok || wire.HeaderLen(b) == n {
		return b
	}
	out := append(append([]byte(nil), b[:n]...), b[wire.HeaderLen(b):]...)
	le.PutUint16(out[4:], uint16(n))
	return out
}

func FuzzDecodePacket(f *testing.F) {
	hb, _ := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, 2, 3, 2, 99, 1)
	var w wire.PacketWriter
	w.Reset(make([]byte, 200), wire.KindData, 1, 1, 1, 0, 1)
	empty := append([]byte(nil), w.Bytes()...)
	fuzzReencode(f, "packet", validPacket(f), hb, empty, validPacket(f)[:50])
}

func FuzzDecodeCommand(f *testing.F) {
	var w wire.CommandWriter
	w.Reset(make([]byte, 100), wire.MustAccount("A"), 0, 0, 0)
	empty := append([]byte(nil), w.Bytes()...)
	fuzzReencode(f, "command", validCommand(f), empty, validHotHotCommand(f))
}

func FuzzDecodeControl(f *testing.F) {
	b, _ := wire.AppendControl(make([]byte, wire.ControlBytes), &wire.ControlRequest{Op: wire.ControlForcePassive, Instance: 2, Account: wire.MustAccount("SHOP")})
	fuzzReencode(f, "control", b)
}

func FuzzDecodeNak(f *testing.F) { fuzzReencode(f, "nak", validNak(f), validGone(f)) }

func FuzzDecodeGone(f *testing.F) { fuzzReencode(f, "gone", validGone(f), validNak(f)) }

func FuzzDecodeInternal(f *testing.F) { fuzzReencode(f, "internal", validInternal(f)) }

func FuzzDecodeTimerRequest(f *testing.F) { fuzzReencode(f, "timer", validTimerRequest(f)) }

func FuzzDecodeStatus(f *testing.F) {
	fuzzReencode(f, "status", validStatus(f), validStandbyStatus(f), validNak(f))
}
