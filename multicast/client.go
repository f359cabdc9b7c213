package multicast

import (
	"github.com/seqd/seqd/transport"
)

// SequencerPeer is the Peer a Client reports for frames the sequencer sent
// to it alone (unicast replies); stream frames come from transport.NoPeer.
const SequencerPeer transport.Peer = 1

// Client is a node's end: it reads the event stream from StreamGroup and
// unicast replies on its own socket, and sends commands and NAKs to
// CommandGroup from that socket (so its address is the one the sequencer
// answers). It implements transport.Client and transport.Stats.
type Client struct {
	endpoint
	sources sourceList // repair sources (AddSource)
}

var (
	_ transport.Client  = (*Client)(nil)
	_ transport.Stats   = (*Client)(nil)
	_ transport.Waker   = (*Client)(nil)
	_ transport.Sourcer = (*Client)(nil)
)

// NewClient joins StreamGroup on cfg.Interface and opens its unicast socket
// on an ephemeral port.
func NewClient(cfg Config) (*Client, error) {
	c, err := cfg.resolve()
	if err != nil {
		return nil, err
	}
	stream, err := listenGroup(c, c.streamUDP)
	if err != nil {
		return nil, err
	}
	uni, err := listenSender(c)
	if err != nil {
		stream.close()
		return nil, err
	}
	rs := newReceiver(stream, c, 2)
	ru := newReceiver(uni, c, 3)
	ru.from = SequencerPeer
	cl := &Client{endpoint: endpoint{
		cfg: c, role: "client", rx: []*receiver{rs, ru}, sockets: []*socket{stream, uni},
		sender: uni, out: newSendQueue(uni, c),
	}}
	ru.sources = &cl.sources
	if err := cl.init(); err != nil {
		stream.close()
		uni.close()
		return nil, err
	}
	return cl, nil
}

// Send queues frame for the sequencer (one datagram to CommandGroup).
func (c *Client) Send(frame []byte) error { return c.queue(frame, c.cfg.cmdUDP) }

// Wake makes a waiting Poll return early (transport.Waker); safe from any
// goroutine. Wakes coalesce: while one is outstanding (written, not yet
// read by a Poll), more cost an atomic load and no system call. The
// Server has it too: a cluster primary blocks in Poll until its next
// timed work, and is woken when it must stop (cluster.Member).
func (e *endpoint) Wake() {
	// The poller keeps Close from closing the eventfd under us (its
	// number could be reused by another file).
	e.poller.Wake()
}
