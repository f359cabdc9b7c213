package wire_test

import (
	"encoding/binary"
	"errors"
	"testing"

	"github.com/seqd/seqd/wire"
)

var le = binary.LittleEndian

// validPacket is a data packet with a whole record, a fragment and an empty
// record, so that every code path of the decoder is reachable from it.
func validPacket(t testing.TB) []byte {
	t.Helper()
	var w wire.PacketWriter
	buf := make([]byte, 1472)
	if err := w.Reset(buf, wire.KindData, 3, 9, 100, 1_000_000, 90); err != nil {
		t.Fatal(err)
	}
	recs := []wire.Record{
		{Time: 1_000_005, Account: wire.MustAccount("ALICE"), Instance: 1, CmdSeq: 7, Payload: []byte("hello")},
		{Time: 1_000_006, Account: wire.MustAccount("BOB"), Flags: wire.FlagFragment, CmdSeq: 8, Total: 1000, Offset: 990, Payload: []byte("0123456789")},
		{Time: 1_000_007, Flags: wire.FlagSeqGen | wire.FlagInternal, Payload: nil},
	}
	for i := range recs {
		if err := w.Append(&recs[i]); err != nil {
			t.Fatal(err)
		}
	}
	return w.Bytes()
}

// Offsets into validPacket's records.
const (
	rec0   = wire.PacketHeaderBytes
	rec1   = rec0 + wire.RecordHeaderBytes + 5
	rec2   = rec1 + wire.RecordHeaderBytes + wire.FragmentHeaderBytes + 10
	pktEnd = rec2 + wire.RecordHeaderBytes
)

func validCommand(t testing.TB) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 1472), wire.MustAccount("ALICE"), 2, 5, 9); err != nil {
		t.Fatal(err)
	}
	cmds := []wire.Command{
		{CmdSeq: 1, Payload: []byte("buy 10")},
		{CmdSeq: 2, Flags: wire.CmdFragment, Total: 100, Offset: 50, Payload: []byte("part")},
		{CmdSeq: 3, Flags: wire.CmdTimer, Payload: make([]byte, wire.TimerRequestBytes)},
	}
	for i := range cmds {
		if err := w.Append(&cmds[i]); err != nil {
			t.Fatal(err)
		}
	}
	return w.Bytes()
}

// validHotHotCommand is a hot-hot instance's frame: each record has its id.
func validHotHotCommand(t testing.TB) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, 1472), wire.MustAccount("SHOP"), 1, 5, 9); err != nil {
		t.Fatal(err)
	}
	w.SetHotHot()
	cmds := []wire.Command{
		{CmdSeq: 1, ID: 7 << 16, Payload: []byte("sold 1")},
		{CmdSeq: 2, ID: 7<<16 | 1, Flags: wire.CmdFragment | wire.CmdOOB, Total: 100, Offset: 50, Payload: []byte("part")},
	}
	for i := range cmds {
		if err := w.Append(&cmds[i]); err != nil {
			t.Fatal(err)
		}
	}
	return w.Bytes()
}

const (
	cmd0   = wire.CommandHeaderBytes
	cmd1   = cmd0 + wire.CommandRecordBytes + 6
	cmd2   = cmd1 + wire.CommandRecordBytes + wire.FragmentHeaderBytes + 4
	cmdEnd = cmd2 + wire.CommandRecordBytes + wire.TimerRequestBytes
)

