package wire

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
)

// Authenticated frames (issue 16). A signed frame has FlagMAC set in its
// prefix flags and ends in an AuthTrailerBytes trailer:
//
//	nonce [12]byte, key id u32, tag [16]byte
//
// The tag is AES-128-GMAC (AES-GCM with no plaintext) under the key named
// by the key id and the nonce, over every byte before the tag: the whole
// frame as sent (prefix with FlagMAC, header with session, epoch and seq,
// every record) and the trailer's nonce and key id. The primitive was
// chosen by measurement (wire/auth_bench_test.go, docs/security.md):
// with AES-NI and PCLMULQDQ it is 2-2.5x faster than HMAC-SHA256 on
// 256 B to 8 KiB frames.
//
// A nonce is never used twice under one key: every Auth draws 12 random
// bytes when it is built and counts up from them (the low 8 bytes), so
// two signers that share a key (the sequencers, the replayers) start at
// random points of a 2^96 space.
const (
	AuthNonceBytes   = 12
	AuthTagBytes     = 16
	AuthTrailerBytes = AuthNonceBytes + 4 + AuthTagBytes
	// FlagMAC in a frame's prefix flags says the frame ends in an
	// authentication trailer. Verify clears it when it strips the
	// trailer, so decoders see the frame as it was before Sign.
	FlagMAC uint16 = 1 << 15
	// AuthKeyBytes is the size of a key's secret (AES-128).
	AuthKeyBytes = 16
)

// KeyClass says what a key may sign.
type KeyClass uint8

// Key classes.
const (
	// KeyStream signs the stream (data, heartbeats, refusals, repairs)
	// and receivers' NAKs and statuses. The sequencers, replayers and
	// bridges sign with it; every receiver holds it to verify.
	KeyStream KeyClass = 1
	// KeyCommand signs commands (and a sending node's status) of one
	// account, or of every account when the key's Account is 0 ("*").
	KeyCommand KeyClass = 2
	// KeyMember signs what only a sequencer member may send: standby
	// acks.
	KeyMember KeyClass = 3
)

func (c KeyClass) String() string {
	switch c {
	case KeyStream:
		return "stream"
	case KeyCommand:
		return "command"
	case KeyMember:
		return "member"
	}
	return "unknown"
}

// Key is one key of a keys file.
type Key struct {
	ID    uint32 // in every frame it signs; unique across a keyring, never 0
	Class KeyClass
	// Account is the account a command key is for; 0 means every
	// account (a shared command key, written "command:*").
	Account Account
	Secret  [AuthKeyBytes]byte
	// VerifyOnly: the key verifies and never signs ("verify-only" after
	// the secret in a keys file): the first step of a rotation, when
	// every process must accept the new key before any signs with it.
	VerifyOnly bool
}

// Name is the key's class as a keys file writes it: "stream",
// "member", "command:ACCOUNT" or "command:*".
func (k Key) Name() string {
	if k.Class != KeyCommand {
		return k.Class.String()
	}
	if k.Account == 0 {
		return "command:*"
	}
	return "command:" + k.Account.String()
}

// FormatKey is k as one line of a keys file (with its newline).
func FormatKey(k Key) string {
	if k.VerifyOnly {
		return fmt.Sprintf("%d %s %s %s\n", k.ID, k.Name(), hex.EncodeToString(k.Secret[:]), verifyOnlyWord)
	}
	return fmt.Sprintf("%d %s %s\n", k.ID, k.Name(), hex.EncodeToString(k.Secret[:]))
}

// verifyOnlyWord marks a key that verifies and never signs.
const verifyOnlyWord = "verify-only"

// ParseKeys reads a keys file: one key a line, "ID CLASS SECRET", where
// ID is a decimal key id (1 to 2^32-1), CLASS is stream, member,
// command:ACCOUNT or command:*, and SECRET is 32 hex digits; a fourth
// word "verify-only" makes a key that verifies and never signs. Blank lines
// and lines starting with # are skipped. Two keys with one id are an
// error. The error names the line.
func ParseKeys(text string) ([]Key, error) {
	var keys []Key
	for i, line := range strings.Split(text, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		k, err := parseKey(line)
		if err != nil {
			return nil, fmt.Errorf("line %d: %w", i+1, err)
		}
		for _, o := range keys {
			if o.ID == k.ID {
				return nil, fmt.Errorf("line %d: key id %d: %w", i+1, k.ID, ErrKeyDuplicate)
			}
		}
		keys = append(keys, k)
	}
	return keys, nil
}

