package multicast

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// socket is one UDP socket. It is set up through the Go conn (buffers,
// group membership, multicast options through the ipv4 view), then
// detached from the Go runtime's poller: from then on only fd is used, by
// raw system calls (recvmmsg and our own epoll under the endpoint's
// pollMu, sendmmsg under mu).
//
// Why detach: the runtime registers every socket it opens in its own epoll
// set, edge-triggered for reads and writes, so every datagram that arrives
// and every send that completes wakes the runtime's netpoll thread, if one
// is parked there (a node's is: it has timers), although nothing of ours
// ever waits there. That was two wasted thread wake-ups per round trip on a
// node: detached, the UDP rtt p50 was lower in 11 of 12 pairs of runs on
// the loaded 2-core machine (median 12 us against 17).
type socket struct {
	conn *net.UDPConn // nil once detached
	raw  syscall.RawConn
	pc   *ipv4.PacketConn
	fd   int
	// rcvGranted and sndGranted are what getsockopt reports after we asked
	// (Linux reports twice the usable size: it counts bookkeeping).
	rcvGranted, sndGranted int
	local                  net.Addr

	// mu makes close wait for a send in progress, so that the fd is never
	// closed (and its number reused) under a sendmmsg.
	mu     sync.RWMutex
	closed bool
	pfd    [1]unix.PollFd // write's wait, allocated once
}

// detach takes the socket out of the Go runtime's poller (see socket): it
// duplicates the fd, then closes the conn, which removes the original from
// the runtime's epoll set (EPOLL_CTL_DEL) and closes it. The duplicate
// shares the open file description: the socket, its options and
// memberships, and O_NONBLOCK.
func (s *socket) detach() error {
	var nfd int
	var derr error
	if err := s.raw.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		return err
	}
	if derr != nil {
		return derr
	}
	s.local = s.conn.LocalAddr()
	s.conn.Close()
	s.conn, s.raw, s.pc = nil, nil, nil
	s.fd = nfd
	return nil
}

// close closes the socket, after any send in progress; safe more than once.
func (s *socket) close() {
	if s.conn != nil { // not detached yet (a failed set-up)
		s.conn.Close()
		return
	}
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		_ = unix.Close(s.fd)
	}
	s.mu.Unlock()
}

// write calls f with the fd until it returns true, waiting in poll(2) for
// room while it returns false (EAGAIN: the send buffer is full). It fails
// with net.ErrClosed once the socket is closed.
func (s *socket) write(f func(fd uintptr) bool) error {
	s.mu.RLock()
	err := s.writeLocked(f)
	s.mu.RUnlock()
	return err
}

func (s *socket) writeLocked(f func(fd uintptr) bool) error {
	for {
		if s.closed {
			return net.ErrClosed
		}
		if f(uintptr(s.fd)) {
			return nil
		}
		s.pfd[0] = unix.PollFd{Fd: int32(s.fd), Events: unix.POLLOUT}
		if _, err := unix.Poll(s.pfd[:], 100); err != nil && err != unix.EINTR {
			return err
		}
	}
}

// listen opens a UDP socket on port (0: ephemeral) with the buffers asked
// for. A group socket shares its port with other members on the host
// (SO_REUSEADDR) and receives only the groups it joined
// (IP_MULTICAST_ALL=0; Linux otherwise delivers every group joined by any
// socket on the host that matches the port).
func listen(c *resolved, port uint16, group bool) (*socket, error) {
	return listenOn(c, netip.AddrPortFrom(netip.IPv4Unspecified(), port), group)
}

