package multicast

import (
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Authenticated frames on real multicast sockets (issue 16): what the
// sequencer signs every receiver takes; what a host without the keys
// forges is counted and dropped before any handler sees it.

var (
	authStream1 = wire.NewKey(1, wire.KeyStream, 0)
	authStream2 = wire.NewKey(2, wire.KeyStream, 0)
	authAlice   = wire.NewKey(10, wire.KeyCommand, wire.MustAccount("alice"))
	authBob     = wire.NewKey(11, wire.KeyCommand, wire.MustAccount("bob"))
)

func newAuth(t testing.TB, acct string, keys ...wire.Key) *wire.Auth {
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

// dataFrame is a stream packet with one record at seq, its payload
// carrying seq.
func dataFrame(t testing.TB, buf []byte, seq uint64, size int) []byte {
	t.Helper()
	var w wire.PacketWriter
	if err := w.Reset(buf[:size], wire.KindData, 1, 77, seq, 0, 1); err != nil {
		t.Fatal(err)
	}
	pay := make([]byte, size-wire.PacketHeaderBytes-wire.RecordHeaderBytes)
	if err := w.Append(&wire.Record{Time: 1, Account: wire.MustAccount("alice"), CmdSeq: seq, Payload: pay, Total: uint32(len(pay))}); err != nil {
		t.Fatal(err)
	}
	return w.Bytes()
}

// seqs records the first seq of every data packet a handler sees.
type seqs struct {
	got   []uint64
	kinds [8]int
	bad   int
}

func (s *seqs) handle(f []byte, _ transport.Peer) {
	k, err := wire.PeekKind(f)
	if err != nil {
		s.bad++
		return
	}
	s.kinds[k]++
	if k == wire.KindData {
		var p wire.Packet
		if wire.DecodePacket(f, &p) != nil {
			s.bad++
			return
		}
		s.got = append(s.got, p.FirstSeq)
	}
}

func authPoll(t *testing.T, p interface {
	Poll(transport.Handler, time.Duration) (int, error)
}, h transport.Handler, done func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !done() {
		if time.Now().After(deadline) {
			t.Fatal("timed out")
		}
		if _, err := p.Poll(h, 10*time.Millisecond); err != nil {
			t.Fatal(err)
		}
	}
}

// rawSend publishes b on the stream group from a server without keys:
// an attacker's host.
func rawSend(t *testing.T, cfg Config, b []byte) {
	t.Helper()
	cfg.Auth = nil
	s, err := NewServer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Publish(b); err != nil {
		t.Fatal(err)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
}

func TestAuth_ForgedStreamDropped(t *testing.T) {
	cfg := testConfig(t)
	scfg, ccfg := cfg, cfg
	scfg.Auth = newAuth(t, "", authStream1)
	ccfg.Auth = newAuth(t, "", authStream1)
	srv, err := NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()

	buf := make([]byte, 2048)
	if err := srv.Publish(dataFrame(t, buf, 1, 256)); err != nil {
		t.Fatal(err)
	}
	srv.Flush()
	var s seqs
	authPoll(t, cl, s.handle, func() bool { return len(s.got) == 1 })

	// The forger's datagrams: data at the next seq, unsigned; the same
	// signed with a key of its own under the real key's id; a heartbeat
	// of epoch 2^32-1 signed with an unknown key id.
	forged := append([]byte(nil), dataFrame(t, buf, 2, 256)...)
	rawSend(t, cfg, forged)
	wrong := newAuth(t, "", wire.NewKey(1, wire.KeyStream, 0))
	fb := make([]byte, len(forged)+wire.AuthTrailerBytes)
	copy(fb, forged)
	n, err := wrong.Sign(fb, len(forged))
	if err != nil {
		t.Fatal(err)
	}
	rawSend(t, cfg, fb[:n])
	hb, _ := wire.AppendHeartbeat(make([]byte, 128), 1<<32-1, 77, 3, 2, 5, 1)
	other := newAuth(t, "", wire.NewKey(99, wire.KeyStream, 0))
	hbb := make([]byte, len(hb)+wire.AuthTrailerBytes)
	copy(hbb, hb)
	n, _ = other.Sign(hbb, len(hb))
	rawSend(t, cfg, hbb[:n])

	// The real next packet still arrives, and nothing forged did.
	if err := srv.Publish(dataFrame(t, buf, 2, 256)); err != nil {
		t.Fatal(err)
	}
	srv.Flush()
	authPoll(t, cl, s.handle, func() bool { return len(s.got) == 2 && cl.AuthFailures()[wire.KindHeartbeat] == 1 })
	if s.got[1] != 2 || s.kinds[wire.KindHeartbeat] != 0 || s.bad != 0 {
		t.Fatalf("delivered %v, %d heartbeats, %d bad; want [1 2], none forged", s.got, s.kinds[wire.KindHeartbeat], s.bad)
	}
	f := cl.AuthFailures()
	if f[wire.KindData] != 2 || f[wire.KindHeartbeat] != 1 || cl.Counters().AuthFailed != 3 {
		t.Fatalf("auth failures %v (total %d), want 2 data, 1 heartbeat", f, cl.Counters().AuthFailed)
	}
}

func TestAuth_ImpersonatedCommandDropped(t *testing.T) {
	cfg := testConfig(t)
	scfg, acfg, bcfg := cfg, cfg, cfg
	scfg.Auth = newAuth(t, "", authStream1, authAlice, authBob)
	acfg.Auth = newAuth(t, "alice", authStream1, authAlice)
	bcfg.Auth = newAuth(t, "bob", authStream1, authBob)
	srv, err := NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	alice, err := NewClient(acfg)
	if err != nil {
		t.Fatal(err)
	}
	defer alice.Close()
	bob, err := NewClient(bcfg)
	if err != nil {
		t.Fatal(err)
	}
	defer bob.Close()

	cmd := func(acct string, seq uint64) []byte {
		var w wire.CommandWriter
		if err := w.Reset(make([]byte, 256), wire.MustAccount(acct), 1, 5, 77); err != nil {
			t.Fatal(err)
		}
		if err := w.Append(&wire.Command{CmdSeq: seq, Payload: []byte("buy")}); err != nil {
			t.Fatal(err)
		}
		return w.Bytes()
	}
	// Bob, with his own key, sends a command under alice's account: the
	// 68-byte impersonation of issue 16, now signed by the wrong key.
	if err := bob.Send(cmd("alice", 1)); err != nil {
		t.Fatal(err)
	}
	bob.Flush()
	if err := alice.Send(cmd("alice", 1)); err != nil {
		t.Fatal(err)
	}
	alice.Flush()
	var accts []wire.Account
	h := func(f []byte, _ transport.Peer) {
		var p wire.CommandPacket
		if wire.DecodeCommand(f, &p) == nil {
			accts = append(accts, p.Account)
		}
	}
	authPoll(t, srv, h, func() bool { return len(accts) == 1 && srv.AuthFailures()[wire.KindCommand] == 1 })
	if err := bob.Send(cmd("bob", 1)); err != nil {
		t.Fatal(err)
	}
	bob.Flush()
	authPoll(t, srv, h, func() bool { return len(accts) == 2 })
	if accts[0] != wire.MustAccount("alice") || accts[1] != wire.MustAccount("bob") || srv.AuthFailures()[wire.KindCommand] != 1 {
		t.Fatalf("sequencer got commands of %v, %d failures; want alice's own, then bob's, 1 failure", accts, srv.AuthFailures()[wire.KindCommand])
	}
}

// TestAuth_RotationUnderLoad switches the sequencer's stream key from id 1
// to id 2 while it publishes: a receiver that holds both loses nothing.
func TestAuth_RotationUnderLoad(t *testing.T) {
	cfg := testConfig(t)
	cfg.ReadBufferBytes = 8 << 20
	scfg, ccfg, oldCfg := cfg, cfg, cfg
	sa := newAuth(t, "", authStream1, authStream2)
	if err := sa.Rotate(1); err != nil {
		t.Fatal(err)
	}
	scfg.Auth = sa
	ccfg.Auth = newAuth(t, "", authStream1, authStream2)
	oldCfg.Auth = newAuth(t, "", authStream1) // not told of key 2
	srv, err := NewServer(scfg)
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	cl, err := NewClient(ccfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	old, err := NewClient(oldCfg)
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	const total, burst = 4000, 50
	buf := make([]byte, 2048)
	var s, so seqs
	for seq := uint64(1); seq <= total; seq++ {
		if seq == total/2+1 {
			if err := sa.Rotate(2); err != nil {
				t.Fatal(err)
			}
		}
		if err := srv.Publish(dataFrame(t, buf, seq, 1200)); err != nil {
			t.Fatal(err)
		}
		if seq%burst == 0 {
			srv.Flush()
			authPoll(t, cl, s.handle, func() bool { return len(s.got) == int(seq) })
			for {
				if n, _ := old.Poll(so.handle, 0); n == 0 {
					break
				}
			}
		}
	}
	for i, q := range s.got {
		if q != uint64(i+1) {
			t.Fatalf("packet %d is seq %d", i, q)
		}
	}
	if f := cl.Counters().AuthFailed; f != 0 {
		t.Fatalf("%d auth failures at the receiver holding both keys", f)
	}
	// The receiver without the new key takes the first half (unless the
	// loaded host dropped some) and refuses every packet of the second.
	authPoll(t, old, so.handle, func() bool { return len(so.got)+int(old.Counters().AuthFailed) >= total-100 })
	for _, q := range so.got {
		if q > total/2 {
			t.Fatalf("the receiver without key 2 delivered seq %d, signed with it", q)
		}
	}
	if old.AuthFailures()[wire.KindData] == 0 {
		t.Fatal("the receiver without key 2 counted no failure")
	}
}

func TestAuth_PublishPollAllocatesNothing(t *testing.T) {
	skipUnderRace(t)
	cfg := testConfig(t)
	cfg.Auth = newAuth(t, "alice", authStream1, authAlice)
	srv, cls := session(t, cfg, 1)
	cl := cls[0]
	buf := make([]byte, 2048)
	frame := append([]byte(nil), dataFrame(t, buf, 1, 256)...)
	var cw wire.CommandWriter
	cw.Reset(make([]byte, 256), wire.MustAccount("alice"), 1, 5, 77)
	cw.Append(&wire.Command{CmdSeq: 1, Payload: []byte("x")})
	cmd := append([]byte(nil), cw.Bytes()...)
	var atClient, atServer counter
	hc, hs := atClient.handle, atServer.handle
	const batch = 64
	ok := true
	round := func() {
		for range batch {
			srv.Publish(frame)
			cl.Send(cmd)
		}
		srv.Flush()
		cl.Flush()
		ok = ok && pollN(cl, hc, &atClient, atClient.frames+batch)
		ok = ok && pollN(srv, hs, &atServer, atServer.frames+batch)
	}
	round()
	if a := testing.AllocsPerRun(100, round); a != 0 {
		t.Fatalf("signed Publish/Send x%d + verified Poll on both ends allocates %v per round", batch, a)
	}
	if !ok || cl.Counters().AuthFailed != 0 || srv.Counters().AuthFailed != 0 {
		t.Fatalf("stalled %v, auth failures client %d server %d", !ok, cl.Counters().AuthFailed, srv.Counters().AuthFailed)
	}
	if atClient.bytes != atClient.frames*len(frame) {
		t.Fatalf("the client's handler saw %d bytes in %d frames: the trailer was not stripped", atClient.bytes, atClient.frames)
	}
}
