package rewind

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// streamPackets builds a stream of n messages as a sequencer batches them
// (1472-byte packets), every 50th message 3000 bytes long and so
// fragmented over three packets.
func streamPackets(t testing.TB, n int) [][]byte {
	t.Helper()
	var out [][]byte
	buf := make([]byte, wire.DefaultMaxPacketBytes)
	var w wire.PacketWriter
	open := false
	flush := func() {
		if open && w.Count() > 0 {
			wire.SetStable(buf, w.FirstSeq()+uint64(w.Count())-1)
			out = append(out, append([]byte(nil), w.Bytes()...))
		}
		open = false
	}
	reset := func(q uint64) {
		if err := w.Reset(buf, wire.KindData, 1, benchSession, q, int64(q), 1); err != nil {
			t.Fatal(err)
		}
		open = true
	}
	for q := uint64(1); q <= uint64(n); q++ {
		if q%50 == 0 {
			flush()
			msg := bytes.Repeat([]byte{byte(q)}, 3000)
			for off := 0; off < len(msg); off += 1200 {
				reset(q)
				end := min(off+1200, len(msg))
				if err := w.Append(&wire.Record{Flags: wire.FlagFragment, Total: uint32(len(msg)), Offset: uint32(off),
					Payload: msg[off:end], Time: int64(q), Account: wire.MustAccount("BIG"), CmdSeq: q}); err != nil {
					t.Fatal(err)
				}
				flush()
			}
			continue
		}
		size := 40 + int(q%200)
		if !open || w.Room() < size {
			flush()
			reset(q)
		}
		payload := bytes.Repeat([]byte{byte(q)}, size)
		if err := w.Append(&wire.Record{Payload: payload, Time: int64(q), Account: wire.MustAccount("LOAD"), CmdSeq: q}); err != nil {
			t.Fatal(err)
		}
	}
	flush()
	// The first packets came to the tier-1 replayer as repairs (it
	// fetched the session from seq 1 by NAK): stored with the flag.
	for _, p := range out[:3] {
		wire.SetPacketFlags(p, wire.PacketRetransmit)
	}
	return out
}

// testLog sends a component's log to t.Log.
func testLog(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, nil))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(b []byte) (int, error) {
	w.t.Log(strings.TrimSpace(string(b)))
	return len(b), nil
}

