package multicast

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// receiver reads one socket in batches with recvmmsg(2) into buffers
// allocated once. It does not use ipv4.PacketConn.ReadBatch because that
// allocates a *net.UDPAddr (and more) per datagram: measured 12 allocations
// per batch of 8 with x/net v0.62, far above the 0.01 per message budget.
// Here the source address lands in a preallocated sockaddr and becomes a
// netip.AddrPort by value.
//
// With GRO (UDP_GRO) the kernel may hand over several datagrams of one
// sender in one slot, with their segment size in a control message; read
// splits them back into the datagrams that were sent, so handlers and the
// fault injector still see one frame per datagram.
type receiver struct {
	s       *socket
	msgs    []unix.Mmsghdr
	vlen    int // slots one recvmmsg fills at most (see maxReadBatchBytes)
	iovs    []unix.Iovec
	names   []unix.RawSockaddrInet4
	bufs    []byte
	slot    int // bytes per receive slot: MaxDatagramBytes, or 64 KiB with GRO
	max     int // MaxDatagramBytes: a longer datagram is dropped
	control []byte
	gro     bool
	groErr  error // why the kernel refused UDP_GRO, if it did

	// peers maps a source address to a Peer; nil means every frame is from
	// the fixed peer below.
	peers *peerTable
	from  transport.Peer
	// sources, on a client's unicast socket, names the repair sources
	// (transport.Sourcer); a datagram from any other address is from.
	sources *sourceList

	// inj, when faults are on, sits between the socket and the handler.
	// passOut is its output, built once (a method value) so that Pass
	// allocates nothing; h and cur are the handler and sender it forwards to.
	inj     *fault.Injector
	passOut func([]byte)
	h       transport.Handler
	cur     transport.Peer

	// auth verifies every datagram before the handler (nil: none);
	// authFailed counts those that failed, by the kind their prefix
	// claims (index wire.Kind; 0 for a frame with no valid prefix).
	auth       *wire.Auth
	authFailed [8]uint64

	// again: read this socket (again) in the current drain.
	again bool

	// Totals, written by the polling goroutine only; the endpoint publishes
	// them to its atomic counters after each batch.
	frames, bytes, truncated uint64
	// groBuffers counts slots that held more than one datagram (tests
	// check the path ran).
	groBuffers uint64
}

// groControlBytes holds the UDP_GRO control message (an int) with room to
// spare, so an unexpected extra message does not truncate it.
var groControlBytes = 2 * unix.CmsgSpace(4)

// groSlotBytes is the slot for a coalesced GRO buffer: up to 64 KiB.
const groSlotBytes = 1 << 16

// maxReadBatchBytes bounds the slot bytes one recvmmsg may fill, so that
// what it copies is still in the CPU's cache when the handlers read it: a
// batch of 64 slots of 64 KiB is 4 MiB, and decoding the first datagrams
// after the kernel wrote the last ones missed the cache on every record
// (wire.DecodePacket was 9% of a batched udp bench node's CPU). 512 KiB
// still moves thousands of small messages per call.
const maxReadBatchBytes = 512 << 10

func newReceiver(s *socket, cfg *resolved, stream uint64) *receiver {
	r := &receiver{s: s, max: cfg.MaxDatagramBytes, auth: cfg.Auth}
	if cfg.GRO {
		if err := unix.SetsockoptInt(s.fd, unix.IPPROTO_UDP, unix.UDP_GRO, 1); err != nil {
			r.groErr = err // ENOPROTOOPT before Linux 5.0: one datagram per slot
		} else {
			r.gro = true
		}
	}
	n, slot := cfg.BatchSize, cfg.MaxDatagramBytes
	if r.gro {
		slot = max(slot, groSlotBytes)
		r.control = make([]byte, n*groControlBytes)
	}
	r.msgs = make([]unix.Mmsghdr, n)
	r.iovs = make([]unix.Iovec, n)
	r.names = make([]unix.RawSockaddrInet4, n)
	r.bufs = make([]byte, n*slot)
	r.slot = slot
	r.vlen = max(1, min(n, maxReadBatchBytes/slot))
	for i := range r.msgs {
		r.iovs[i].Base = &r.bufs[i*slot]
		r.iovs[i].SetLen(slot)
		r.msgs[i].Hdr.Iov = &r.iovs[i]
		r.msgs[i].Hdr.SetIovlen(1)
		r.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
		if r.gro {
			r.msgs[i].Hdr.Control = &r.control[i*groControlBytes]
		}
	}
	if cfg.Faults.Enabled() {
		r.inj = fault.New(cfg.Faults, cfg.FaultStream<<2|stream)
		r.passOut = r.deliverFaulted
	}
	return r
}