func parseKey(line string) (Key, error) {
	f := strings.Fields(line)
	verifyOnly := len(f) == 4 && f[3] == verifyOnlyWord
	if len(f) != 3 && !verifyOnly {
		return Key{}, fmt.Errorf("%w: want \"ID CLASS SECRET\" or \"ID CLASS SECRET %s\", got %q", ErrKeyFile, verifyOnlyWord, strings.Join(f[min(len(f), 3):], " "))
	}
	id, err := strconv.ParseUint(f[0], 10, 32)
	if err != nil || id == 0 {
		return Key{}, fmt.Errorf("%w: key id %q is not a number from 1 to 4294967295", ErrKeyFile, f[0])
	}
	k := Key{ID: uint32(id), VerifyOnly: verifyOnly}
	switch cls, acct, _ := strings.Cut(f[1], ":"); cls {
	case "stream":
		k.Class = KeyStream
	case "member":
		k.Class = KeyMember
	case "command":
		k.Class = KeyCommand
		if acct != "*" {
			a, err := ParseAccount(acct)
			if err != nil {
				return Key{}, fmt.Errorf("%w: class %q: %w", ErrKeyFile, f[1], err)
			}
			k.Account = a
		}
	default:
		return Key{}, fmt.Errorf("%w: class %q is not stream, member, command:ACCOUNT or command:*", ErrKeyFile, f[1])
	}
	if k.Class != KeyCommand && strings.Contains(f[1], ":") {
		return Key{}, fmt.Errorf("%w: class %q: only command keys name an account", ErrKeyFile, f[1])
	}
	if len(f[2]) != 2*AuthKeyBytes {
		return Key{}, fmt.Errorf("%w: secret of key %d is %d hex digits, want %d", ErrKeyFile, id, len(f[2]), 2*AuthKeyBytes)
	}
	if _, err := hex.Decode(k.Secret[:], []byte(f[2])); err != nil {
		return Key{}, fmt.Errorf("%w: secret of key %d is not hex", ErrKeyFile, id)
	}
	return k, nil
}

// NewKey draws a key of class c (for account a, command keys only) with a
// random secret.
func NewKey(id uint32, c KeyClass, a Account) Key {
	k := Key{ID: id, Class: c, Account: a}
	rand.Read(k.Secret[:])
	return k
}

// ringKey is a key with its cipher, built once.
type ringKey struct {
	Key
	aead cipher.AEAD
}

// Auth signs and verifies frames with the keys of a keyring. It is safe
// for concurrent use: the keyring (its ciphers built once, the signing
// key of each class) is one immutable value behind an atomic pointer,
// swapped whole by Rotate and Reload; the nonce counter is atomic. Sign
// and Verify load the keyring once per frame and allocate nothing.
type Auth struct {
	ring    atomic.Pointer[keyring]
	account Account
	nonceHi [4]byte
	nonceLo atomic.Uint64
	mu      sync.Mutex // serialises Rotate and Reload (readers never take it)
}

// keyring is an Auth's keys: every key, verified against (a few,
// scanned), and the key Sign uses for each class (the highest id of each,
// the newest of a rotation, or what Rotate chose).
type keyring struct {
	keys                    []*ringKey
	stream, command, member *ringKey
}

// NewAuth builds an Auth from keys. account is the account of the
// process's commands: its command key is the one for account, or else
// the shared one (command:*); 0 signs no command. The key of each class
// Sign uses is the one with the highest id (the newest of a rotation)
// that is not VerifyOnly; every key verifies.
func NewAuth(keys []Key, account Account) (*Auth, error) {
	a := &Auth{account: account}
	rand.Read(a.nonceHi[:])
	var lo [8]byte
	rand.Read(lo[:])
	a.nonceLo.Store(le.Uint64(lo[:]))
	r, err := newKeyring(keys, account)
	if err != nil {
		return nil, err
	}
	a.ring.Store(r)
	return a, nil
}

