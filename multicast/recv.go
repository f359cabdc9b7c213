package multicast

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
)

// receiver reads one socket in batches with recvmmsg(2) into buffers
// allocated once. It does not use ipv4.PacketConn.ReadBatch because that
// allocates a *net.UDPAddr (and more) per datagram: measured 12 allocations
// per batch of 8 with x/net v0.62, far above the 0.01 per message budget.
// Here the source address lands in a preallocated sockaddr and becomes a
// netip.AddrPort by value.
type receiver struct {
	s     *socket
	msgs  []unix.Mmsghdr
	iovs  []unix.Iovec
	names []unix.RawSockaddrInet4
	bufs  []byte
	slot  int // bytes per receive slot (MaxDatagramBytes)

	// peers maps a source address to a Peer; nil means every frame is from
	// the fixed peer below.
	peers *peerTable
	from  transport.Peer

	// inj, when faults are on, sits between the socket and the handler.
	// passOut is its output, built once (a method value) so that Pass
	// allocates nothing; h and cur are the handler and sender it forwards to.
	inj     *fault.Injector
	passOut func([]byte)
	h       transport.Handler
	cur     transport.Peer

	// Totals, written by the polling goroutine only; the endpoint publishes
	// them to its atomic counters after each batch.
	frames, bytes, truncated uint64
}

func newReceiver(s *socket, cfg *resolved, stream uint64) *receiver {
	n, slot := cfg.BatchSize, cfg.MaxDatagramBytes
	r := &receiver{
		s:     s,
		msgs:  make([]unix.Mmsghdr, n),
		iovs:  make([]unix.Iovec, n),
		names: make([]unix.RawSockaddrInet4, n),
		bufs:  make([]byte, n*slot),
		slot:  slot,
	}
	for i := range r.msgs {
		r.iovs[i].Base = &r.bufs[i*slot]
		r.iovs[i].SetLen(slot)
		r.msgs[i].Hdr.Iov = &r.iovs[i]
		r.msgs[i].Hdr.SetIovlen(1)
		r.msgs[i].Hdr.Name = (*byte)(unsafe.Pointer(&r.names[i]))
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
	for i := range r.msgs {
		r.msgs[i].Hdr.Namelen = unix.SizeofSockaddrInet4
		r.msgs[i].Hdr.Flags = 0
	}
	n, _, errno := unix.Syscall6(unix.SYS_RECVMMSG, uintptr(r.s.fd),
		uintptr(unsafe.Pointer(&r.msgs[0])), uintptr(len(r.msgs)), unix.MSG_DONTWAIT, 0, 0)
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
		frame := r.bufs[i*r.slot : i*r.slot+int(r.msgs[i].Len)]
		from := r.from
		if r.peers != nil {
			from = r.peers.lookup(sourceOf(&r.names[i]))
		}
		if r.inj != nil {
			r.h, r.cur = h, from
			r.inj.Pass(frame, r.passOut)
			continue
		}
		r.frames++
		r.bytes += uint64(len(frame))
		h(frame, from)
	}
	return int(n), nil
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
