package wire

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func testKeys(t testing.TB) []Key {
	t.Helper()
	return []Key{
		NewKey(1, KeyStream, 0),
		NewKey(2, KeyStream, 0),
		NewKey(10, KeyCommand, MustAccount("alice")),
		NewKey(11, KeyCommand, MustAccount("bob")),
		NewKey(12, KeyCommand, 0),
		NewKey(20, KeyMember, 0),
	}
}

func testAuth(t testing.TB, keys []Key, acct Account) *Auth {
	t.Helper()
	a, err := NewAuth(keys, acct)
	if err != nil {
		t.Fatal(err)
	}
	return a
}

func testHeartbeat(t testing.TB) []byte {
	t.Helper()
	b, err := AppendHeartbeat(make([]byte, 256), 3, 77, 10, 9, 123, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func testCommand(t testing.TB, acct Account) []byte {
	t.Helper()
	var w CommandWriter
	if err := w.Reset(make([]byte, 256), acct, 1, 5, 77); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&Command{CmdSeq: 1, Payload: []byte("hello")}); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), w.Bytes()...)
}

func signed(t testing.TB, a *Auth, f []byte) []byte {
	t.Helper()
	buf := make([]byte, len(f)+AuthTrailerBytes)
	copy(buf, f)
	n, err := a.Sign(buf, len(f))
	if err != nil {
		t.Fatal(err)
	}
	return buf[:n]
}

func TestAuth_SignVerifyRoundTrip(t *testing.T) {
	keys := testKeys(t)
	seq := testAuth(t, keys, 0)
	node := testAuth(t, keys, MustAccount("alice"))
	hb := testHeartbeat(t)
	s := signed(t, seq, hb)
	if got := le.Uint32(s[len(s)-AuthTagBytes-4:]); got != 2 {
		t.Fatalf("heartbeat signed with key %d, want the newest stream key 2", got)
	}
	n, err := node.Verify(s)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(s[:n], hb) {
		t.Fatalf("verified frame differs from the original:\n%x\n%x", s[:n], hb)
	}
	var p Packet
	if err := DecodePacket(s[:n], &p); err != nil {
		t.Fatalf("verified heartbeat does not decode: %v", err)
	}
	// An unverified signed frame does not decode: a receiver without
	// keys refuses it rather than misread it.
	s2 := signed(t, seq, hb)
	if err := DecodePacket(s2, &p); err == nil {
		t.Fatal("a signed frame decoded without Verify")
	}
}

func TestAuth_EveryByteFlipFails(t *testing.T) {
	a := testAuth(t, testKeys(t), MustAccount("alice"))
	for _, f := range [][]byte{testHeartbeat(t), testCommand(t, MustAccount("alice"))} {
		s := signed(t, a, f)
		for i := range s {
			c := append([]byte(nil), s...)
			c[i] ^= 0x01
			if _, err := a.Verify(c); err == nil {
				t.Fatalf("kind %v: flipping byte %d of %d still verified", Kind(f[3]), i, len(s))
			}
		}
		if _, err := a.Verify(s[:len(s)-1]); err == nil {
			t.Fatal("a truncated frame verified")
		}
	}
}

