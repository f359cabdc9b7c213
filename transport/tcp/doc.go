// Package tcp carries seqd frames over TCP, for networks without multicast
// (clouds). A Server (the sequencer's end) accepts any number of Clients
// (nodes); Publish sends the event stream to all of them, SendTo to one,
// and each Client sends commands and NAKs back. It implements
// transport.Server and transport.Client.
//
// Framing: each frame is preceded by its length (u32 little endian). A peer
// that announces a frame above Config.MaxFrameBytes is disconnected and
// counted (Drops.OversizedFrames); nothing past a bad length can be trusted.
//
// Batching: Publish, SendTo and Send append frames to a per-connection
// buffer; Flush (and Poll, before it waits) hands each buffer to that
// connection's writer goroutine, which writes it with one Write call.
// TCP_NODELAY is on, so a flush goes out at once. Reads go through a large
// per-connection buffer and yield many frames per read.
//
// Reads: Poll reads the sockets itself, on the endpoint's goroutine: each
// endpoint has its own epoll set of its connections (epoll.Set, as package multicast
// has), Poll waits in epoll_wait and reads the sockets found ready, and
// hands their frames to the Handler straight from the read buffer. No
// goroutine hands a frame over: a reader goroutine per connection did,
// and its two wake-ups per frame (the reader's by the runtime, then the
// polling goroutine's) made a round trip over TCP 1.7-2.2 times one over
// UDP. A Poll reads each ready connection at most a few times
// (ReadBufferBytes each); the rest waits in the kernel for the next Poll,
// so an endpoint that does not poll pushes back on its peers through TCP
// flow control, and notices a connection's end at its next Poll.
// (A connection with no file descriptor, a test's wrapper, is read by a
// goroutine into an inbox instead.)
//
// The sockets are out of Go's netpoller (see detach in conn.go): in it,
// every segment and ACK woke the runtime's polling thread though no
// goroutine waited, 2.8 wake-ups per round trip on top of Poll's own.
// Poll and Flush read and write without waiting (MSG_DONTWAIT); a
// connection's writer goroutine writes in blocking write(2) calls, so a
// peer that does not read holds a thread until it is cut (the slow-peer
// rules below; kill's shutdown(2) ends the write).
//
// Goroutines per connection: one writer, so that a stalled peer blocks
// only its own writer, and one that waits for the connection's end (a
// Client's redials; a Server's frees the connection's slot).
// A peer that does not read is cut off: a connection holding more than
// Config.SlowClientBytes (default 4 MiB) not yet written, with no write
// progress for SlowClientTimeout (default 3 s), or more than MaxQueueBytes
// (default 64 MiB: a node's window of commands, resent at once, must fit)
// at all, is closed with ErrSlowClient, logged and counted
// (Drops.SlowClients); the node reconnects and repairs its gap by NAK. A
// peer that reads is not cut for a burst (a 16 MiB message) below
// MaxQueueBytes. So a subscriber that never reads costs the server a
// bounded amount, and at most Config.MaxConns (default 1024) connections
// are held: one more is closed as soon as it is accepted
// (Drops.RefusedConns).
//
// Failure policy: a write that fails (a reset, a dead peer) ends that
// connection only, counted in Drops.WriteFailures and Counters().Refused;
// Publish, SendTo and Flush fail only after Close. Connections closed for
// cause or refused are logged at most once per transport.DefaultLogInterval,
// with the count and the last reason, however many there are.
//
// Peers: a Server connection's Peer is its slot (of MaxConns) and the
// slot's generation, which moves when the connection closes, so the Peer
// of a closed connection never reaches a newer one: SendTo drops it and
// counts it (Counters().Dropped).
//
// Reconnection: a Client whose connection drops dials again with
// exponential backoff (ReconnectMin..ReconnectMax, jittered) until Close.
// Given several addresses (Config.Addrs: a sequencer cluster's members),
// each round tries them all once, from the one after the server that went
// away: only the primary accepts (a standby listens on no stream address,
// a deposed primary closes its server), so the Client finds the new
// primary with no configuration change. Dial connects to the first that
// accepts; Open connects in the background (a standby started before the
// first primary).
// Frames flushed while it is disconnected are dropped and counted: the
// protocol resends commands and repairs the stream, so the transport does
// not resume by itself. Reconnects counts the reconnections.
//
// Repair sources: a Client is a transport.Sourcer. AddSource keeps one more
// connection, to a replayer or a standby, reconnecting like the first;
// the client's Poll reads it too, and labels its frames with the
// source's Peer.
//
// Faults: Config.Faults (transport/fault) are applied to received frames
// in Poll, on the endpoint's goroutine, so a seed replays the same
// decisions for the same sequence of received frames.
//
// Buffers and concurrency: as package transport says. Publish, SendTo and
// Send copy the frame; Publish copies it once for all connections (into
// the server's batch, which Flush writes to each idle socket directly and
// copies only for connections whose writer is busy); a frame passed to a
// Handler is a view into a read buffer, valid only during the call. An endpoint is used by one goroutine at a
// time; Close, Counters, Drops, Clients, Reconnects and Connected may be
// called from any goroutine. Steady-state sending and receiving allocate
// nothing: buffers are allocated once per connection and grow only to the
// largest burst or frame seen.
package tcp
