package multicast

import (
	"fmt"
	"net"
	"net/netip"
)

// NewRepairServer opens a replayer's NAK endpoint: a transport.Server
// whose one socket is bound to addr (an IPv4 host:port, the address nodes
// name with Client.AddSource). It reads NAKs there, answers each sender
// unicast from that same address (so the node's Client recognises the
// source by it), and Publish sends a repair to StreamGroup, for every
// member at once, also from addr. It joins no group: a repair server
// never reads the stream (the replayer follows it with a Client).
func NewRepairServer(cfg Config, addr string) (*Server, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	at, err := netip.ParseAddrPort(addr)
	if err != nil || !at.Addr().Is4() || at.Addr().IsMulticast() {
		return nil, fmt.Errorf("%w: repair server address %q (want an IPv4 unicast host:port)", ErrConfig, addr)
	}
	sock, err := listenSenderOn(c, at)
	if err != nil {
		return nil, err
	}
	s := &Server{stream: c.streamUDP, peers: newPeerTable(c.MaxPeers)}
	r := newReceiver(sock, c, 1)
	r.peers = s.peers
	s.endpoint = endpoint{
		cfg: c, role: "repair", rx: []*receiver{r}, sockets: []*socket{sock},
		sender: sock, out: newSendQueue(sock, c),
	}
	if err := s.init(); err != nil {
		sock.close()
		return nil, err
	}
	return s, nil
}

// LocalAddr is the address the server's sending socket is bound to
// (with the port the kernel chose when addr asked for port 0).
func (s *Server) LocalAddr() netip.AddrPort {
	if a, ok := s.sender.local.(*net.UDPAddr); ok {
		return a.AddrPort()
	}
	return netip.AddrPort{}
}
