package multicast

import (
	"errors"
	"math/rand/v2"
	"net/netip"
	"testing"
	"time"

	"github.com/seqd/seqd/transport"
)

func addrN(i int) netip.AddrPort {
	return netip.AddrPortFrom(netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}), uint16(1000+i%50000))
}

// The table against a model: an LRU of max addresses. Every address the
// model holds maps to one stable Peer whose address is its own; every
// Peer of an evicted address is unknown from then on, even after its
// slot was taken by another (the generation differs).
func TestPeerTable_EvictsLeastRecentlyHeardAndNeverMisroutes(t *testing.T) {
	for _, max := range []int{1, 2, 7, 64} {
		pt := newPeerTable(max)
		rng := rand.New(rand.NewPCG(uint64(max), 1))
		var lru []netip.AddrPort // most recent last
		current := map[netip.AddrPort]transport.Peer{}
		var stale []transport.Peer
		for step := range 20000 {
			var ap netip.AddrPort
			if len(lru) > 0 && rng.IntN(3) > 0 {
				ap = lru[rng.IntN(len(lru))] // a known sender again
			} else {
				ap = addrN(step)
			}
			p := pt.lookup(ap)
			if old, ok := current[ap]; ok {
				if p != old {
					t.Fatalf("max %d step %d: %v was Peer %#x, now %#x", max, step, ap, old, p)
				}
				for i, a := range lru {
					if a == ap {
						lru = append(lru[:i], lru[i+1:]...)
						break
					}
				}
			} else if len(lru) == max {
				gone := lru[0]
				lru = lru[1:]
				stale = append(stale, current[gone])
				delete(current, gone)
			}
			lru = append(lru, ap)
			current[ap] = p
			if p == transport.NoPeer || uint32(p)>>transport.PeerBits != 0 {
				t.Fatalf("max %d: Peer %#x out of range", max, p)
			}
			if a := pt.addr(p); a == nil || a.AddrPort() != ap {
				t.Fatalf("max %d step %d: addr(%#x) = %v, want %v", max, step, p, a, ap)
			}
		}
		for _, p := range stale {
			if a := pt.addr(p); a != nil {
				t.Fatalf("max %d: stale Peer %#x resolves to %v (misrouted)", max, p, a)
			}
		}
		seen := map[transport.Peer]bool{}
		for ap, p := range current {
			if seen[p] {
				t.Fatalf("max %d: two senders share Peer %#x", max, p)
			}
			seen[p] = true
			if a := pt.addr(p); a == nil || a.AddrPort() != ap {
				t.Fatalf("max %d: addr(%#x) = %v, want %v", max, p, a, ap)
			}
		}
		t.Logf("max %d: %d evicted, %d stale Peers checked", max, pt.evicted, len(stale))
	}
}

// 10000 distinct sources over the life of a server (every `seqd tail` run
// is one): the newest are still answered, the oldest forgotten.
func TestPeerTable_TenThousandSourcesNewestStillAnswered(t *testing.T) {
	pt := newPeerTable(0)
	peers := make([]transport.Peer, 10000)
	for i := range peers {
		peers[i] = pt.lookup(addrN(i))
	}
	for i, p := range peers {
		a := pt.addr(p)
		switch newest := i >= len(peers)-defaultMaxPeers; {
		case newest && (a == nil || a.AddrPort() != addrN(i)):
			t.Fatalf("source %d (of the newest %d): addr = %v, want %v", i, defaultMaxPeers, a, addrN(i))
		case !newest && a != nil:
			t.Fatalf("source %d (evicted): addr = %v, want nil", i, a)
		}
	}
}

// Over real sockets: after 10000 distinct sources (through a raw socket,
// from 10000 source ports), a new node's NAK still gets its reply. When
// that node is then evicted and the next node takes its slot, the Peer of
// the evicted node gets nothing (dropped, counted): not the new occupant.
func TestServer_ManySourcesThenNewNodeAnswered(t *testing.T) {
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 2)
	cmd := netip.MustParseAddrPort(cfg.CommandGroup)
	var from transport.Peer
	var got int
	h := func(_ []byte, p transport.Peer) { got++; from = p }
	poll := func(want int) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for got < want && time.Now().Before(deadline) {
			if _, err := srv.Poll(h, 10*time.Millisecond); err != nil {
				t.Fatal(err)
			}
		}
		if got < want {
			t.Fatalf("server got %d datagrams, want %d", got, want)
		}
	}
	// Source ports below the ephemeral range, so no client socket has one.
	port := uint16(1024)
	sources := func(n int) {
		for i := 0; i < n; i += 500 {
			k := min(500, n-i)
			for range k {
				sendFromPort(t, port, cmd, []byte("hello"))
				port++
			}
			poll(got + k)
		}
	}
	peerOf := func(k int) transport.Peer {
		t.Helper()
		if err := cls[k].Send([]byte("nak")); err != nil {
			t.Fatal(err)
		}
		cls[k].Flush()
		poll(got + 1)
		return from
	}
	reply := func(p transport.Peer, k int) {
		t.Helper()
		if err := srv.SendTo(p, indexed(make([]byte, 64), uint64(k))); err != nil {
			t.Fatalf("SendTo node %d = %v (the table forgot no one?)", k, err)
		}
		srv.Flush()
		var col collector
		pollUntil(t, cls[k], &col, 1)
		if col.got[0] != uint64(k) {
			t.Fatalf("node %d got reply %d", k, col.got[0])
		}
	}
	sources(10000)
	p0 := peerOf(0)
	reply(p0, 0)
	// Node 0 becomes the least recently heard of a full table; node 1
	// takes its slot.
	sources(defaultMaxPeers - 1)
	p1 := peerOf(1)
	if slot := uint32(1)<<srv.peers.slotBits - 1; uint32(p0)&slot != uint32(p1)&slot || p0 == p1 {
		t.Fatalf("node 1 (Peer %#x) did not take node 0's slot (Peer %#x): the test misses its case", p1, p0)
	}
	dropped := srv.Counters().Dropped
	if err := srv.SendTo(p0, indexed(make([]byte, 64), 99)); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("SendTo(evicted node's Peer) = %v, want ErrUnknownPeer", err)
	}
	srv.Flush()
	if d := srv.Counters().Dropped - dropped; d != 1 {
		t.Fatalf("Dropped rose by %d for a reply to an evicted Peer, want 1", d)
	}
	for k, cl := range cls {
		if n, err := cl.Poll(func(f []byte, _ transport.Peer) { t.Errorf("node %d got a frame meant for an evicted Peer", k) }, 30*time.Millisecond); n != 0 || err != nil {
			t.Fatalf("node %d Poll = %d, %v", k, n, err)
		}
	}
	reply(p1, 1)
}
