package multicast

import (
	"context"
	"fmt"
	"net"
	"syscall"

	"golang.org/x/net/ipv4"
	"golang.org/x/sys/unix"
)

// socket is one UDP socket: the Go conn, its raw view (sendmmsg goes
// through raw.Write, so the runtime's poller waits when the socket is
// full and Close cannot pull the fd from under a send), the ipv4 view
// (group options) and the raw fd (for recvmmsg and epoll, used only under
// the endpoint's pollMu).
type socket struct {
	conn *net.UDPConn
	raw  syscall.RawConn
	pc   *ipv4.PacketConn
	fd   int
	// rcvGranted and sndGranted are what getsockopt reports after we asked
	// (Linux reports twice the usable size: it counts bookkeeping).
	rcvGranted, sndGranted int
}

// listen opens a UDP socket on port (0: ephemeral) with the buffers asked
// for. A group socket shares its port with other members on the host
// (SO_REUSEADDR) and receives only the groups it joined
// (IP_MULTICAST_ALL=0; Linux otherwise delivers every group joined by any
// socket on the host that matches the port).
func listen(c *resolved, port uint16, group bool) (*socket, error) {
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
	pconn, err := lc.ListenPacket(context.Background(), "udp4", fmt.Sprintf("0.0.0.0:%d", port))
	if err != nil {
		return nil, fmt.Errorf("multicast: listen udp4 port %d: %w", port, err)
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
// configured interface.
func listenGroup(c *resolved, group *net.UDPAddr) (*socket, error) {
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
	s, err := listen(c, 0, false)
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
	return s, nil
}
