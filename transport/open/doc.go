// Package open composes a transport from a plain Config: it chooses the
// kind by name ("udp" multicast, "tcp", or "hybrid", both at once, for a
// server), opens the server or the client end, and says what it got.
// It is what the seqd command, the drills and the examples call instead of
// each choosing among multicast, tcp and hybrid themselves.
//
// It is a package of its own, not a function in package transport,
// because every transport it chooses among (multicast, transport/tcp,
// transport/hybrid) imports transport: transport.Open would be an import
// cycle. It sits one level out, above all of them and below their users.
//
// Main entry points: Config (with Validate), Server, Client and
// PacketBytes (the largest datagram the configured path carries).
//
// Concurrency: the functions keep no state; the endpoints they return
// follow package transport's contract.
package open
