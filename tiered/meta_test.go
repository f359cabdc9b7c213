package tiered

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func replayerMeta() Meta {
	return Meta{Name: "replayer-a", Role: RoleReplayer, NAKAddr: "10.0.0.7:7401", RewindAddr: "10.0.0.7:7402",
		Tier: 1, Session: 0x1234_5678_9abc, Lowest: 1, Highest: 2_000_000, Load: 3}
}

func TestMeta_RoundTrip(t *testing.T) {
	cases := []Meta{
		replayerMeta(),
		{Name: "seq-1", Role: RoleSequencer, Session: 9, AdminAddr: "10.0.0.1:7401"},
		{Name: "n", Role: RoleNode},
		{Name: strings.Repeat("x", MaxNameBytes), Role: RoleReplayer, NAKAddr: strings.Repeat("a", MaxAddrBytes),
			RewindAddr: strings.Repeat("b", MaxAddrBytes), AdminAddr: strings.Repeat("c", 32), Tier: 255, Session: 1<<64 - 1, Lowest: 1<<64 - 2, Highest: 1<<64 - 1, Load: 1<<32 - 1},
	}
	for _, m := range cases {
		b, err := AppendMeta(nil, &m)
		if err != nil {
			t.Fatalf("%+v: %v", m, err)
		}
		if len(b) > MaxMetaBytes {
			t.Fatalf("%d bytes", len(b))
		}
		var got Meta
		if err := DecodeMeta(b, &got); err != nil || got != m {
			t.Fatalf("decode %x = %+v %v, want %+v", b, got, err, m)
		}
	}
	if b, _ := AppendMeta(nil, &cases[0]); len(b) > 64 {
		t.Fatalf("a typical replayer's meta takes %d bytes: not compact", len(b))
	}
}

// TestMeta_Refused: what AppendMeta refuses and what DecodeMeta refuses,
// each with its sentinel.
func TestMeta_Refused(t *testing.T) {
	enc := func(m Meta) []byte {
		b, err := AppendMeta(nil, &m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	good := enc(replayerMeta())
	bad := []struct {
		name string
		m    Meta
		want error
	}{
		{"no name", Meta{Role: RoleNode}, ErrMetaTooLarge},
		{"long name", Meta{Name: strings.Repeat("x", MaxNameBytes+1), Role: RoleNode}, ErrMetaTooLarge},
		{"bad role", Meta{Name: "x", Role: 9}, ErrMeta},
		{"lowest above highest", Meta{Name: "x", Role: RoleReplayer, Lowest: 5, Highest: 4}, ErrMeta},
		{"long address", Meta{Name: "x", Role: RoleReplayer, NAKAddr: strings.Repeat("a", MaxAddrBytes+1)}, ErrMetaTooLarge},
	}
	for _, c := range bad {
		if _, err := AppendMeta(nil, &c.m); !errors.Is(err, c.want) {
			t.Errorf("AppendMeta(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	var m Meta
	decode := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrMeta},
		{"version 0", append([]byte{0}, good[1:]...), ErrMetaVersion},
		{"truncated", good[:len(good)-1], ErrMeta},
		{"trailing byte in version 2", append(bytes.Clone(good), 0), ErrMeta},
		{"trailing byte in version 1", append(append([]byte{1}, good[1:len(good)-1]...), 0), ErrMeta},
		{"role 0", append([]byte{1, 0}, good[2:]...), ErrMeta},
		{"too large", make([]byte, MaxMetaBytes+1), ErrMetaTooLarge},
		{"string past the end", []byte{1, 1, 1, 0, 0, 0, 0, 100, 'x'}, ErrMeta},
		{"overlong varint", append([]byte{1, 1, 1}, bytes.Repeat([]byte{0xff}, 11)...), ErrMeta},
	}
	for _, c := range decode {
		if err := DecodeMeta(c.b, &m); !errors.Is(err, c.want) {
			t.Errorf("DecodeMeta(%s) = %v, want %v", c.name, err, c.want)
		}
	}
	// A later version appends fields: this version's reader reads its own.
	later := append(bytes.Clone(good), 0xAA, 0xBB)
	later[0] = MetaVersion + 1
	if err := DecodeMeta(later, &m); err != nil || m != replayerMeta() {
		t.Fatalf("a later version with appended fields: %+v %v", m, err)
	}
	// Versions 1 (no admin address), 2 (no node fields) and 3 (no pair), as members
	// of before them send, still decode. The node fields of a Meta with
	// none set take 4 bytes (account length, instance, active, applied).
	seq := Meta{Name: "seq-1", Role: RoleSequencer, Session: 9, AdminAddr: "10.0.0.1:7401"}
	v4 := enc(seq)
	v3 := append([]byte{3}, v4[1:len(v4)-1]...) // no pair: its length byte
	if err := DecodeMeta(v3, &m); err != nil || m != seq {
		t.Fatalf("version 3: %+v %v, want %+v", m, err, seq)
	}
	v2 := append([]byte{2}, v3[1:len(v3)-4]...)
	if err := DecodeMeta(v2, &m); err != nil || m != seq {
		t.Fatalf("version 2: %+v %v, want %+v", m, err, seq)
	}
	v1 := append([]byte{1}, v3[1:len(v3)-4-1-len(seq.AdminAddr)]...)
	seq.AdminAddr = ""
	if err := DecodeMeta(v1, &m); err != nil || m != seq {
		t.Fatalf("version 1: %+v %v, want %+v", m, err, seq)
	}
}

// FuzzDecodeMeta: any bytes decode or fail cleanly; what decodes encodes
// back to a Meta that decodes the same (and, for this version, to the same
// bytes).
func FuzzDecodeMeta(f *testing.F) {
	for _, m := range []Meta{replayerMeta(), {Name: "n", Role: RoleNode}} {
		b, _ := AppendMeta(nil, &m)
		f.Add(b)
	}
	f.Add([]byte{1, 1, 1, 0, 0, 0, 0, 1, 'x', 0, 0})
	f.Add([]byte{2, 3, 0, 0, 0, 0, 0, 1, 'y', 0, 0, 9, 9})
	f.Fuzz(func(t *testing.T, b []byte) {
		var m Meta
		if err := DecodeMeta(b, &m); err != nil {
			if !errors.Is(err, ErrMeta) && !errors.Is(err, ErrMetaVersion) && !errors.Is(err, ErrMetaTooLarge) {
				t.Fatalf("error %v matches no sentinel", err)
			}
			return
		}
		enc, err := AppendMeta(nil, &m)
		if err != nil {
			t.Fatalf("decoded %+v does not encode: %v", m, err)
		}
		var again Meta
		if err := DecodeMeta(enc, &again); err != nil || again != m {
			t.Fatalf("re-decode %+v %v, want %+v", again, err, m)
		}
		if b[0] == MetaVersion && !bytes.Equal(enc, b) {
			// Varints have one shortest form, and the decoder refuses
			// no non-shortest one: compare values, not bytes.
			if again != m {
				t.Fatalf("re-encoding differs")
			}
		}
	})
}
