package tcp

import (
	"encoding/binary"
	"net"
	"strings"
	"testing"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Authenticated frames over real TCP connections (issue 16): what the
// sequencer signs every client takes, what a node signs the server takes;
// a forged frame is counted, never handed to a handler, and its
// connection is closed with the reason logged.

var (
	tcpStream = wire.NewKey(1, wire.KeyStream, 0)
	tcpAlice  = wire.NewKey(10, wire.KeyCommand, wire.MustAccount("alice"))
	tcpBob    = wire.NewKey(11, wire.KeyCommand, wire.MustAccount("bob"))
)

func tcpAuth(t testing.TB, acct string, keys ...wire.Key) *wire.Auth {
	t.Helper()
	var a wire.Account
	if acct != "" {
		a = wire.MustAccount(acct)
	}
	au, err := wire.NewAuth(keys, a)
	if err != nil {
		t.Fatal(err)
	}
	return au
}

func heartbeat(t testing.TB, seq uint64) []byte {
	t.Helper()
	b, err := wire.AppendHeartbeat(make([]byte, 256), 1, 77, seq, seq, 123, 1)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func command(t testing.TB, acct string, size int) []byte {
	t.Helper()
	var w wire.CommandWriter
	if err := w.Reset(make([]byte, size), wire.MustAccount(acct), 1, 5, 77); err != nil {
		t.Fatal(err)
	}
	if err := w.Append(&wire.Command{CmdSeq: 1, Payload: make([]byte, size-wire.CommandHeaderBytes-wire.CommandRecordBytes)}); err != nil {
		t.Fatal(err)
	}
	return append([]byte(nil), w.Bytes()...)
}

// kinds counts the frames a handler sees by kind, and their sizes.
type kinds struct {
	n     [8]int
	sizes []int
}

func (k *kinds) handle(f []byte, _ transport.Peer) {
	kd, _ := wire.PeekKind(f)
	k.n[kd&7]++
	k.sizes = append(k.sizes, len(f))
}

func TestAuth_SignedFramesPassForgedRefused(t *testing.T) {
	cfg, logs := testConfig(t)
	cfg.Auth = tcpAuth(t, "", tcpStream, tcpAlice, tcpBob)
	s := newServer(t, cfg)
	ccfg := cfg
	ccfg.Auth = tcpAuth(t, "alice", tcpStream, tcpAlice)
	c := dial(t, ccfg, s)
	waitClients(t, s, 1)

	// Signed both ways: delivered as they were sent, trailer stripped.
	hb, cmd := heartbeat(t, 9), command(t, "alice", 128)
	if err := s.Publish(hb); err != nil {
		t.Fatal(err)
	}
	s.Flush()
	var atClient kinds
	eventually(t, "heartbeat at the client", c, atClient.handle, func() bool { return atClient.n[wire.KindHeartbeat] == 1 })
	if atClient.sizes[0] != len(hb) {
		t.Fatalf("client got %d bytes, want %d", atClient.sizes[0], len(hb))
	}
	if err := c.Send(cmd); err != nil {
		t.Fatal(err)
	}
	c.Flush()
	var atServer kinds
	eventually(t, "command at the server", s, atServer.handle, func() bool { return atServer.n[wire.KindCommand] == 1 })
	if atServer.sizes[0] != len(cmd) {
		t.Fatalf("server got %d bytes, want %d", atServer.sizes[0], len(cmd))
	}

	// Forged on a raw connection: an unsigned command, one signed with
	// BOB's key as alice, one with a flipped tag byte. Each closes its
	// connection and is counted; none reaches the handler.
	bob := tcpAuth(t, "bob", tcpBob)
	forged := [][]byte{cmd}
	{
		f := command(t, "alice", 128)
		// BOB's key signs alice's command: sign as bob, then rewrite
		// the account (the tag no longer matches, the class neither).
		b := make([]byte, len(f)+wire.AuthTrailerBytes)
		copy(b, command(t, "bob", 128))
		n, err := bob.Sign(b, len(f))
		if err != nil {
			t.Fatal(err)
		}
		copy(b[8:16], f[8:16])
		forged = append(forged, b[:n])
	}
	{
		b := make([]byte, len(cmd)+wire.AuthTrailerBytes)
		copy(b, cmd)
		n, err := ccfg.Auth.Sign(b, len(cmd))
		if err != nil {
			t.Fatal(err)
		}
		b[n-1] ^= 1
		forged = append(forged, b[:n])
	}
	for i, f := range forged {
		raw, err := net.Dial("tcp", s.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer raw.Close()
		rec := binary.LittleEndian.AppendUint32(nil, uint32(len(f)))
		if _, err := raw.Write(append(rec, f...)); err != nil {
			t.Fatal(err)
		}
		want := uint64(i + 1)
		eventually(t, "forged frame counted", s, atServer.handle, func() bool { return s.Counters().AuthFailed == want })
		eventually(t, "forger's connection closed", s, atServer.handle, func() bool { return s.Clients() == 1 })
	}
	if atServer.n[wire.KindCommand] != 1 {
		t.Fatalf("server handler saw %d commands, want only the signed one", atServer.n[wire.KindCommand])
	}
	if got := s.AuthFailures()[wire.KindCommand]; got != 3 {
		t.Fatalf("AuthFailures[command] = %d, want 3", got)
	}
	eventually(t, "reason logged", s, ignore, func() bool { return strings.Contains(logs.String(), ErrAuth.Error()) })

	// A server without the stream key's peer: a forged stream frame at
	// the client closes the client's connection (it redials).
	fs, err := NewServer(func() Config { c := cfg; c.Auth = nil; return c }())
	if err != nil {
		t.Fatal(err)
	}
	defer fs.Close()
	fc := dial(t, ccfg, fs)
	waitClients(t, fs, 1)
	fs.Publish(heartbeat(t, 10))
	fs.Flush()
	var atForged kinds
	eventually(t, "forged stream frame counted", fc, atForged.handle, func() bool { return fc.Counters().AuthFailed == 1 })
	if atForged.n[wire.KindHeartbeat] != 0 {
		t.Fatalf("client handler saw a forged heartbeat")
	}
}

func TestAuth_PublishSendPollAllocateNothing(t *testing.T) {
	cfg, _ := testConfig(t)
	cfg.Auth = tcpAuth(t, "", tcpStream, tcpAlice)
	s := newServer(t, cfg)
	ccfg := cfg
	ccfg.Auth = tcpAuth(t, "alice", tcpStream, tcpAlice)
	c := dial(t, ccfg, s)
	waitClients(t, s, 1)
	var got counter
	pub := flood(t, heartbeat(t, 3), s.Publish, s.Flush, c, &got)
	var gotCmd counter
	send := flood(t, command(t, "alice", 256), c.Send, c.Flush, serverPoller{s}, &gotCmd)
	for range 10 {
		pub()
		send()
	}
	if a := testing.AllocsPerRun(200, pub); a != 0 {
		t.Fatalf("signed Publish+Flush+verified Poll of %d frames allocates %v", batch, a)
	}
	if a := testing.AllocsPerRun(200, send); a != 0 {
		t.Fatalf("signed Send+Flush+verified Poll of %d frames allocates %v", batch, a)
	}
	if n := s.Counters().AuthFailed + c.Counters().AuthFailed; n != 0 {
		t.Fatalf("%d frames failed authentication", n)
	}
}
