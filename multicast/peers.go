package multicast

import (
	"math/bits"
	"net"
	"net/netip"

	"github.com/seqd/seqd/transport"
)

// defaultMaxPeers bounds the server's peer table (Config.MaxPeers 0).
const defaultMaxPeers = 4096

// maxMaxPeers keeps a slot and a generation of at least 12 bits within a
// Peer's transport.PeerBits.
const maxMaxPeers = 1 << 16

// peerTable maps a sender's address to a small Peer without allocating on
// lookup: open addressing over a fixed array of buckets pointing into a
// fixed array of slots. It holds at most max senders; when it is full, a
// new sender takes the slot of the one heard from least recently (an LRU
// list threaded through the slots), so a process that meets many short
// lived senders over its life (every `seqd tail` run is one) still answers
// the newest.
//
// A Peer is a slot and that slot's generation, which moves each time the
// slot changes hands, so the Peer of an evicted sender never names the
// sender that took its slot: addr returns nil for it, and the reply is
// dropped and counted. A Peer comes back only after 2^(PeerBits-slot bits)
// evictions from one slot, the least recently heard each time.
//
// A new sender costs one allocation (its *net.UDPAddr, reused by every
// SendTo; never rewritten, since frames queued for the old sender of a
// slot may still point at it).
type peerTable struct {
	buckets  []int32 // -1 empty, else a slot index; length a power of 2 >= 2*max
	slots    []peerSlot
	used     int   // slots handed out so far (they are never freed, only reused)
	head     int32 // most recently heard; -1 when empty
	tail     int32 // least recently heard: the next to go
	slotBits uint
	genMask  uint32
	evicted  uint64 // senders forgotten to make room (tests, metrics)
}

type peerSlot struct {
	key        uint64 // peerKey of the address; 0 while unused
	addr       *net.UDPAddr
	gen        uint32
	bucket     int32 // where key sits in buckets
	prev, next int32 // LRU list; -1 ends it
}

func newPeerTable(max int) *peerTable {
	if max <= 0 {
		max = defaultMaxPeers
	}
	nb := 1
	for nb < 2*max {
		nb <<= 1
	}
	t := &peerTable{
		buckets:  make([]int32, nb),
		slots:    make([]peerSlot, max),
		head:     -1,
		tail:     -1,
		slotBits: uint(bits.Len(uint(max))),
	}
	t.genMask = uint32(1)<<(transport.PeerBits-t.slotBits) - 1
	for i := range t.buckets {
		t.buckets[i] = -1
	}
	return t
}

// peerKey packs an IPv4 address and port; bit 48 keeps it non-zero.
func peerKey(ap netip.AddrPort) uint64 {
	a := ap.Addr().As4()
	return 1<<48 | uint64(a[0])<<40 | uint64(a[1])<<32 | uint64(a[2])<<24 | uint64(a[3])<<16 | uint64(ap.Port())
}

func (t *peerTable) home(k uint64) int {
	return int((k * 0x9e3779b97f4a7c15 >> 32) & uint64(len(t.buckets)-1))
}

func (t *peerTable) peer(slot int32) transport.Peer {
	return transport.Peer(t.slots[slot].gen&t.genMask<<t.slotBits | uint32(slot+1))
}

// lookup returns the Peer of ap, adding it if new (evicting the least
// recently heard sender when the table is full), and marks it heard.
func (t *peerTable) lookup(ap netip.AddrPort) transport.Peer {
	k := peerKey(ap)
	mask := len(t.buckets) - 1
	i := t.home(k)
	for ; t.buckets[i] >= 0; i = (i + 1) & mask {
		if s := t.buckets[i]; t.slots[s].key == k {
			t.touch(s)
			return t.peer(s)
		}
	}
	var s int32
	if t.used < len(t.slots) {
		s = int32(t.used)
		t.used++
	} else {
		s = t.tail
		t.unlink(s)
		t.removeBucket(int(t.slots[s].bucket))
		t.slots[s].gen++
		t.evicted++
		// The removal may have shifted k's probe run: find its place again.
		for i = t.home(k); t.buckets[i] >= 0; i = (i + 1) & mask {
		}
	}
	sl := &t.slots[s]
	sl.key, sl.addr, sl.bucket = k, net.UDPAddrFromAddrPort(ap), int32(i)
	t.buckets[i] = s
	t.pushFront(s)
	return t.peer(s)
}

// removeBucket empties bucket i and shifts the rest of its probe run back
// (deletion without tombstones), keeping every slot's bucket index true.
func (t *peerTable) removeBucket(i int) {
	mask := len(t.buckets) - 1
	t.buckets[i] = -1
	for j := (i + 1) & mask; t.buckets[j] >= 0; j = (j + 1) & mask {
		s := t.buckets[j]
		h := t.home(t.slots[s].key)
		// Move s back to the hole at i if its home is not in (i, j].
		if (j > i && (h <= i || h > j)) || (j < i && (h <= i && h > j)) {
			t.buckets[i], t.buckets[j] = s, -1
			t.slots[s].bucket = int32(i)
			i = j
		}
	}
}

func (t *peerTable) touch(s int32) {
	if t.head == s {
		return
	}
	t.unlink(s)
	t.pushFront(s)
}

func (t *peerTable) unlink(s int32) {
	sl := &t.slots[s]
	if sl.prev >= 0 {
		t.slots[sl.prev].next = sl.next
	} else {
		t.head = sl.next
	}
	if sl.next >= 0 {
		t.slots[sl.next].prev = sl.prev
	} else {
		t.tail = sl.prev
	}
	sl.prev, sl.next = -1, -1
}

func (t *peerTable) pushFront(s int32) {
	sl := &t.slots[s]
	sl.prev, sl.next = -1, t.head
	if t.head >= 0 {
		t.slots[t.head].prev = s
	}
	t.head = s
	if t.tail < 0 {
		t.tail = s
	}
}

// addr returns Peer p's address, or nil if p is unknown or was evicted.
func (t *peerTable) addr(p transport.Peer) *net.UDPAddr {
	slot := int(uint32(p)&(1<<t.slotBits-1)) - 1
	if slot < 0 || slot >= t.used || t.peer(int32(slot)) != p {
		return nil
	}
	return t.slots[slot].addr
}