func newKeyring(keys []Key, account Account) (*keyring, error) {
	r := &keyring{}
	var cmdShared *ringKey
	for _, k := range keys {
		if k.ID == 0 {
			return nil, fmt.Errorf("%w: key id 0", ErrKeyFile)
		}
		for _, o := range r.keys {
			if o.ID == k.ID {
				return nil, fmt.Errorf("key id %d: %w", k.ID, ErrKeyDuplicate)
			}
		}
		blk, err := aes.NewCipher(k.Secret[:])
		if err != nil {
			return nil, err
		}
		g, err := cipher.NewGCM(blk)
		if err != nil {
			return nil, err
		}
		rk := &ringKey{Key: k, aead: g}
		r.keys = append(r.keys, rk)
		if k.VerifyOnly {
			continue
		}
		newest := func(p **ringKey) {
			if *p == nil || rk.ID > (*p).ID {
				*p = rk
			}
		}
		switch k.Class {
		case KeyStream:
			newest(&r.stream)
		case KeyMember:
			newest(&r.member)
		case KeyCommand:
			if account != 0 && k.Account == account {
				newest(&r.command)
			} else if k.Account == 0 && (cmdShared == nil || rk.ID > cmdShared.ID) {
				cmdShared = rk
			}
		}
	}
	if r.command == nil && cmdShared != nil && account != 0 {
		r.command = cmdShared
	}
	return r, nil
}

// Reload replaces every key with keys (a keys file read again, e.g. on
// SIGHUP), built as NewAuth builds them: Sign uses the newest key of
// each class from the next frame on, Verify accepts exactly keys. A
// frame being signed or verified meanwhile uses the old keyring whole.
// On an error the Auth keeps its keys. A class the old keyring signed
// with and keys lack is an error (ErrKeyMissing): a reload must not
// silently stop a signer.
func (a *Auth) Reload(keys []Key) error {
	r, err := newKeyring(keys, a.account)
	if err != nil {
		return err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.ring.Load()
	for _, c := range []struct {
		class    KeyClass
		had, has *ringKey
	}{{KeyStream, old.stream, r.stream}, {KeyCommand, old.command, r.command}, {KeyMember, old.member, r.member}} {
		if c.had != nil && c.has == nil {
			return fmt.Errorf("%w: the reloaded keys have no %s key to sign with (this process signed with key %d)", ErrKeyMissing, c.class, c.had.ID)
		}
	}
	a.ring.Store(r)
	return nil
}

// KeyIDs are the ids of every key the Auth verifies with, in its order.
func (a *Auth) KeyIDs() []uint32 {
	r := a.ring.Load()
	out := make([]uint32, len(r.keys))
	for i, k := range r.keys {
		out[i] = k.ID
	}
	return out
}

// Rotate makes Sign use key id for that key's class from now on (the
// key must be in the Auth). Safe while other goroutines sign.
func (a *Auth) Rotate(id uint32) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	old := a.ring.Load()
	k := old.find(id)
	if k == nil {
		return fmt.Errorf("key id %d: %w", id, ErrKeyUnknown)
	}
	r := *old
	switch k.Class {
	case KeyStream:
		r.stream = k
	case KeyMember:
		r.member = k
	case KeyCommand:
		r.command = k
	}
	a.ring.Store(&r)
	return nil
}

// SigningKey is the id of the key Sign uses for class c, or 0.
func (a *Auth) SigningKey(c KeyClass) uint32 {
	r := a.ring.Load()
	var k *ringKey
	switch c {
	case KeyStream:
		k = r.stream
	case KeyMember:
		k = r.member
	case KeyCommand:
		k = r.command
	}
	if k == nil {
		return 0
	}
	return k.ID
}

func (r *keyring) find(id uint32) *ringKey {
	for _, k := range r.keys {
		if k.ID == id {
			return k
		}
	}
	return nil
}