func openStore(t testing.TB, dir string) *replayer.Store {
	t.Helper()
	cfg := replayer.DefaultConfig()
	cfg.Sync = replayer.SyncNone
	cfg.SegmentBytes = 1 << 20
	s, _, err := replayer.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func appendPackets(t testing.TB, s *replayer.Store, pkts [][]byte) {
	t.Helper()
	for i, p := range pkts {
		if err := s.Append(p); err != nil {
			t.Fatalf("append %d: %v", i, err)
		}
	}
	if err := s.Tick(time.Now().UnixNano() + int64(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
}

// runTier2 runs a tier-2 replayer service on dir following up until its
// store holds seq want; it returns the service's store directory's
// contiguous seq and the Upstream's stats after stopping it.
func runTier2(t *testing.T, dir string, cfg tiered.UpstreamConfig, want uint64, during func()) (uint64, tiered.UpstreamStats) {
	t.Helper()
	cfg.Logger = testLog(t)
	up, err := tiered.NewUpstream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	tc := tcp.DefaultConfig()
	tc.Addr = "127.0.0.1:0"
	nak, err := tcp.NewServer(tc)
	if err != nil {
		t.Fatal(err)
	}
	defer nak.Close()
	sc := replayer.DefaultServiceConfig()
	sc.Dir = dir
	sc.Upstream = true
	sc.Logger = testLog(t)
	sc.Store.SegmentBytes = 1 << 20
	svc, err := replayer.NewService(sc, up, nak)
	if err != nil {
		t.Fatal(err)
	}
	up.Start(svc.Contiguous() + 1)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- svc.Run(ctx) }()
	if during != nil {
		during()
	}
	deadline := time.Now().Add(30 * time.Second)
	for svc.Contiguous() < want {
		select {
		case err := <-errc:
			t.Fatalf("tier 2 stopped at seq %d: %v", svc.Contiguous(), err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("tier 2 holds up to seq %d after 30s, want %d (%+v)", svc.Contiguous(), want, up.Stats())
		}
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
	return svc.Contiguous(), up.Stats()
}

// samePacketsAs checks that the store in dir holds exactly pkts, byte for
// byte, in order.
func samePacketsAs(t *testing.T, dir string, pkts [][]byte) {
	t.Helper()
	cfg := replayer.DefaultConfig()
	cfg.ReadOnly = true
	s, _, err := replayer.Open(dir, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	i := 0
	s.Range(1, 1<<62, func(pkt []byte, _ sequencer.PacketInfo) bool {
		if i >= len(pkts) || !bytes.Equal(pkt[8:], pkts[i][8:]) || !bytes.Equal(pkt[:6], pkts[i][:6]) {
			t.Fatalf("tier 2's packet %d differs from the stream's", i)
		}
		i++
		return true
	})
	if i != len(pkts) {
		t.Fatalf("tier 2 holds %d packets, want %d", i, len(pkts))
	}
}

// TestTier2_FollowsFailsOverAndResumes: a tier-2 replayer service follows
// a tier-1 replayer's rewind stream (tiered.Upstream) while tier 1 goes
// on appending; every tier-1 replayer's connections die after a few
// hundred KiB, so the Upstream moves between them (a Source, as gossip
// gives, naming the next) and resumes after the last whole record it
// read, fragments included. Stopped and restarted on its directory, it
// resumes from its Contiguous+1 while tier 1 grows further. Its store
// ends holding the tier-1 stream packet for packet.
func TestTier2_FollowsFailsOverAndResumes(t *testing.T) {
	pkts := streamPackets(t, 60_000)
	third := len(pkts) / 3
	var stores []*replayer.Store
	var addrs []string
	for i := 0; i < 2; i++ {
		s := openStore(t, t.TempDir())
		t.Cleanup(func() { s.Close() })
		appendPackets(t, s, pkts[:third])
		stores = append(stores, s)
		addrs = append(addrs, serveDying(t, s, 300<<10+i*777))
	}
	source := func(from uint64, failed string) string {
		for i, a := range addrs {
			if a == failed {
				return addrs[(i+1)%len(addrs)]
			}
		}
		return addrs[0]
	}
	dir := t.TempDir()
	cfg := tiered.DefaultUpstreamConfig()
	cfg.Source = source
	mid := lastSeqOf(pkts[:2*third])
	got, st := runTier2(t, dir, cfg, mid, func() {
		for _, s := range stores {
			appendPackets(t, s, pkts[third:2*third]) // tier 1 grows while tier 2 follows
		}
	})
	if got < mid || st.Failovers < 3 {
		t.Fatalf("tier 2 at %d (want %d) after %d failovers (want several): %+v", got, mid, st.Failovers, st)
	}
	t.Logf("first run: seq %d through %d failovers (%d connects)", got, st.Failovers, st.Connects)
	for _, s := range stores {
		appendPackets(t, s, pkts[2*third:])
	}
	last := lastSeqOf(pkts)
	cfg.Source = nil
	cfg.Addrs = addrs
	got, st = runTier2(t, dir, cfg, last, nil)
	if got != last {
		t.Fatalf("restarted tier 2 at %d, want %d", got, last)
	}
	t.Logf("restart: to seq %d through %d failovers", got, st.Failovers)
	samePacketsAs(t, dir, pkts)
}

// TestTier2_NoUpstreamFails: with no upstream reachable a tier-2 service
// stops with ErrUpstream once FailoverWait passed, never waits forever.
func TestTier2_NoUpstreamFails(t *testing.T) {
	cfg := tiered.DefaultUpstreamConfig()
	cfg.Addrs = []string{freeAddr(t)}
	cfg.FailoverWait = 300 * time.Millisecond
	cfg.RetryMax = 50 * time.Millisecond
	cfg.Logger = testLog(t)
	up, err := tiered.NewUpstream(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer up.Close()
	up.Start(1)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err := up.Poll(func([]byte, transport.Peer) {}, 10*time.Millisecond)
		if err != nil {
			if !errors.Is(err, tiered.ErrUpstream) {
				t.Fatalf("Poll: %v, want ErrUpstream", err)
			}
			t.Log(err)
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("no error after 10s")
		}
	}
}

func lastSeqOf(pkts [][]byte) uint64 {
	var p wire.Packet
	if err := wire.DecodePacket(pkts[len(pkts)-1], &p); err != nil {
		panic(fmt.Sprint(err))
	}
	return p.FirstSeq + uint64(p.Count) - 1
}
