// Package transport defines the small interface every seqd transport
// implements (mem, tcp, shm, multicast) so that the sequencer and node code
// never know which one carries their frames.
//
// A transport moves opaque frames (encoded by package wire). It does not
// interpret them, repair loss or order them: reliability is the protocol's
// job (sequence numbers, NAKs, heartbeats, resends), so a lossy datagram
// transport and a reliable stream transport look the same from above.
//
// Buffers: Publish, SendTo and Send copy the frame before they return, so
// the caller may reuse its buffer at once (a Retainer's PublishRetained
// does not: its caller leaves the frame alone until the next flush). A frame passed to a Handler is
// valid only during that call and is read-only (a transport may show the
// same bytes to several receivers); a handler that keeps bytes must copy
// them.
//
// Concurrency: an endpoint (Server or Client) is used by one goroutine at a
// time, except Close, which may be called from any goroutine and makes a
// blocked Poll return ErrClosed.
//
// Optional abilities are small interfaces of their own: Stats (counters),
// Waker (wake a blocked Poll from another goroutine; wakes coalesce), and
// Sourcer (a client addresses repair sources other than the sequencer: a
// replayer, a standby, so that a receiver chooses where to NAK), and
// Retainer (a server publishes a frame by reference: the sequencer's
// packets go out straight from its retransmit ring).
//
// Failure policy: a send the network refuses (a datagram the kernel will
// not take, a connection whose write fails) is loss, counted in
// Counters.Refused and logged at most once per interval (RateLog); only
// ErrClosed is fatal to a caller. Tables keyed by remote peers are
// bounded, and a Peer carries a generation (within PeerBits) so that the
// Peer of a forgotten sender never names a newer one.
//
// The conformance suite in transport/transporttest runs against every
// implementation (RunSourcer for Sourcers).
package transport
