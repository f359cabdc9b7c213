package cluster

import (
	"bytes"
	"context"
	"errors"
	"github.com/seqd/seqd/wire"
	"net"
	"testing"
	"time"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/cluster/standby/standbytest"
)

// fetchFrom serves s's store from a PeerServer on loopback until the
// test ends.
func fetchFrom(t testing.TB, s *standby.Agent) *PeerServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	fs, err := NewPeerServer(DefaultPeerServerConfig(), s, ln)
	if err != nil {
		t.Fatal(err)
	}
	go fs.Serve()
	t.Cleanup(func() { fs.Close() })
	return fs
}

// peerServing is another member's PeerServer: member 2's standby,
// holding pkts.
func peerServing(t testing.TB, pkts [][]byte) *PeerServer {
	t.Helper()
	full := newStandby(t, standbyConfig(t, 2), &standbytest.Client{})
	for _, p := range pkts {
		full.Step(p, 0)
	}
	return fetchFrom(t, full)
}

// TestFetch_CatchUpFromAPeer: a standby that lacks the end of the sealed
// epoch fetches it from another member's PeerServer, cut exactly at the
// cut, and takes over with the stream's State there.
func TestFetch_CatchUpFromAPeer(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 300)
	fs := peerServing(t, pkts)

	behind := newStandby(t, standbyConfig(t, 3), &standbytest.Client{})
	for _, p := range pkts[:40] {
		behind.Step(p, 0)
	}
	cut := src.Core.Published() - 7
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := behind.CatchUp(ctx, cut, []string{"127.0.0.1:1", fs.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	if behind.Contiguous() != cut {
		t.Fatalf("caught up to %d, want exactly the cut %d", behind.Contiguous(), cut)
	}
	tk, err := behind.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tk.State.Snapshot(), standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatal("state after catch-up differs from the stream's at the cut")
	}

	// A range the server does not hold ends with what it holds.
	held, err := Fetch(ctx, fs.Addr().String(), src.Core.Published()+1, src.Core.Published()+5, func([]byte) error {
		t.Error("a packet beyond what the server holds")
		return nil
	})
	if err != nil || held != src.Core.Published() {
		t.Fatalf("Fetch beyond the end: held %d, %v; want %d", held, err, src.Core.Published())
	}
	if _, err := Fetch(ctx, fs.Addr().String(), 5, 3, nil); !errors.Is(err, ErrFetchRange) {
		t.Fatalf("Fetch 5..3: %v, want ErrFetchRange", err)
	}
	// A request of another version gets an error frame.
	c, err := net.Dial("tcp", fs.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	req := wire.AppendPeerRequest(nil, &wire.PeerRequest{Kind: wire.PeerFetch, From: 1, To: 2})
	req[4] = 9
	if _, err := c.Write(req); err != nil {
		t.Fatal(err)
	}
	var hdr [wire.PeerFrameHeaderBytes]byte
	if _, err := c.Read(hdr[:]); err != nil {
		t.Fatal(err)
	}
	if kind, _, err := wire.DecodePeerFrameHeader(hdr[:]); err != nil || kind != wire.PeerError {
		t.Fatalf("answer to a bad version: kind %d, %v; want an error frame", kind, err)
	}
	c.Close()
}

// TestStandby_CatchUpDropsStashAboveTheCut: packets of the sealed epoch
// that waited ahead of a gap and lie above the cut are not stored when
// the catch-up fills the gap: the store ends at the cut.
func TestStandby_CatchUpDropsStashAboveTheCut(t *testing.T) {
	src := standbytest.NewStream(t)
	pkts := src.Commands(t, 30)
	fs := peerServing(t, pkts)

	s := newStandby(t, standbyConfig(t, 3), &standbytest.Client{})
	for i, p := range pkts {
		if i != 10 { // lost: everything after it waits in the stash
			s.Step(p, 0)
		}
	}
	held, err := s.Seal(1)
	if err != nil {
		t.Fatal(err)
	}
	cut := src.Core.Published() - 5
	if held >= cut || s.Stats().Stashed == 0 {
		t.Fatalf("held %d stashed %d: the test needs a gap below the cut and packets stashed", held, s.Stats().Stashed)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CatchUp(ctx, cut, []string{fs.Addr().String()}); err != nil {
		t.Fatal(err)
	}
	if got := s.Contiguous(); got != cut {
		t.Fatalf("store holds up to %d after the catch-up, want exactly the cut %d", got, cut)
	}
	tk, err := s.Takeover(cut)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(tk.State.Snapshot(), standbytest.ReferenceState(t, pkts, cut).Snapshot()) {
		t.Fatal("state at the cut differs from the stream's")
	}
}
