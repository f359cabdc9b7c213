// Package multicast is seqd's UDP multicast transport: a transport.Server
// for the sequencer and a transport.Client for nodes, over IPv4 multicast
// on one interface. It is the only package that imports golang.org/x/net/ipv4.
//
// # Main types
//
//   - Server (NewServer): sends the event stream to Config.StreamGroup
//     (default 239.77.0.1:9100) from an ephemeral-port socket that also
//     carries its unicast replies (SendTo), and reads commands and NAKs on
//     Config.CommandGroup (default 239.77.0.2:9101), so whichever
//     sequencer is primary after a failover hears them with no
//     reconfiguration. Senders map to transport.Peers in a bounded table
//     (Config.MaxPeers) whose Peers carry a generation, so a forgotten
//     sender's Peer never reaches the next one.
//   - Client (NewClient): joins the stream group and sends to the command
//     group from its own socket, on which it also hears unicast replies;
//     a transport.Sourcer (AddSource names a replayer to ask for repairs).
//   - Config (DefaultConfig, Validate): groups, Interface, TTL, buffer
//     sizes, BatchSize, GSO and GRO, Faults.
//
// One frame is one datagram. Sends are batched into an arena allocated
// once and go out with sendmmsg (runs of equal-sized frames as one UDP GSO
// message); reads use recvmmsg into slots allocated once per socket (with
// GRO, split back into datagrams). Nothing is allocated per datagram.
//
// # Concurrency
//
// No goroutine is started. Poll reads every receive socket without
// blocking, then parks in epoll_wait on the sockets and an eventfd. An
// endpoint is used by one goroutine at a time; Close, Wake and Counters
// may be called from any goroutine (Close and Wake unblock a waiting
// Poll). A frame handed to the handler is a view of a receive slot, valid
// only during the call.
//
// # Failure policy
//
// A datagram the kernel refuses to send (EINVAL, EPERM, ENETUNREACH,
// ENODEV, ENOBUFS, ...) is loss: counted in Counters().Refused, logged
// rate-limited, and the other datagrams still go. Publish, SendTo, Send
// and Flush fail only with transport.ErrClosed (or on a bad argument), so
// the network never stops a long-running sequencer or node.
//
// Sockets, batched I/O and threads, GSO and GRO, fault injection, the
// failure policy and the host configuration (socket buffer caps, the
// interface, TTL): docs/multicast.md.
package multicast
