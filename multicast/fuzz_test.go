package multicast

import (
	"net/netip"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
)

// FuzzSourceToPeer feeds raw kernel sockaddrs (the only network bytes this
// package interprets) through sourceOf and the peer table: one address
// always maps to one Peer, distinct addresses to distinct Peers, and
// SendTo's address for a Peer is the address it came from.
func FuzzSourceToPeer(f *testing.F) {
	f.Add([]byte{2, 0, 0x1f, 0x90, 127, 0, 0, 1, 2, 0, 0x1f, 0x91, 127, 0, 0, 1})
	f.Add([]byte{2, 0, 0, 0, 0, 0, 0, 0})
	f.Add([]byte{2, 0, 0xff, 0xff, 255, 255, 255, 255, 2, 0, 0xff, 0xff, 255, 255, 255, 255})
	f.Fuzz(func(t *testing.T, raw []byte) {
		pt := newPeerTable(0)
		seen := map[netip.AddrPort]transport.Peer{}
		for len(raw) >= 8 {
			var sa unix.RawSockaddrInet4
			copy((*[8]byte)(unsafe.Pointer(&sa))[:], raw[:8])
			raw = raw[8:]
			ap := sourceOf(&sa)
			if want := netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(raw0(sa))); ap != want {
				t.Fatalf("sourceOf = %v, want %v", ap, want)
			}
			p := pt.lookup(ap)
			if p == transport.NoPeer {
				t.Fatalf("table full after %d peers", len(seen))
			}
			if old, ok := seen[ap]; ok && old != p {
				t.Fatalf("%v was Peer %d, now %d", ap, old, p)
			}
			for other, q := range seen {
				if q == p && other != ap {
					t.Fatalf("%v and %v share Peer %d", ap, other, p)
				}
			}
			seen[ap] = p
			if got := pt.addr(p).AddrPort(); netip.AddrPortFrom(got.Addr().Unmap(), got.Port()) != ap {
				t.Fatalf("addr(%d) = %v, want %v", p, got, ap)
			}
		}
	})
}

// raw0 reads the port the way the kernel wrote it: big-endian bytes.
func raw0(sa unix.RawSockaddrInet4) int {
	b := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return int(b[0])<<8 | int(b[1])
}
