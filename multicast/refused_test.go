package multicast

import (
	"encoding/binary"
	"errors"
	"net/netip"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/seqd/seqd/transport"
)

// SendFromPortZero sends payload to group:port on the loopback interface
// as a UDP datagram whose source port is 0, through a raw socket (the
// kernel will not bind port 0 otherwise). A reply to such a sender is
// refused by the kernel with EINVAL. It skips the test when raw sockets
// are not allowed (no CAP_NET_RAW).
func sendFromPortZero(t testing.TB, to netip.AddrPort, payload []byte) {
	t.Helper()
	sendFromPort(t, 0, to, payload)
}

// sendFromPort is sendFromPortZero from any source port (on 127.0.0.1),
// whether or not a socket is bound to it.
func sendFromPort(t testing.TB, port uint16, to netip.AddrPort, payload []byte) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_RAW, unix.IPPROTO_UDP)
	if err != nil {
		t.Skipf("raw socket: %v (needs CAP_NET_RAW)", err)
	}
	defer unix.Close(fd)
	lo := unix.IPMreqn{Address: [4]byte{127, 0, 0, 1}}
	if err := unix.SetsockoptIPMreqn(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_IF, &lo); err != nil {
		t.Fatalf("IP_MULTICAST_IF: %v", err)
	}
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_MULTICAST_LOOP, 1); err != nil {
		t.Fatalf("IP_MULTICAST_LOOP: %v", err)
	}
	pkt := make([]byte, 8+len(payload))
	binary.BigEndian.PutUint16(pkt[0:], port)
	binary.BigEndian.PutUint16(pkt[2:], to.Port())
	binary.BigEndian.PutUint16(pkt[4:], uint16(len(pkt)))
	// Checksum 0: none (allowed for UDP over IPv4).
	copy(pkt[8:], payload)
	sa := &unix.SockaddrInet4{Addr: to.Addr().As4()}
	if err := unix.Sendto(fd, pkt, 0, sa); err != nil {
		t.Fatalf("raw sendto %v: %v", to, err)
	}
}

// A reply to a sender the kernel cannot answer (source port 0: EINVAL) is
// loss: SendTo, Flush and Poll go on without an error, the refusal is
// counted, and the server keeps serving the others.
func TestServer_RefusedReplyIsCountedLoss(t *testing.T) {
	cfg := testConfig(t)
	srv, cls := session(t, cfg, 1)
	cmd := netip.MustParseAddrPort(cfg.CommandGroup)
	sendFromPortZero(t, cmd, []byte("nak from port 0"))

	var bad transport.Peer
	var got int
	deadline := time.Now().Add(10 * time.Second)
	for got == 0 && time.Now().Before(deadline) {
		if _, err := srv.Poll(func(frame []byte, from transport.Peer) { got++; bad = from }, 20*time.Millisecond); err != nil {
			t.Fatalf("Poll: %v", err)
		}
	}
	if got == 0 || bad == transport.NoPeer {
		t.Fatalf("the port-0 datagram did not arrive with a Peer (got %d, from %d)", got, bad)
	}
	reply := make([]byte, 100)
	for i := range 3 {
		if err := srv.SendTo(bad, indexed(reply, uint64(i))); err != nil {
			t.Fatalf("SendTo(port 0 peer) = %v, want nil (a refused datagram is loss)", err)
		}
		if err := srv.Publish(indexed(reply, uint64(i))); err != nil {
			t.Fatalf("Publish = %v", err)
		}
		if err := srv.Flush(); err != nil {
			t.Fatalf("Flush after a refused reply = %v, want nil (only ErrClosed is fatal)", err)
		}
	}
	if c := srv.Counters(); c.Refused != 3 {
		t.Fatalf("Refused = %d, want 3 (one per refused reply); counters %+v", c.Refused, c)
	}
	// The stream went on around the refusals.
	var col collector
	pollUntil(t, cls[0], &col, 3)

	srv.Close()
	if err := srv.Flush(); !errors.Is(err, transport.ErrClosed) {
		t.Fatalf("Flush after Close = %v, want ErrClosed", err)
	}
}