func TestAuth_KeyClassesAndAccounts(t *testing.T) {
	keys := testKeys(t)
	alice := MustAccount("alice")
	bob := MustAccount("bob")
	carol := MustAccount("carol")
	ring := testAuth(t, keys, 0)

	// Bob's key cannot sign a command of alice's.
	cmd := testCommand(t, alice)
	buf := make([]byte, len(cmd)+AuthTrailerBytes)
	copy(buf, cmd)
	bobAuth := testAuth(t, keys, bob)
	n, err := bobAuth.Sign(buf, len(cmd))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ring.Verify(buf[:n]); !errors.Is(err, ErrKeyClass) {
		t.Fatalf("alice's command signed with bob's key: %v, want ErrKeyClass", err)
	}
	// Carol has no key of her own: she signs with the shared one, which
	// is good for every account.
	carolAuth := testAuth(t, keys, carol)
	if id := carolAuth.SigningKey(KeyCommand); id != 12 {
		t.Fatalf("carol signs with key %d, want the shared 12", id)
	}
	if _, err := ring.Verify(signed(t, carolAuth, testCommand(t, carol))); err != nil {
		t.Fatalf("carol's command with the shared key: %v", err)
	}
	// A command key cannot sign the stream.
	cmdOnly := testAuth(t, []Key{keys[2]}, alice)
	hb := testHeartbeat(t)
	buf = make([]byte, len(hb)+AuthTrailerBytes)
	copy(buf, hb)
	if _, err := cmdOnly.Sign(buf, len(hb)); !errors.Is(err, ErrKeyMissing) {
		t.Fatalf("heartbeat with only a command key: %v, want ErrKeyMissing", err)
	}
	// A standby's ack needs the member key: a stream key holder (any
	// receiver) cannot forge one.
	st, _ := AppendStatus(make([]byte, 128), &Status{Session: 77, Epoch: 1, Flags: StatusStandby, Contiguous: 5, Delivered: 5, Member: 2})
	streamOnly := testAuth(t, keys[:2], 0)
	ack := make([]byte, len(st)+AuthTrailerBytes)
	copy(ack, st)
	if _, err := streamOnly.Sign(ack, len(st)); !errors.Is(err, ErrKeyMissing) {
		t.Fatalf("standby ack with only the stream key: %v, want ErrKeyMissing", err)
	}
	// Forge it anyway: the trailer names the stream key.
	forged := signed(t, streamOnly, testHeartbeat(t))
	copy(ack[len(st):], forged[len(forged)-AuthTrailerBytes:])
	le.PutUint16(ack[6:], FlagMAC)
	if _, err := ring.Verify(ack); !errors.Is(err, ErrKeyClass) {
		t.Fatalf("standby ack with a stream key id: %v, want ErrKeyClass", err)
	}
	if _, err := ring.Verify(signed(t, ring, st)); err != nil {
		t.Fatalf("standby ack with the member key: %v", err)
	}
	// Unknown key, unsigned frame.
	other := testAuth(t, []Key{NewKey(99, KeyStream, 0)}, 0)
	if _, err := ring.Verify(signed(t, other, hb)); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("unknown key: %v", err)
	}
	if _, err := ring.Verify(hb); !errors.Is(err, ErrUnsigned) {
		t.Fatalf("unsigned: %v", err)
	}
	// Same id, another secret: the tag fails.
	wrong := testAuth(t, []Key{NewKey(2, KeyStream, 0)}, 0)
	if _, err := ring.Verify(signed(t, wrong, hb)); !errors.Is(err, ErrMAC) {
		t.Fatalf("wrong secret: %v, want ErrMAC", err)
	}
}

func TestAuth_Rotate(t *testing.T) {
	keys := testKeys(t)
	old := testAuth(t, keys[:1], 0) // knows key 1 only
	both := testAuth(t, keys, 0)
	if err := both.Rotate(1); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Verify(signed(t, both, testHeartbeat(t))); err != nil {
		t.Fatalf("after Rotate(1) a verifier of key 1 only: %v", err)
	}
	if err := both.Rotate(2); err != nil {
		t.Fatal(err)
	}
	if _, err := both.Verify(signed(t, both, testHeartbeat(t))); err != nil {
		t.Fatal(err)
	}
	if _, err := old.Verify(signed(t, both, testHeartbeat(t))); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("key 2 at a verifier of key 1 only: %v", err)
	}
	if err := both.Rotate(7); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("Rotate(7): %v", err)
	}
}

