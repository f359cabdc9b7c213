// Package multicast is seqd's UDP multicast transport: a transport.Server
// for the sequencer and a transport.Client for nodes, over IPv4 multicast
// on one interface. It is the only package that imports golang.org/x/net/ipv4.
//
// # Sockets
//
// The server sends the event stream to StreamGroup (default
// 239.77.0.1:9100) from a socket on an ephemeral port, which also carries
// its unicast replies (SendTo). It joins CommandGroup (default
// 239.77.0.2:9101) and reads commands and NAKs there, so after a failover
// whichever sequencer is primary hears them with no reconfiguration. It
// maps each sender's address to a transport.Peer in a bounded table
// (Config.MaxPeers, default 4096) that forgets the sender heard from least
// recently when a new one needs room; a Peer carries its slot's
// generation, so the Peer of a forgotten sender is never taken for the
// next (SendTo drops and counts it). Lookups allocate nothing; a new
// sender costs one allocation.
//
// A client joins StreamGroup, and sends to CommandGroup from its own
// ephemeral-port socket, on which it also receives the server's unicast
// replies (from SequencerPeer; stream frames come from transport.NoPeer).
// It is a transport.Sourcer: AddSource names a unicast repair source (a
// replayer), SendTo sends it datagrams from that same socket, and its
// answers come to the handler with the source's Peer.
// Group sockets set SO_REUSEADDR (many members per host share the port)
// and IP_MULTICAST_ALL=0 (hear only the groups they joined, so sessions
// on one host need only distinct groups). One frame is one datagram.
//
// # Batched I/O, buffers and threads
//
// Sends are queued by copying into an arena allocated once (or, for
// Server.PublishRetained, as references to the caller's bytes, at most
// MaxRetainedBytes of them) and handed to the kernel with sendmmsg, called directly on preallocated headers, on
// Flush, when a batch of BatchSize fills, or when Poll starts. Reads use
// recvmmsg directly (not ipv4.PacketConn.ReadBatch, which allocates a
// source address per datagram) into BatchSize slots allocated once per
// socket, at most 512 KiB of slots per call so that what one call copies
// is still cached when it is decoded; the handler's frame is a view of a slot, valid only during the
// call. Nothing is allocated per datagram.
//
// # Segmentation offload (GSO, GRO)
//
// With Config.GSO (default on), a flush sends each run of queued frames
// to the same group whose sizes are equal, but for a shorter last one, as
// one message of up to 64 segments and 65000 bytes with a UDP_SEGMENT
// control message; the kernel, or the NIC, cuts it into exactly the
// datagrams the plain path sends, so the wire and the receivers see no
// difference, but the sender pays one trip down the stack per run. The
// sequencer's stream is such a run whenever it fills packets to the MTU.
// Unicast replies go one per datagram (their route, and its MTU, is not
// Interface's), as do frames longer than Interface's MTU allows. If the
// kernel or device refuses a GSO message (EIO: the device cannot checksum
// it; EINVAL), GSO is turned off for that socket and the frames are sent
// again one per datagram: nothing is lost; SocketInfo says so.
//
// With Config.GRO (default on), receive sockets set UDP_GRO: the kernel
// may hand over several datagrams of one sender in one slot (from a GSO
// sender on this host, or merged by the NIC's GRO) with their segment size
// in a control message; the receiver splits the slot back into datagrams,
// each handed to the handler (and the fault injector) on its own. Slots
// are then 64 KiB each whatever MaxDatagramBytes, which still bounds the
// datagrams accepted. A kernel without UDP_GRO (before Linux 5.0) is
// reported by SocketInfo and read one datagram per slot. On loopback, GSO
// and GRO together take a 1472-byte stream from about 300k to about 800k
// datagrams a second per receiver.
//
// No goroutine is started. Poll reads every receive socket without
// blocking; when all are empty and wait > 0 it parks in epoll_wait on an
// epoll set holding the receive sockets and an eventfd, so a client
// waits on its two sockets at once without spinning a core, and Close
// (from any goroutine) signals the eventfd to unblock it; so does Wake,
// and wakes coalesce (at most one eventfd write outstanding). When the
// last read did not fill a batch, Poll asks epoll first, which says which
// socket is readable: an idle endpoint makes one system call per wait. A
// timed wait is rounded up to whole milliseconds. An endpoint is used by
// one goroutine at a time; Close, Wake and Counters may be called from any
// goroutine.
//
// Fault injection (Config.Faults, from SEQD_FAULTS) passes every received
// datagram through a seeded fault.Injector, one per socket (stream ids
// derived from Config.FaultStream); a datagram held back for reordering is
// released when its socket is next found empty. Counters().Dropped counts
// injected losses, oversized datagrams and replies to unknown peers.
//
// # Failure policy
//
// A datagram the kernel refuses to send (EINVAL for a reply to a sender
// with source port 0, EPERM from a firewall, ENETUNREACH or EHOSTUNREACH
// after a route change, ENODEV or EADDRNOTAVAIL during an interface flap,
// ENOBUFS) is loss, like a datagram dropped on the wire: it is counted in
// Counters().Refused, logged at most once per transport.DefaultLogInterval
// with the count and the last error (Config.Logger), and the other
// datagrams still go. Publish, SendTo, Send and Flush fail only with
// transport.ErrClosed (or on a bad argument, such as a frame too large),
// so a long-running sequencer or node is never stopped by the network.
//
// # Host configuration
//
//   - Socket buffers: the kernel caps SO_RCVBUF/SO_SNDBUF at
//     net.core.rmem_max/wmem_max unless the process may use SO_RCVBUFFORCE
//     (root or CAP_NET_ADMIN), which is tried first. Granted and SocketInfo
//     report what was granted; raise the caps with
//     sysctl -w net.core.rmem_max=16777216 net.core.wmem_max=16777216.
//   - Interface: the groups are joined and sent on Config.Interface (the
//     sockets set IP_MULTICAST_IF), so no multicast route is needed; tools
//     that rely on routing want ip route add 224.0.0.0/4 dev <if>. On one
//     host, "lo" works with Loopback on (IP_MULTICAST_LOOP), with or without
//     ip link set lo multicast on.
//   - TTL 1 keeps the stream on the local subnet; routed multicast needs a
//     larger TTL and IGMP/PIM-capable switches and routers.
package multicast