// read receives up to one batch without blocking and hands each datagram
// to h. It returns the number of datagrams taken from the socket (not the
// frames delivered, which faults may change); 0 means the socket is empty.
func (r *receiver) read(h transport.Handler) (int, error) {
	for i := range r.msgs[:r.vlen] {
		r.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		r.msgs[i].Hdr.Flags = 0
		if r.gro {
			r.msgs[i].Hdr.SetControllen(groControlBytes)
		}
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(r.s.fd),
		uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(r.vlen), unix.MSG_DONTWAIT, 0, 0)
	switch errno {
	case 0:
	case unix.EAGAIN, unix.EINTR:
		return 0, nil
	default:
		return 0, errno
	}
	for i := 0; i < int(n); i++ {
		m := &r.msgs[i].Hdr
		if m.Flags&unix.MSG_TRUNC != 0 {
			r.truncated++ // larger than MaxDatagramBytes: cannot be a whole frame
			continue
		}
		data := r.bufs[i*r.slot : i*r.slot+int(r.msgs[i].Len)]
		seg := len(data)
		if r.gro && m.Controllen > 0 {
			c := r.control[i*groControlBytes:]
			if g := groSegmentBytes(c[:min(int(m.Controllen), groControlBytes)]); g > 0 {
				seg = g
				if g < len(data) {
					r.groBuffers++
				}
			}
		}
		from := r.from
		if r.peers != nil {
			from = r.peers.lookup(sourceOf(&r.names[i]))
		} else if r.sources != nil && len(r.sources.keys) > 0 {
			if p := r.sources.lookup(sourceOf(&r.names[i])); p != transport.NoPeer {
				from = p
			}
		}
		for {
			k := min(seg, len(data))
			r.deliver(data[:k], from, h)
			if data = data[k:]; len(data) == 0 {
				break
			}
		}
	}
	return int(n), nil
}

// deliver hands one datagram to h, through the fault injector if faults
// are on.
func (r *receiver) deliver(frame []byte, from transport.Peer, h transport.Handler) {
	if len(frame) > r.max {
		r.truncated++ // a GRO slot is larger than MaxDatagramBytes
		return
	}
	if r.auth != nil {
		n, err := r.auth.Verify(frame)
		if err != nil {
			k, _ := wire.PeekKind(frame)
			r.authFailed[k&7]++
			return
		}
		frame = frame[:n]
	}
	if r.inj != nil {
		r.h, r.cur = h, from
		r.inj.Pass(frame, r.passOut)
		return
	}
	r.frames++
	r.bytes += uint64(len(frame))
	h(frame, from)
}

// groSegmentBytes finds the UDP_GRO control message in control and returns
// the segment size it carries (every datagram of the slot is that long
// but the last), or 0 if there is none. The kernel writes it as an int.
func groSegmentBytes(control []byte) int {
	hdr := unix.CmsgLen(0)
	for len(control) >= hdr {
		c := (*unix.Cmsghdr)(unsafe.Pointer(&control[0]))
		n := int(c.Len)
		if n < hdr || n > len(control) {
			return 0
		}
		if c.Level == unix.SOL_UDP && c.Type == unix.UDP_GRO && n >= unix.CmsgLen(4) {
			return int(*(*int32)(unsafe.Pointer(&control[hdr])))
		}
		next := unix.CmsgSpace(n - hdr)
		if next >= len(control) {
			return 0
		}
		control = control[next:]
	}
	return 0
}

// release hands over a datagram the fault injector held back for
// reordering; called when the socket is idle, so the frame is late, not lost.
func (r *receiver) release(h transport.Handler) {
	if r.inj != nil {
		r.h = h
		r.inj.Release(r.passOut)
	}
}

func (r *receiver) deliverFaulted(frame []byte) {
	r.frames++
	r.bytes += uint64(len(frame))
	r.h(frame, r.cur)
}

// faultDrops is what the injector discarded so far.
func (r *receiver) faultDrops() uint64 {
	if r.inj == nil {
		return 0
	}
	return r.inj.Counters().Dropped
}

// sourceOf converts a kernel sockaddr (port in network byte order).
func sourceOf(sa *unix.RawSockaddrInet4) netip.AddrPort {
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	return netip.AddrPortFrom(netip.AddrFrom4(sa.Addr), uint16(p[0])<<8|uint16(p[1]))
}