func TestAuth_NoncesDiffer(t *testing.T) {
	a := testAuth(t, testKeys(t), 0)
	b := testAuth(t, testKeys(t)[:2], 0)
	hb := testHeartbeat(t)
	seen := map[string]bool{}
	for i := 0; i < 100; i++ {
		for _, x := range []*Auth{a, b} {
			s := signed(t, x, hb)
			nonce := string(s[len(hb) : len(hb)+AuthNonceBytes])
			if seen[nonce] {
				t.Fatalf("nonce %x used twice", nonce)
			}
			seen[nonce] = true
		}
	}
}

func TestParseKeys(t *testing.T) {
	keys := testKeys(t)
	var text strings.Builder
	text.WriteString("# seqd keys\n\n")
	for _, k := range keys {
		text.WriteString(FormatKey(k))
	}
	got, err := ParseKeys(text.String())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(keys) {
		t.Fatalf("%d keys, want %d", len(got), len(keys))
	}
	for i := range keys {
		if got[i] != keys[i] {
			t.Fatalf("key %d: %+v, want %+v", i, got[i], keys[i])
		}
	}
	for _, c := range []struct{ text, want string }{
		{"1 stream abc", "line 1: wire: malformed keys file: secret of key 1 is 3 hex digits, want 32"},
		{"0 stream 00000000000000000000000000000000", `line 1: wire: malformed keys file: key id "0" is not a number from 1 to 4294967295`},
		{"1 foo 00000000000000000000000000000000", `line 1: wire: malformed keys file: class "foo" is not stream, member, command:ACCOUNT or command:*`},
		{"1 stream:x 00000000000000000000000000000000", `line 1: wire: malformed keys file: class "stream:x": only command keys name an account`},
		{"1 stream 00000000000000000000000000000000\n1 member 00000000000000000000000000000000", "line 2: key id 1: wire: duplicate key id"},
		{"1 stream zz000000000000000000000000000000", "line 1: wire: malformed keys file: secret of key 1 is not hex"},
	} {
		_, err := ParseKeys(c.text)
		if err == nil || err.Error() != c.want {
			t.Errorf("ParseKeys(%q): %v, want %q", c.text, err, c.want)
		}
	}
}

func TestAuth_NoAllocs(t *testing.T) {
	a := testAuth(t, testKeys(t), MustAccount("alice"))
	hb := testHeartbeat(t)
	buf := make([]byte, 2048)
	cmd := testCommand(t, MustAccount("alice"))
	allocs := testing.AllocsPerRun(200, func() {
		for _, f := range [][]byte{hb, cmd} {
			copy(buf, f)
			n, err := a.Sign(buf, len(f))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.Verify(buf[:n]); err != nil {
				t.Fatal(err)
			}
		}
	})
	if allocs != 0 {
		t.Fatalf("Sign+Verify: %v allocations per run, want 0", allocs)
	}
}

func FuzzAuthVerify(f *testing.F) {
	keys := []Key{{ID: 1, Class: KeyStream}, {ID: 10, Class: KeyCommand, Account: MustAccount("alice")}, {ID: 20, Class: KeyMember}}
	a, err := NewAuth(keys, MustAccount("alice"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(signed(f, a, testHeartbeat(f)))
	f.Add(signed(f, a, testCommand(f, MustAccount("alice"))))
	f.Add(testHeartbeat(f))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		orig := append([]byte(nil), b...)
		n, err := a.Verify(b)
		if err != nil {
			if !bytes.Equal(b, orig) {
				t.Fatal("a failed Verify changed the frame")
			}
			return
		}
		if n != len(b)-AuthTrailerBytes || le.Uint16(b[6:])&FlagMAC != 0 {
			t.Fatalf("verified: n=%d of %d, flags %x", n, len(b), le.Uint16(b[6:]))
		}
		// Whatever verified decodes or fails cleanly, never panics.
		var p Packet
		var c CommandPacket
		var s Status
		var k Nak
		_ = DecodePacket(b[:n], &p)
		_ = DecodeCommand(b[:n], &c)
		_ = DecodeStatus(b[:n], &s)
		_ = DecodeNak(b[:n], &k)
	})
}
