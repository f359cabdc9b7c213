package transport

import (
	"errors"
	"time"
)

// ErrClosed is returned by every method of an endpoint after Close.
var ErrClosed = errors.New("transport: closed")

// ErrFrameTooLarge is returned when a frame exceeds what the transport can
// carry in one unit (for UDP, one datagram).
var ErrFrameTooLarge = errors.New("transport: frame too large")

// Peer names the sender of a received frame, so that a reply can be sent to
// it alone with Server.SendTo. Values are meaningful only to the endpoint
// that produced them. NoPeer means unknown.
type Peer uint32

// NoPeer is the zero Peer: the sender is unknown or not addressable.
const NoPeer Peer = 0

// PeerBits is how many low bits of a Peer a transport may use, so that a
// transport combining several (package hybrid) can keep its index in the
// bits above. Transports that forget peers (a bounded table, a closed
// connection) put a generation in the Peer beside the slot, so that the
// Peer of a forgotten sender is never taken for the next one in its slot:
// a reply to it is dropped and counted, never misrouted.
const PeerBits = 28

// Handler is called once per received frame. frame is valid only during
// the call. Build handlers once (a method value), not per call.
type Handler func(frame []byte, from Peer)

// Server is the sequencer's end: it broadcasts the event stream to every
// client and receives commands and NAKs from all of them.
type Server interface {
	// Publish queues frame for every client (the event stream).
	Publish(frame []byte) error
	// SendTo queues frame for one client only (retransmits, refusals).
	SendTo(to Peer, frame []byte) error
	// Flush hands every queued frame to the network. Transports may also
	// flush on their own when their batch is full.
	Flush() error
	// Poll calls h for each frame that has arrived, waiting up to wait for
	// the first one (0: do not wait). It returns how many frames it handed
	// to h. It flushes queued output before it waits.
	Poll(h Handler, wait time.Duration) (int, error)
	// Close releases the endpoint; later calls return ErrClosed.
	Close() error
}

// Client is a node's end: it sends commands and NAKs to the sequencer and
// receives the event stream and the sequencer's replies.
type Client interface {
	// Send queues frame for the sequencer.
	Send(frame []byte) error
	// Flush hands every queued frame to the network.
	Flush() error
	// Poll is as Server.Poll. from is NoPeer or the sequencer.
	Poll(h Handler, wait time.Duration) (int, error)
	// Close releases the endpoint; later calls return ErrClosed.
	Close() error
}

// Retainer is an optional ability of a Server: it can publish a frame by
// reference instead of copying it. The caller of PublishRetained leaves
// frame unchanged until the server's next Flush (or Poll) returns; the
// server holds at most MaxRetainedBytes of such frames and flushes on its
// own before it would hold more. A sequencer that builds its packets in a
// ring larger than that (and a few packets more) publishes each packet
// with no copy: it overwrites none before it was sent.
type Retainer interface {
	PublishRetained(frame []byte) error
	MaxRetainedBytes() int
}

// Stats is an optional ability: endpoints that count what they did.
type Stats interface {
	Counters() Counters
}

// Counters are an endpoint's totals since it was opened.
type Counters struct {
	FramesSent     uint64
	FramesReceived uint64
	BytesSent      uint64
	BytesReceived  uint64
	Dropped        uint64 // frames discarded by the endpoint (malformed, faults, full queues, stale or unknown peers)
	// Refused counts sends the kernel or the network would not take: a
	// datagram refused with EINVAL, EPERM, ENETUNREACH, ENODEV, ENOBUFS...,
	// or, on a stream transport, a connection whose write failed (its
	// queued frames are lost with it). This is loss, repaired by the
	// protocol like any other; the call that met it did not fail.
	Refused uint64
	// AuthFailed counts received frames that failed authentication
	// (issue 16: unsigned, an unknown key, a key that may not sign the
	// frame, a bad tag) and were dropped before any handler saw them.
	AuthFailed uint64
}

// Sourcer is an optional ability of a Client: it can address repair
// sources other than the sequencer (a replayer, a standby sequencer), so
// that a receiver chooses where to send a NAK. Frames a source sends back
// reach the Client's Poll handler with the source's Peer, so the receiver
// can tell whose answer it is.
type Sourcer interface {
	// AddSource makes the endpoint at addr (host:port, in the
	// transport's own terms) a source and returns its Peer, never
	// NoPeer. Adding the same addr again returns the same Peer. The
	// source need not be reachable yet: a transport that connects keeps
	// trying.
	AddSource(addr string) (Peer, error)
	// SendTo queues frame for the source to (sent on Flush, like Send).
	// A Peer that AddSource did not return is an error.
	SendTo(to Peer, frame []byte) error
}

// Waker is an optional ability of a Client or a Server: Wake makes a Poll
// blocked in another goroutine (or the next Poll that would block) return
// soon, with no error, so that work queued by another goroutine (a command
// to send, a cluster primary told to stop) does not wait for the Poll's
// timeout, and the Poll may block until real work is due. Safe from any
// goroutine.
type Waker interface {
	Wake()
}