// signer picks the key for the frame f (its prefix already checked):
// the stream key for stream frames and NAKs, the command key for
// commands, the member key for a standby's ack, a sending node's
// command key for its status. nil when the Auth has no key for it.
func (r *keyring) signer(f []byte) *ringKey {
	switch Kind(f[3]) {
	case KindCommand:
		return r.command
	case KindStatus:
		if len(f) >= StatusBytes {
			if le.Uint16(f[20:])&StatusStandby != 0 {
				return r.member
			}
			if le.Uint64(f[24:]) != 0 {
				if k := r.command; k != nil {
					return k
				}
			}
		}
		if k := r.stream; k != nil {
			return k
		}
		return r.member
	case KindNak:
		if k := r.stream; k != nil {
			return k
		}
		return r.member
	}
	return r.stream
}

// Sign appends the trailer to the frame buf[:n] in place and returns the
// signed frame's length, n+AuthTrailerBytes. buf must have room for it
// (ErrNoRoom). The frame must be a seqd frame (its prefix valid) not yet
// signed; a frame the Auth has no key for is ErrKeyMissing.
func (a *Auth) Sign(buf []byte, n int) (int, error) {
	f := buf[:n]
	if _, err := PeekKind(f); err != nil {
		return 0, err
	}
	if len(buf) < n+AuthTrailerBytes {
		return 0, ErrNoRoom
	}
	k := a.ring.Load().signer(f)
	if k == nil {
		return 0, ErrKeyMissing
	}
	le.PutUint16(buf[6:], le.Uint16(buf[6:])|FlagMAC)
	t := buf[n : n+AuthTrailerBytes]
	copy(t, a.nonceHi[:])
	le.PutUint64(t[4:], a.nonceLo.Add(1))
	le.PutUint32(t[AuthNonceBytes:], k.ID)
	aad := buf[:n+AuthNonceBytes+4]
	k.aead.Seal(t[AuthNonceBytes+4:AuthNonceBytes+4], t[:AuthNonceBytes], nil, aad)
	return n + AuthTrailerBytes, nil
}

// Verify checks the signed frame f in place: the trailer's key must be
// one of the Auth's and of a class that may sign f's kind (a command's
// key must be its account's or the shared one), and the tag must match.
// On success it clears FlagMAC in f and returns the length of the frame
// without its trailer (f[:n] decodes as the frame did before Sign). On
// failure f is unchanged and the error says why: ErrUnsigned (no
// FlagMAC), ErrKeyUnknown, ErrKeyClass, ErrMAC, or the prefix's error.
func (a *Auth) Verify(f []byte) (int, error) {
	if _, err := PeekKind(f); err != nil {
		return 0, err
	}
	if le.Uint16(f[6:])&FlagMAC == 0 {
		return 0, ErrUnsigned
	}
	n := len(f) - AuthTrailerBytes
	if n < prefixBytes {
		return 0, ErrShort
	}
	t := f[n:]
	k := a.ring.Load().find(le.Uint32(t[AuthNonceBytes:]))
	if k == nil {
		return 0, ErrKeyUnknown
	}
	if !mayVerify(k, f[:n]) {
		return 0, ErrKeyClass
	}
	if _, err := k.aead.Open(nil, t[:AuthNonceBytes], t[AuthNonceBytes+4:], f[:n+AuthNonceBytes+4]); err != nil {
		return 0, ErrMAC
	}
	le.PutUint16(f[6:], le.Uint16(f[6:])&^FlagMAC)
	return n, nil
}

// mayVerify says whether key k may have signed the frame f (trailer
// stripped; flags still with FlagMAC).
func mayVerify(k *ringKey, f []byte) bool {
	switch Kind(f[3]) {
	case KindData, KindHeartbeat, KindGone:
		return k.Class == KeyStream
	case KindCommand:
		if k.Class != KeyCommand || len(f) < 16 {
			return false
		}
		return k.Account == 0 || k.Account == Account(le.Uint64(f[8:]))
	case KindStatus:
		if len(f) < StatusBytes {
			return false
		}
		if le.Uint16(f[20:])&StatusStandby != 0 {
			return k.Class == KeyMember
		}
		if k.Class == KeyCommand {
			return k.Account == 0 || k.Account == Account(le.Uint64(f[24:]))
		}
		return true
	case KindNak:
		return k.Class != KeyCommand
	}
	return false
}
