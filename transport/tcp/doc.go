// Package tcp carries seqd frames over TCP, for networks without multicast
// (clouds). A Server (the sequencer's end) accepts any number of Clients
// (nodes); Publish sends the event stream to all of them, SendTo to one,
// and each Client sends commands and NAKs back. It implements
// transport.Server and transport.Client.
//
// # Main types
//
//   - Server (NewServer): its connections are slots (at most Config.MaxConns)
//     whose Peer carries a generation, so the Peer of a closed connection
//     never reaches a newer one. A peer that does not read is cut off
//     (ErrSlowClient) past Config.SlowClientBytes with no progress for
//     SlowClientTimeout, or past MaxQueueBytes: a subscriber that never
//     reads costs a bounded amount.
//   - Client (Dial, Open): redials with jittered exponential backoff
//     until Close; given several addresses (a sequencer cluster's
//     members) it tries them in turn and so finds the new primary with no
//     configuration change. A transport.Sourcer: AddSource keeps one more
//     connection, to a replayer or a standby.
//   - Config (DefaultConfig, Validate); Drops counts what was cut, refused
//     or oversized.
//
// Each frame is preceded by its length (u32 little endian); a frame above
// Config.MaxFrameBytes ends the connection. Frames are batched per
// connection and written at Flush with one Write (TCP_NODELAY on). Frames
// flushed while a Client is disconnected are dropped and counted: the
// protocol resends commands and repairs the stream.
//
// # Concurrency
//
// Poll reads the sockets itself, on the endpoint's goroutine (an epoll set
// per endpoint; the sockets are out of Go's netpoller), and hands frames to
// the Handler straight from the read buffer: a frame is valid only during
// the call. Each connection has one writer goroutine (a stalled peer blocks
// only its own) and one that waits for its end. An endpoint is used by one
// goroutine at a time; Close, Counters, Drops, Clients, Reconnects and
// Connected may be called from any goroutine. A failed write ends that
// connection only; Publish, SendTo and Flush fail only after Close.
// Steady-state sending and receiving allocate nothing.
//
// Framing, batching, the read path and why, slow peers, failure policy,
// peers, reconnection, repair sources, faults and buffers in full:
// docs/tcp.md.
package tcp
