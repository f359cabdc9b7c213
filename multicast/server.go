package multicast

import (
	"net"

	"github.com/seqd/seqd/transport"
)

// Server is the sequencer's end: it publishes the event stream to
// StreamGroup and receives commands and NAKs sent to CommandGroup. It
// implements transport.Server and transport.Stats.
type Server struct {
	endpoint
	stream *net.UDPAddr
	peers  *peerTable
}

var _ transport.Server = (*Server)(nil)
var _ transport.Retainer = (*Server)(nil)
var _ transport.Stats = (*Server)(nil)
var _ transport.Waker = (*Server)(nil)

// NewServer joins CommandGroup on cfg.Interface and opens the socket that
// sends the stream (and unicast replies) from an ephemeral port.
func NewServer(cfg Config) (*Server, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	cmd, err := listenGroup(c, c.cmdUDP)
	if err != nil {
		return nil, err
	}
	out, err := listenSender(c)
	if err != nil {
		cmd.close()
		return nil, err
	}
	s := &Server{stream: c.streamUDP, peers: newPeerTable(c.MaxPeers)}
	r := newReceiver(cmd, c, 1)
	r.peers = s.peers
	s.endpoint = endpoint{
		cfg: c, role: "server", rx: []*receiver{r}, sockets: []*socket{cmd, out},
		sender: out, out: newSendQueue(out, c),
	}
	if err := s.init(); err != nil {
		cmd.close()
		out.close()
		return nil, err
	}
	return s, nil
}

// Publish queues frame for every client (one datagram to StreamGroup).
func (s *Server) Publish(frame []byte) error { return s.queue(frame, s.stream) }

// PublishRetained is Publish without the copy (transport.Retainer): the
// datagram is sent from frame itself, which the caller leaves unchanged
// until the next Flush or Poll returns.
func (s *Server) PublishRetained(frame []byte) error {
	if s.closed.Load() {
		return transport.ErrClosed
	}
	err := s.out.addRetained(frame, s.stream)
	s.publishSent()
	return s.mapErr(err)
}

// MaxRetainedBytes is the most bytes of retained frames the server holds
// before it flushes on its own (transport.Retainer).
func (s *Server) MaxRetainedBytes() int { return s.out.maxRetained }

// SendTo queues frame for one client, unicast to the address its commands
// came from. A Peer this server does not know, or no longer knows (its
// sender was evicted from the peer table), gets nothing: the frame is
// counted in Counters().Dropped and ErrUnknownPeer returned; it never
// reaches the sender that took the evicted one's slot.
func (s *Server) SendTo(to transport.Peer, frame []byte) error {
	a := s.peers.addr(to)
	if a == nil {
		if s.closed.Load() {
			return transport.ErrClosed
		}
		s.dropped.Add(1)
		return ErrUnknownPeer
	}
	return s.queue(frame, a)
}
