package wire

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
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

// TestAuth_Reload: Reload swaps every key at once, while other
// goroutines sign and verify (go test -race): a frame is signed with the
// old keyring or the new one whole, never a mix; after the reload the
// newest key signs and a dropped key no longer verifies; keys that leave
// a class the Auth signed with without a key, or that do not build, are
// refused and the old keys kept.
func TestAuth_Reload(t *testing.T) {
	k1, k2, k3 := NewKey(1, KeyStream, 0), NewKey(2, KeyStream, 0), NewKey(3, KeyStream, 0)
	signer := testAuth(t, []Key{k1}, 0)
	verifier := testAuth(t, []Key{k1, k2}, 0)
	hb := testHeartbeat(t)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var bad atomic.Int64
	for range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := make([]byte, len(hb)+AuthTrailerBytes)
			for {
				select {
				case <-stop:
					return
				default:
				}
				copy(buf, hb)
				n, err := signer.Sign(buf, len(hb))
				if err != nil {
					bad.Add(1)
					continue
				}
				if _, err := verifier.Verify(buf[:n]); err != nil {
					bad.Add(1)
				}
			}
		}()
	}
	for range 200 {
		if err := signer.Reload([]Key{k1, k2}); err != nil {
			t.Fatal(err)
		}
		if err := signer.Reload([]Key{k1}); err != nil {
			t.Fatal(err)
		}
	}
	if err := signer.Reload([]Key{k1, k2}); err != nil {
		t.Fatal(err)
	}
	close(stop)
	wg.Wait()
	if bad.Load() != 0 {
		t.Fatalf("%d frames failed to sign or verify across reloads", bad.Load())
	}
	if id := signer.SigningKey(KeyStream); id != 2 {
		t.Fatalf("after reloading keys 1 and 2 the signing key is %d, want 2", id)
	}
	// The verifier drops key 1: a frame under it no longer verifies.
	old := testAuth(t, []Key{k1}, 0)
	if err := verifier.Reload([]Key{k2, k3}); err != nil {
		t.Fatal(err)
	}
	if _, err := verifier.Verify(signed(t, old, hb)); !errors.Is(err, ErrKeyUnknown) {
		t.Fatalf("key 1 after a reload without it: %v, want ErrKeyUnknown", err)
	}
	if got := verifier.KeyIDs(); !slices.Equal(got, []uint32{2, 3}) {
		t.Fatalf("key ids after the reload: %v", got)
	}
	// Refused: no stream key left for a stream signer; a duplicate id.
	if err := signer.Reload([]Key{NewKey(9, KeyMember, 0)}); !errors.Is(err, ErrKeyMissing) {
		t.Fatalf("a reload without a stream key: %v, want ErrKeyMissing", err)
	}
	if err := signer.Reload([]Key{k1, k1}); !errors.Is(err, ErrKeyDuplicate) {
		t.Fatalf("a reload with key 1 twice: %v, want ErrKeyDuplicate", err)
	}
	if id := signer.SigningKey(KeyStream); id != 2 {
		t.Fatalf("a refused reload changed the signing key to %d", id)
	}
	// Still no allocation per frame.
	buf := make([]byte, len(hb)+AuthTrailerBytes)
	if n := testing.AllocsPerRun(100, func() {
		copy(buf, hb)
		m, _ := signer.Sign(buf, len(hb))
		_, _ = verifier.Verify(buf[:m])
	}); n != 0 {
		t.Fatalf("Sign+Verify after reloads: %v allocations", n)
	}
}

// TestAuth_VerifyOnlyKey: a key marked verify-only in a keys file
// verifies and never signs, though its id is the highest; the mark
// survives FormatKey and ParseKeys.
func TestAuth_VerifyOnlyKey(t *testing.T) {
	k2 := NewKey(2, KeyStream, 0)
	k2.VerifyOnly = true
	text := FormatKey(NewKey(1, KeyStream, 0)) + FormatKey(k2)
	keys, err := ParseKeys(text)
	if err != nil {
		t.Fatal(err)
	}
	if !keys[1].VerifyOnly || keys[0].VerifyOnly || !strings.HasSuffix(strings.TrimSpace(text), "verify-only") {
		t.Fatalf("parsed %+v from %q", keys, text)
	}
	a := testAuth(t, keys, 0)
	if id := a.SigningKey(KeyStream); id != 1 {
		t.Fatalf("signing key %d, want 1 (2 is verify-only)", id)
	}
	signer := testAuth(t, []Key{{ID: 2, Class: KeyStream, Secret: k2.Secret}}, 0)
	if _, err := a.Verify(signed(t, signer, testHeartbeat(t))); err != nil {
		t.Fatalf("a frame under the verify-only key: %v", err)
	}
	if _, err := ParseKeys("1 stream " + strings.Repeat("ab", 16) + " sign-only\n"); !errors.Is(err, ErrKeyFile) {
		t.Fatalf("an unknown fourth word: %v, want ErrKeyFile", err)
	}
}
