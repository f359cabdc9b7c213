package multicast

import (
	"net"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// GSO limits: the kernel takes at most 64 segments per message on older
// kernels (UDP_MAX_SEGMENTS), and a message must stay under the 64 KiB UDP
// limit with headers.
const (
	maxGSOSegments = 64
	maxGSOBytes    = 65000
	udpIPv4Header  = 28
)

// gsoControlBytes is one UDP_SEGMENT control message (a uint16).
var gsoControlBytes = unix.CmsgSpace(2)

// sendQueue copies frames into an arena allocated once (or, with
// addRetained, keeps a reference to the caller's bytes) and hands them to
// the kernel with sendmmsg(2), called directly on preallocated headers so
// that a flush allocates nothing. With GSO, consecutive frames of equal
// size to the same group (the last may be shorter) travel as one message
// with a UDP_SEGMENT control message: the kernel (or the NIC) cuts it into
// the same datagrams the plain path would send, for one syscall and one
// trip down the stack. The frames of a group are contiguous in memory
// (in the arena, or in the caller's buffer of retained frames, back to
// back), so one iovec covers them.
type sendQueue struct {
	s     *socket
	auth  *wire.Auth // signs every frame queued, nil: none
	arena []byte
	used  int
	n     int // frames queued
	max   int
	bufs  [][]byte       // bufs[i], lens[i]: frame i (in arena, or retained)
	lens  []int          //
	dests []*net.UDPAddr // dests[i]: where frame i goes
	// retained counts the bytes of the retained frames queued; past
	// maxRetained the queue flushes before it takes another.
	retained, maxRetained int

	// Messages built by flush: msgs[m] carries msgFrames[m] frames.
	msgs      []unix.Mmsghdr
	iovs      []unix.Iovec
	names     []unix.RawSockaddrInet4
	control   []byte // gsoControlBytes per message, headers written once
	msgFrames []int

	// gso is on while the kernel takes UDP_SEGMENT on this socket; maxSeg
	// is the largest segment the interface carries unfragmented (GSO
	// refuses larger ones).
	gso    bool
	maxSeg int
	// gsoOff is the errno that turned GSO off (0: on, or off by config);
	// gsoFallbacks counts messages resent without GSO. Read by SocketInfo
	// from any goroutine.
	gsoOff       atomic.Uintptr
	gsoFallbacks atomic.Uint64

	// One sendmmsg call, made by writeFn under the runtime poller (which
	// waits for the socket to drain on EAGAIN): msgs[from:to] in, sent and
	// errno out. writeFn is a method value built once so the call
	// allocates nothing.
	from, to int
	sent     int
	errno    unix.Errno
	writeFn  func(fd uintptr) bool

	// Totals, written by the endpoint's goroutine only. failed counts
	// frames lost to a closed socket, refused those the kernel refused
	// (lastRefusal is the latest errno). gsoMessages counts messages sent
	// with UDP_SEGMENT (tests check the path ran).
	frames, bytes, failed, refused, gsoMessages uint64
	lastRefusal                                 unix.Errno
}

func newSendQueue(s *socket, cfg *resolved) *sendQueue {
	n := cfg.BatchSize
	arena := n * min(cfg.MaxDatagramBytes, 2048)
	q := &sendQueue{
		s:         s,
		auth:      cfg.Auth,
		arena:     make([]byte, max(arena, cfg.MaxDatagramBytes)),
		max:       cfg.MaxDatagramBytes,
		bufs:      make([][]byte, n),
		lens:      make([]int, n),
		dests:     make([]*net.UDPAddr, n),
		msgs:      make([]unix.Mmsghdr, n),
		iovs:      make([]unix.Iovec, n),
		names:     make([]unix.RawSockaddrInet4, n),
		control:   make([]byte, n*gsoControlBytes),
		msgFrames: make([]int, n),
		gso:       cfg.GSO,
		maxSeg:    min(cfg.ifi.MTU-udpIPv4Header, maxDatagramBytes),
	}
	q.maxRetained = len(q.arena)
	for i := range q.msgs {
		h := &q.msgs[i].Hdr
		h.Iov = &q.iovs[i]
		h.SetIovlen(1)
		h.Name = (*byte)(unsafe.Pointer(&q.names[i]))
		h.Namelen = unix.SizeofSockaddrInet4
		c := (*unix.Cmsghdr)(unsafe.Pointer(&q.control[i*gsoControlBytes]))
		c.Level = unix.SOL_UDP
		c.Type = unix.UDP_SEGMENT
		c.SetLen(unix.CmsgLen(2))
	}
	if q.gso {
		// A kernel without UDP GSO (before 4.18) does not know the option.
		if _, err := unix.GetsockoptInt(s.fd, unix.IPPROTO_UDP, unix.UDP_SEGMENT); err != nil {
			q.disableGSO(err)
		}
	}
	q.writeFn = q.sendmmsg
	return q
}

// disableGSO turns GSO off for this socket for good, recording why.
func (q *sendQueue) disableGSO(err error) {
	q.gso = false
	errno, ok := err.(unix.Errno)
	if !ok || errno == 0 {
		errno = unix.EINVAL
	}
	q.gsoOff.Store(uintptr(errno))
}

// add copies frame for to, flushing first when the batch or arena is full.
// With auth, the copy is signed in the arena (the trailer after it).
func (q *sendQueue) add(frame []byte, to *net.UDPAddr) error {
	size := len(frame)
	if q.auth != nil {
		size += wire.AuthTrailerBytes
	}
	if size > q.max {
		return transport.ErrFrameTooLarge
	}
	if q.n == len(q.lens) || q.used+size > len(q.arena) {
		if err := q.flush(); err != nil {
			return err
		}
	}
	b := q.arena[q.used : q.used+size]
	copy(b, frame)
	if q.auth != nil {
		if _, err := q.auth.Sign(b, len(frame)); err != nil {
			return err
		}
	}
	q.bufs[q.n], q.lens[q.n], q.dests[q.n] = b, size, to
	q.used += size
	q.n++
	return nil
}

// addRetained queues frame for to without copying it: the caller leaves
// frame unchanged until the next flush returns. The queue flushes first
// when the batch is full or maxRetained bytes of retained frames are
// queued, so a caller writing its frames into a ring of more than
// maxRetained + a few frames never overwrites one still queued.
// With auth the frame is copied (add): it is signed in the arena.
func (q *sendQueue) addRetained(frame []byte, to *net.UDPAddr) error {
	if q.auth != nil {
		return q.add(frame, to)
	}
	if len(frame) > q.max {
		return transport.ErrFrameTooLarge
	}
	if q.n == len(q.lens) || q.retained+len(frame) > q.maxRetained {
		if err := q.flush(); err != nil {
			return err
		}
	}
	q.bufs[q.n], q.lens[q.n], q.dests[q.n] = frame, len(frame), to
	q.retained += len(frame)
	q.n++
	return nil
}

// follows reports whether frame f starts right after frame f-1 in
// memory (both non-empty), so that one iovec can cover both.
func (q *sendQueue) follows(f int) bool {
	a, b := q.bufs[f-1], q.bufs[f]
	return len(a) > 0 && len(b) > 0 &&
		uintptr(unsafe.Pointer(unsafe.SliceData(a)))+uintptr(len(a)) == uintptr(unsafe.Pointer(unsafe.SliceData(b)))
}

// flush sends every queued datagram. A datagram the kernel refuses
// (EINVAL for a reply to port 0, EPERM from a firewall, ENETUNREACH after
// a route change, ENODEV during an interface flap, ENOBUFS...) is loss:
// it is skipped and counted in refused, and the rest are sent; the
// protocol repairs loss, so a refusal is not an error of the call. The only
// error returned is the socket's own (closed), after which nothing goes.
// If the kernel refuses a GSO message as such (EIO: the device cannot
// checksum it; EINVAL), GSO is turned off for the socket and the frames
// are sent again one per datagram: the fallback loses nothing.
func (q *sendQueue) flush() error {
	var first error
	for f := 0; f < q.n; {
		m := q.build(f)
		for i := 0; i < m; {
			q.from, q.to = i, m
			if err := q.s.write(q.writeFn); err != nil {
				// The socket is closed: nothing more will go.
				for j := i; j < m; j++ {
					q.failed += uint64(q.msgFrames[j])
				}
				f = q.n
				if first == nil {
					first = err
				}
				break
			}
			for j := i; j < i+q.sent; j++ {
				if q.msgFrames[j] > 1 {
					q.gsoMessages++
				}
				q.frames += uint64(q.msgFrames[j])
				q.bytes += q.iovs[j].Len
				f += q.msgFrames[j]
			}
			i += q.sent
			if q.errno == 0 {
				continue
			}
			if q.msgFrames[i] > 1 && (q.errno == unix.EIO || q.errno == unix.EINVAL) {
				q.disableGSO(q.errno)
				q.gsoFallbacks.Add(1)
				break // rebuild from frame f without GSO
			}
			q.lastRefusal = q.errno
			q.refused += uint64(q.msgFrames[i])
			f += q.msgFrames[i]
			i++
		}
	}
	clear(q.dests[:q.n])
	clear(q.bufs[:q.n])
	q.n, q.used, q.retained = 0, 0, 0
	return first
}

// build turns the queued frames from f on into messages msgs[0:m] and
// returns m. With GSO a message takes a run of frames to the same
// multicast group, all of one size S but the last, which may be shorter
// (the kernel's rule: every segment is S bytes except the last).
// Unicast replies go one per datagram: their path (and its MTU) is the
// routing table's, not Interface's.
func (q *sendQueue) build(f int) int {
	m := 0
	for f < q.n {
		start, size := f, q.lens[f]
		total := size
		f++
		to := q.dests[start]
		if q.gso && size > 0 && size <= q.maxSeg && to.IP.IsMulticast() {
			for f < q.n && f-start < maxGSOSegments && q.dests[f] == to &&
				q.lens[f] > 0 && q.lens[f] <= size && total+q.lens[f] <= maxGSOBytes && q.follows(f) {
				total += q.lens[f]
				f++
				if q.lens[f-1] < size {
					break // a short segment ends the message
				}
			}
		}
		iov := &q.iovs[m]
		iov.Base = &q.arena[0]
		if total > 0 {
			iov.Base = unsafe.SliceData(q.bufs[start])
		}
		iov.SetLen(total)
		setSockaddr(&q.names[m], to)
		h := &q.msgs[m].Hdr
		if f-start > 1 {
			c := q.control[m*gsoControlBytes:]
			*(*uint16)(unsafe.Pointer(&c[unix.CmsgLen(0)])) = uint16(size)
			h.Control = &c[0]
			h.SetControllen(gsoControlBytes)
		} else {
			h.Control = nil
			h.SetControllen(0)
		}
		q.msgFrames[m] = f - start
		m++
	}
	return m
}

// sendmmsg is writeFn: one sendmmsg(2) of msgs[from:to]. It returns false
// on EAGAIN so that the runtime poller waits until the socket can take more.
func (q *sendQueue) sendmmsg(fd uintptr) bool {
	for {
		n, _, errno := unix.Syscall6(unix.SYS_SENDMMSG, fd,
			uintptr(unsafe.Pointer(&q.msgs[q.from])), uintptr(q.to-q.from), 0, 0, 0)
		switch errno {
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false
		case 0:
			q.sent, q.errno = int(n), 0
		default:
			q.sent, q.errno = 0, errno
		}
		return true
	}
}

// setSockaddr writes a's IPv4 address and port (network byte order).
func setSockaddr(sa *unix.RawSockaddrInet4, a *net.UDPAddr) {
	sa.Family = unix.AF_INET
	p := (*[2]byte)(unsafe.Pointer(&sa.Port))
	p[0], p[1] = byte(a.Port>>8), byte(a.Port)
	copy(sa.Addr[:], a.IP.To4())
}
