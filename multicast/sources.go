package multicast

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/seqd/seqd/transport"
)

// maxSources bounds the repair sources one Client addresses.
const maxSources = 64

// firstSourcePeer is the Peer of the first source; SequencerPeer is below.
const firstSourcePeer = SequencerPeer + 1

// sourceList is a Client's repair sources (transport.Sourcer): few, added
// by the endpoint's goroutine, looked up by the same goroutine for every
// datagram on the unicast socket (a short scan, no allocation).
type sourceList struct {
	keys  []uint64
	addrs []*net.UDPAddr
}

// lookup returns the Peer of the source at ap, or NoPeer.
func (l *sourceList) lookup(ap netip.AddrPort) transport.Peer {
	if len(l.keys) == 0 {
		return transport.NoPeer
	}
	k := peerKey(ap)
	for i, key := range l.keys {
		if key == k {
			return firstSourcePeer + transport.Peer(i)
		}
	}
	return transport.NoPeer
}

// AddSource makes addr (an IPv4 host:port, such as a replayer's NAK
// address) a repair source (transport.Sourcer): SendTo sends it unicast
// datagrams from the Client's unicast socket, so its answers come back to
// that socket and reach the Poll handler with the returned Peer. Frames
// from any other address on that socket are the sequencer's
// (SequencerPeer). Call it on the endpoint's goroutine.
func (c *Client) AddSource(addr string) (transport.Peer, error) {
	if c.closed.Load() {
		return transport.NoPeer, transport.ErrClosed
	}
	ap, err := netip.ParseAddrPort(addr)
	if err != nil || !ap.Addr().Is4() || ap.Port() == 0 || ap.Addr().IsMulticast() || ap.Addr().IsUnspecified() {
		return transport.NoPeer, fmt.Errorf("%w: %q (want a unicast IPv4 host:port)", ErrBadSource, addr)
	}
	l := &c.sources
	if p := l.lookup(ap); p != transport.NoPeer {
		return p, nil
	}
	if len(l.keys) == maxSources {
		return transport.NoPeer, fmt.Errorf("%w: %q: already %d sources", ErrBadSource, addr, maxSources)
	}
	l.keys = append(l.keys, peerKey(ap))
	l.addrs = append(l.addrs, net.UDPAddrFromAddrPort(ap))
	return firstSourcePeer + transport.Peer(len(l.keys)-1), nil
}

// SendTo queues frame for a source added by AddSource, or for the
// sequencer (SequencerPeer: as Send). Other Peers get ErrUnknownPeer.
func (c *Client) SendTo(to transport.Peer, frame []byte) error {
	if to == SequencerPeer {
		return c.Send(frame)
	}
	i := int(to) - int(firstSourcePeer)
	if i < 0 || i >= len(c.sources.addrs) {
		if c.closed.Load() {
			return transport.ErrClosed
		}
		return ErrUnknownPeer
	}
	return c.queue(frame, c.sources.addrs[i])
}