// listenOn is listen bound to one address (a repair server's fixed port).
func listenOn(c *resolved, at netip.AddrPort, group bool) (*socket, error) {
	var optErr error
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		err := rc.Control(func(fd uintptr) {
			s := int(fd)
			if group {
				if optErr = unix.SetsockoptInt(s, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); optErr != nil {
					return
				}
				if optErr = unix.SetsockoptInt(s, unix.IPPROTO_IP, unix.IP_MULTICAST_ALL, 0); optErr != nil {
					return
				}
			}
			setBuffer(s, unix.SO_RCVBUFFORCE, unix.SO_RCVBUF, c.ReadBufferBytes)
			setBuffer(s, unix.SO_SNDBUFFORCE, unix.SO_SNDBUF, c.WriteBufferBytes)
		})
		if err != nil {
			return err
		}
		return optErr
	}}
	pconn, err := lc.ListenPacket(context.Background(), "udp4", at.String())
	if err != nil {
		return nil, fmt.Errorf("multicast: listen udp4 %s: %w", at, err)
	}
	s := &socket{conn: pconn.(*net.UDPConn)}
	s.pc = ipv4.NewPacketConn(s.conn)
	rc, err := s.conn.SyscallConn()
	if err == nil {
		s.raw = rc
		err = rc.Control(func(fd uintptr) {
			s.fd = int(fd)
			s.rcvGranted, _ = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_RCVBUF)
			s.sndGranted, _ = unix.GetsockoptInt(s.fd, unix.SOL_SOCKET, unix.SO_SNDBUF)
		})
	}
	if err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("multicast: raw socket: %w", err)
	}
	return s, nil
}

// setBuffer asks for n bytes, first past the rmem_max/wmem_max caps (the
// FORCE option works for root or CAP_NET_ADMIN), then within them. Errors
// are not fatal: the caller reads back what was granted and reports it.
func setBuffer(fd, force, plain, n int) {
	if n <= 0 {
		return
	}
	if unix.SetsockoptInt(fd, unix.SOL_SOCKET, force, n) == nil {
		return
	}
	_ = unix.SetsockoptInt(fd, unix.SOL_SOCKET, plain, n)
}

// listenGroup opens a socket bound to group's port and joined to it on the
// configured interface, detached from the runtime's poller.
func listenGroup(c *resolved, group *net.UDPAddr) (*socket, error) {
	s, err := joinGroup(c, group)
	if err != nil {
		return nil, err
	}
	if err := s.detach(); err != nil {
		s.close()
		return nil, fmt.Errorf("multicast: detach socket: %w", err)
	}
	return s, nil
}

// joinGroup is listenGroup without the detach: the conn stays usable.
func joinGroup(c *resolved, group *net.UDPAddr) (*socket, error) {
	s, err := listen(c, uint16(group.Port), true)
	if err != nil {
		return nil, err
	}
	if err := s.pc.JoinGroup(c.ifi, &net.UDPAddr{IP: group.IP}); err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("%w: join %v on %s: %w", ErrNoMulticast, group.IP, c.ifi.Name, err)
	}
	return s, nil
}

// listenSender opens an ephemeral-port socket that sends multicast on the
// configured interface with the configured TTL and loopback, and receives
// unicast replies.
func listenSender(c *resolved) (*socket, error) {
	return listenSenderOn(c, netip.AddrPortFrom(netip.IPv4Unspecified(), 0))
}

// listenSenderOn is listenSender bound to at.
func listenSenderOn(c *resolved, at netip.AddrPort) (*socket, error) {
	s, err := listenOn(c, at, false)
	if err != nil {
		return nil, err
	}
	err = s.pc.SetMulticastInterface(c.ifi)
	if err == nil {
		err = s.pc.SetMulticastTTL(c.TTL)
	}
	if err == nil {
		err = s.pc.SetMulticastLoopback(c.Loopback)
	}
	if err != nil {
		s.conn.Close()
		return nil, fmt.Errorf("%w: sender options on %s: %w", ErrNoMulticast, c.ifi.Name, err)
	}
	if err := s.detach(); err != nil {
		s.close()
		return nil, fmt.Errorf("multicast: detach socket: %w", err)
	}
	return s, nil
}