func validNak(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendNak(make([]byte, wire.NakBytes), &wire.Nak{Epoch: 1, Session: 2, FromSeq: 10, ToSeq: 20, FromOffset: 3})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func validGone(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendGone(make([]byte, wire.GoneBytes), &wire.Gone{Epoch: 1, Session: 2, FromSeq: 10, ToSeq: 20, Oldest: 50})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// validStandbyStatus is a standby's ack: the Member field at 56.
func validStandbyStatus(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{Session: 2, Epoch: 3,
		Flags: wire.StatusReplayer | wire.StatusStandby, Contiguous: 100, Delivered: 100, Member: 7})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func validStatus(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendStatus(make([]byte, wire.StatusBytes), &wire.Status{Session: 2, Epoch: 1, Flags: wire.StatusReadOnly, Instance: 3, Account: wire.MustAccount("TAIL"), Incarnation: 9, Contiguous: 100, Delivered: 90})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func validInternal(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendInternal(make([]byte, wire.InternalBytes), &wire.Internal{Type: wire.InternalTimer, Instance: 1, Epoch: 2, Account: wire.MustAccount("BOB"), ID: 4, Value: 5, Extra: -6})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func validTimerRequest(t testing.TB) []byte {
	t.Helper()
	b, err := wire.AppendTimerRequest(make([]byte, wire.TimerRequestBytes), &wire.TimerRequest{ID: 1, At: 2, Period: 3, Cancel: true})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// decoders wraps every decoder as func([]byte) error.
func decoders() map[string]func([]byte) error {
	return map[string]func([]byte) error{
		"packet":  func(b []byte) error { var p wire.Packet; return wire.DecodePacket(b, &p) },
		"command": func(b []byte) error { var p wire.CommandPacket; return wire.DecodeCommand(b, &p) },
		"nak":     func(b []byte) error { var n wire.Nak; return wire.DecodeNak(b, &n) },
		"gone":    func(b []byte) error { var g wire.Gone; return wire.DecodeGone(b, &g) },
		"internal": func(b []byte) error {
			var m wire.Internal
			return wire.DecodeInternal(b, &m)
		},
		"timer":  func(b []byte) error { var tr wire.TimerRequest; return wire.DecodeTimerRequest(b, &tr) },
		"status": func(b []byte) error { var s wire.Status; return wire.DecodeStatus(b, &s) },
	}
}

func valid(t testing.TB) map[string][]byte {
	hb, err := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, 2, 3, 2, 99, 1)
	if err != nil {
		t.Fatal(err)
	}
	return map[string][]byte{
		"packet":    validPacket(t),
		"heartbeat": hb,
		"command":   validCommand(t),
		"nak":       validNak(t),
		"gone":      validGone(t),
		"internal":  validInternal(t),
		"timer":     validTimerRequest(t),
		"status":    validStatus(t),
	}
}

func decoderFor(name string) func([]byte) error {
	if name == "heartbeat" {
		name = "packet"
	}
	return decoders()[name]
}

func TestMalformed_EveryTruncationFails(t *testing.T) {
	for name, frame := range valid(t) {
		decode := decoderFor(name)
		if err := decode(frame); err != nil {
			t.Fatalf("%s: valid frame: %v", name, err)
		}
		for i := 0; i < len(frame); i++ {
			err := decode(frame[:i])
			var want []error
			switch name {
			case "internal":
				want = []error{wire.ErrInternal}
			case "timer":
				want = []error{wire.ErrTimerReq}
			default:
				want = []error{wire.ErrShort, wire.ErrRecord}
			}
			if !isAny(err, want) {
				t.Errorf("%s truncated to %d of %d bytes: %v, want one of %v", name, i, len(frame), err, want)
			}
		}
	}
}

func TestMalformed_TrailingBytes(t *testing.T) {
	for name, frame := range valid(t) {
		long := append(append([]byte(nil), frame...), 0)
		want := wire.ErrTrailing
		switch name {
		case "internal":
			want = nil // later fields: skipped by this version
		case "timer":
			want = wire.ErrTimerReq
		}
		if err := decoderFor(name)(long); !errors.Is(err, want) || want == nil && err != nil {
			t.Errorf("%s with a trailing byte: %v, want %v", name, err, want)
		}
	}
}

func TestMalformed_Prefix(t *testing.T) {
	for name, frame := range valid(t) {
		if name == "internal" || name == "timer" {
			continue // payloads, not frames: no prefix
		}
		decode := decoderFor(name)
		for _, tc := range []struct {
			what string
			at   int
			val  byte
			want error
		}{
			{"magic", 0, 0x54, wire.ErrMagic},
			{"magic", 1, 0x00, wire.ErrMagic},
			{"version", 2, wire.Version + 1, wire.ErrVersion},
			{"version", 2, 0, wire.ErrVersion},
			{"kind 0", 3, 0, wire.ErrKind},
			{"kind past the last", 3, byte(wire.KindStatus) + 1, wire.ErrKind},
		} {
			b := append([]byte(nil), frame...)
			b[tc.at] = tc.val
			if err := decode(b); !errors.Is(err, tc.want) {
				t.Errorf("%s with bad %s: %v, want %v", name, tc.what, err, tc.want)
			}
		}
		// A well-formed frame of another kind is refused by this decoder.
		for k := wire.KindData; k <= wire.KindStatus; k++ {
			same := k == wire.Kind(frame[3]) || (name == "packet" || name == "heartbeat") && (k == wire.KindData || k == wire.KindHeartbeat)
			if same {
				continue
			}
			b := append([]byte(nil), frame...)
			b[3] = byte(k)
			if err := decode(b); !errors.Is(err, wire.ErrKind) {
				t.Errorf("%s relabelled %s: %v, want ErrKind", name, k, err)
			}
		}
	}
}

func TestMalformed_Packet(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"zero firstSeq", func(b []byte) []byte { le.PutUint64(b[24:], 0); return b }, wire.ErrZeroSeq},
		{"zero epochStart", func(b []byte) []byte { le.PutUint64(b[48:], 0); return b }, wire.ErrZeroSeq},
		{"unknown packet flag", func(b []byte) []byte { b[6] |= 1 << 3; return b }, wire.ErrFlags},
		{"reserved header bytes", func(b []byte) []byte { b[22] = 1; return b }, wire.ErrFlags},
		{"header length below the fixed header", func(b []byte) []byte { le.PutUint16(b[4:], wire.PacketHeaderBytes-1); return b }, wire.ErrHeader},
		{"header length past the frame", func(b []byte) []byte { le.PutUint16(b[4:], uint16(len(b)+1)); return b }, wire.ErrHeader},
		{"seq wraps", func(b []byte) []byte { le.PutUint64(b[24:], ^uint64(0)-1); return b }, wire.ErrRecord},
		{"count above records", func(b []byte) []byte { le.PutUint16(b[20:], 4); return b }, wire.ErrRecord},
		{"count below records", func(b []byte) []byte { le.PutUint16(b[20:], 2); return b }, wire.ErrTrailing},
		{"heartbeat with records", func(b []byte) []byte { b[3] = byte(wire.KindHeartbeat); return b }, wire.ErrRecord},
		{"unknown record flag", func(b []byte) []byte { b[rec0+2] |= 1 << 4; return b }, wire.ErrRecord},
		{"record length past end", func(b []byte) []byte { le.PutUint16(b[rec2:], 1); return b }, wire.ErrRecord},
		{"fragment past total", func(b []byte) []byte { le.PutUint32(b[rec1+28:], 991); return b }, wire.ErrFragment},
		{"fragment offset overflows", func(b []byte) []byte { le.PutUint32(b[rec1+28:], ^uint32(0)); return b }, wire.ErrFragment},
		{"total above MaxMessageBytes", func(b []byte) []byte { le.PutUint32(b[rec1+24:], wire.MaxMessageBytes+1); return b }, wire.ErrTooLarge},
		{"fragment header cut", func(b []byte) []byte {
			b[rec2+2] |= wire.FlagFragment // the last record claims 8 more header bytes
			return b
		}, wire.ErrRecord},
	} {
		b := tc.edit(validPacket(t))
		var p wire.Packet
		if err := wire.DecodePacket(b, &p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
	// Bounds that are legal: a fragment ending exactly at total, total at
	// the limit.
	b := validPacket(t)
	le.PutUint32(b[rec1+24:], wire.MaxMessageBytes)
	le.PutUint32(b[rec1+28:], wire.MaxMessageBytes-10)
	var p wire.Packet
	if err := wire.DecodePacket(b, &p); err != nil {
		t.Errorf("fragment ending at MaxMessageBytes: %v", err)
	}
}

func TestMalformed_Command(t *testing.T) {
	for _, tc := range []struct {
		name string
		edit func(b []byte) []byte
		want error
	}{
		{"header flags", func(b []byte) []byte { b[7] = 1; return b }, wire.ErrFlags},
		{"reserved header byte", func(b []byte) []byte { b[35] = 1; return b }, wire.ErrFlags},
		{"zero cmdSeq", func(b []byte) []byte { le.PutUint64(b[cmd1:], 0); return b }, wire.ErrZeroSeq},
		{"count above records", func(b []byte) []byte { le.PutUint16(b[32:], 4); return b }, wire.ErrRecord},
		{"count below records", func(b []byte) []byte { le.PutUint16(b[32:], 2); return b }, wire.ErrTrailing},
		{"unknown record flag", func(b []byte) []byte { b[cmd0+10] |= 1; return b }, wire.ErrRecord},
		{"reserved record byte", func(b []byte) []byte { b[cmd0+11] = 1; return b }, wire.ErrRecord},
		{"record length past end", func(b []byte) []byte { le.PutUint16(b[cmd2+8:], wire.TimerRequestBytes+1); return b }, wire.ErrRecord},
		{"fragment past total", func(b []byte) []byte { le.PutUint32(b[cmd1+16:], 97); return b }, wire.ErrFragment},
		{"total above MaxMessageBytes", func(b []byte) []byte { le.PutUint32(b[cmd1+12:], wire.MaxMessageBytes+1); return b }, wire.ErrTooLarge},
	} {
		b := tc.edit(validCommand(t))
		var p wire.CommandPacket
		if err := wire.DecodeCommand(b, &p); !errors.Is(err, tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, err, tc.want)
		}
	}
}

func TestMalformed_NakInternalTimer(t *testing.T) {
	nak := func(edit func(b []byte)) error {
		b := validNak(t)
		edit(b)
		var n wire.Nak
		return wire.DecodeNak(b, &n)
	}
	if err := nak(func(b []byte) { le.PutUint64(b[24:], 0) }); !errors.Is(err, wire.ErrZeroSeq) {
		t.Errorf("NAK from 0: %v, want ErrZeroSeq", err)
	}
	if err := nak(func(b []byte) { le.PutUint64(b[32:], 9) }); !errors.Is(err, wire.ErrNakRange) {
		t.Errorf("NAK 10..9: %v, want ErrNakRange", err)
	}
	if err := nak(func(b []byte) { le.PutUint32(b[40:], 2) }); !errors.Is(err, wire.ErrNakRange) {
		t.Errorf("NAK with a hole ending before FromOffset: %v, want ErrNakRange", err)
	}
	if err := nak(func(b []byte) { le.PutUint32(b[40:], 50) }); !errors.Is(err, wire.ErrNakRange) {
		t.Errorf("NAK with a hole over several seqs: %v, want ErrNakRange", err)
	}

	internal := func(edit func(b []byte)) error {
		b := validInternal(t)
		edit(b)
		var m wire.Internal
		return wire.DecodeInternal(b, &m)
	}
	for _, typ := range []byte{0, byte(wire.InternalActivate) + 1, 255} {
		if err := internal(func(b []byte) { b[0] = typ }); !errors.Is(err, wire.ErrInternal) {
			t.Errorf("internal type %d: %v, want ErrInternal", typ, err)
		}
	}
	if err := internal(func(b []byte) { b[3] = 1 }); !errors.Is(err, wire.ErrInternal) {
		t.Errorf("internal reserved bytes set: %v, want ErrInternal", err)
	}

	timer := func(edit func(b []byte)) error {
		b := validTimerRequest(t)
		edit(b)
		var tr wire.TimerRequest
		return wire.DecodeTimerRequest(b, &tr)
	}
	for name, edit := range map[string]func(b []byte){
		"cancel=2":        func(b []byte) { b[24] = 2 },
		"reserved set":    func(b []byte) { b[31] = 1 },
		"negative period": func(b []byte) { le.PutUint64(b[16:], 1<<63) },
	} {
		if err := timer(edit); !errors.Is(err, wire.ErrTimerReq) {
			t.Errorf("timer request %s: %v, want ErrTimerReq", name, err)
		}
	}
}

// TestMalformed_RandomCorruption flips bytes of valid frames: decoders must
// never panic, and whatever still decodes must re-encode to the same bytes
// (every frame has one encoding, so corruption cannot hide in slack).
func TestMalformed_RandomCorruption(t *testing.T) {
	rng := newRand(t)
	frames := valid(t)
	names := []string{"packet", "heartbeat", "command", "nak", "gone", "internal", "timer", "status"}
	accepted := 0
	for c := 0; c < 20000; c++ {
		name := names[rng.IntN(len(names))]
		b := append([]byte(nil), frames[name]...)
		for k := 1 + rng.IntN(3); k > 0; k-- {
			b[rng.IntN(len(b))] ^= byte(1 + rng.IntN(255))
		}
		if reencoded, ok := reencode(name, b); ok {
			accepted++
			if string(reencoded) != string(canonical(name, b)) {
				t.Fatalf("%s: corrupted frame %x decodes but re-encodes as %x", name, b, reencoded)
			}
		}
	}
	if accepted == 0 {
		t.Fatal("no corrupted frame decoded: the re-encode check never ran")
	}
}

func isAny(err error, targets []error) bool {
	for _, t := range targets {
		if errors.Is(err, t) {
			return true
		}
	}
	return false
}

// TestMalformed_HeaderExtension: a frame of this version whose header is
// longer than the fields this reader knows (fields added later) decodes,
// skipping the extra bytes, and its records are read from where the
// header says they start.
func TestMalformed_HeaderExtension(t *testing.T) {
	extend := func(b []byte, fixed int) []byte {
		out := append(append(append([]byte(nil), b[:fixed]...), 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE, 0xEE), b[fixed:]...)
		le.PutUint16(out[4:], uint16(fixed+8))
		return out
	}
	var p wire.Packet
	if err := wire.DecodePacket(extend(validPacket(t), wire.PacketHeaderBytes), &p); err != nil {
		t.Fatalf("extended packet: %v", err)
	}
	var r wire.Record
	if !p.Next(&r) || string(r.Payload) != "hello" || p.EpochStart != 90 {
		t.Fatalf("extended packet: first record %q epochStart %d, want hello 90", r.Payload, p.EpochStart)
	}
	var c wire.CommandPacket
	if err := wire.DecodeCommand(extend(validCommand(t), wire.CommandHeaderBytes), &c); err != nil {
		t.Fatalf("extended command: %v", err)
	}
	var cmd wire.Command
	if !c.Next(&cmd) || string(cmd.Payload) != "buy 10" {
		t.Fatalf("extended command: first command %q, want buy 10", cmd.Payload)
	}
	var n wire.Nak
	if err := wire.DecodeNak(extend(validNak(t), wire.NakBytes), &n); err != nil || n.FromSeq != 10 || n.ToSeq != 20 {
		t.Fatalf("extended NAK: %v %+v", err, n)
	}
	var g wire.Gone
	if err := wire.DecodeGone(extend(validGone(t), wire.GoneBytes), &g); err != nil || g.ToSeq != 20 {
		t.Fatalf("extended Gone: %v %+v", err, g)
	}
	var st wire.Status
	if err := wire.DecodeStatus(extend(validStatus(t), wire.StatusBytes), &st); err != nil || st.Contiguous != 100 || st.Member != 0 {
		t.Fatalf("extended status: %v %+v", err, st)
	}
	if err := wire.DecodeStatus(extend(validStandbyStatus(t), wire.StatusStandbyBytes), &st); err != nil || st.Contiguous != 100 || st.Member != 7 {
		t.Fatalf("extended standby status: %v %+v", err, st)
	}
}

func TestMalformed_StatusAndGone(t *testing.T) {
	var st wire.Status
	b := validStatus(t)
	le.PutUint16(b[20:], 1<<5)
	if err := wire.DecodeStatus(b, &st); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("status with an unknown flag: %v, want ErrStatus", err)
	}
	b = validStatus(t)
	le.PutUint64(b[48:], 101) // delivered beyond contiguous
	if err := wire.DecodeStatus(b, &st); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("status delivered > contiguous: %v, want ErrStatus", err)
	}
	b = validStandbyStatus(t)
	le.PutUint64(b[56:], 0)
	if err := wire.DecodeStatus(b, &st); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("standby status with member 0: %v, want ErrStatus", err)
	}
	b = validStandbyStatus(t)[:wire.StatusBytes]
	le.PutUint16(b[4:], wire.StatusBytes)
	if err := wire.DecodeStatus(b, &st); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("standby status without the member field: %v, want ErrStatus", err)
	}
	if _, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{Flags: wire.StatusStandby}); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("AppendStatus of a standby status with member 0: %v, want ErrStatus", err)
	}
	if _, err := wire.AppendStatus(make([]byte, wire.StatusStandbyBytes), &wire.Status{Member: 4}); !errors.Is(err, wire.ErrStatus) {
		t.Errorf("AppendStatus of a member without StatusStandby: %v, want ErrStatus", err)
	}
	if _, err := wire.AppendStatus(make([]byte, wire.StatusBytes), &wire.Status{Flags: wire.StatusStandby, Member: 4}); !errors.Is(err, wire.ErrNoRoom) {
		t.Errorf("AppendStatus of a standby status into 56 bytes: %v, want ErrNoRoom", err)
	}
	var g wire.Gone
	b = validGone(t)
	le.PutUint64(b[32:], 9) // to < from
	if err := wire.DecodeGone(b, &g); !errors.Is(err, wire.ErrNakRange) {
		t.Errorf("Gone 10..9: %v, want ErrNakRange", err)
	}
}
