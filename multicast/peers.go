package multicast

import (
	"net"
	"net/netip"

	"github.com/seqd/seqd/transport"
)

// maxPeers bounds the server's peer table. A command from a sender beyond
// it is still delivered, with transport.NoPeer (it cannot be answered by
// SendTo); a deployment with more nodes than this needs a larger constant.
const maxPeers = 4096

// peerTable maps a sender's address to a small Peer number without
// allocating on lookup: open addressing over a fixed array of keys. A new
// sender costs one allocation (its *net.UDPAddr, reused by every SendTo).
type peerTable struct {
	keys  []uint64         // 0 = empty; else key of the address
	ids   []transport.Peer // parallel to keys
	addrs []*net.UDPAddr   // addrs[p-1] is Peer p's address
}

func newPeerTable() *peerTable {
	return &peerTable{
		keys: make([]uint64, 2*maxPeers), // load factor <= 1/2
		ids:  make([]transport.Peer, 2*maxPeers),
	}
}

// peerKey packs an IPv4 address and port; bit 48 keeps it non-zero.
func peerKey(ap netip.AddrPort) uint64 {
	a := ap.Addr().As4()
	return 1<<48 | uint64(a[0])<<40 | uint64(a[1])<<32 | uint64(a[2])<<24 | uint64(a[3])<<16 | uint64(ap.Port())
}

// lookup returns the Peer of ap, adding it if new; NoPeer when full.
func (t *peerTable) lookup(ap netip.AddrPort) transport.Peer {
	k := peerKey(ap)
	mask := uint64(len(t.keys) - 1)
	for i := (k * 0x9e3779b97f4a7c15 >> 32) & mask; ; i = (i + 1) & mask {
		switch t.keys[i] {
		case k:
			return t.ids[i]
		case 0:
			if len(t.addrs) == maxPeers {
				return transport.NoPeer
			}
			t.addrs = append(t.addrs, net.UDPAddrFromAddrPort(ap))
			t.keys[i] = k
			t.ids[i] = transport.Peer(len(t.addrs))
			return t.ids[i]
		}
	}
}

// addr returns Peer p's address, or nil if p is unknown.
func (t *peerTable) addr(p transport.Peer) *net.UDPAddr {
	if p == transport.NoPeer || int(p) > len(t.addrs) {
		return nil
	}
	return t.addrs[p-1]
}
