// Package hybrid serves several transports from one sequencer at once, for
// example UDP multicast for the nodes of one site and TCP for nodes in a
// cloud: NewServer(servers...) is itself a transport.Server.
//
// Publish and Flush fan out to every inner server. Peers are namespaced:
// the top bits of a Peer hold the index of the inner server that produced
// it (as many bits as len(servers)-1 needs; none for one server), the rest
// hold the inner Peer, so SendTo routes a reply to the server its request
// came from. An inner Peer too large for the remaining bits is delivered
// as NoPeer (it cannot be answered) and counted in Unroutable.
//
// Poll first polls every inner server with wait 0, starting with a
// different one each call so that a busy server cannot starve the others.
// If none had a frame and the caller may wait, it waits on a channel that
// every inner server implementing Notifier signals when frames arrive (the
// tcp server does), then polls round again. An inner server without
// Notifier cannot wake it, so Poll then waits in slices of at most
// PollSlice and rounds again after each slice: a frame on such a server
// waits at most PollSlice while the hybrid is idle, never while it is busy.
//
// Concurrency: as package transport says; one goroutine uses the Server,
// Close may come from any goroutine. The inner servers belong to the
// hybrid: it closes them.
package hybrid
