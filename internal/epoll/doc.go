// Package epoll is the epoll set that package tcp's and package
// multicast's endpoints wait in: the endpoint's sockets and an eventfd, so
// that one goroutine waits, without spinning, until any socket is readable
// or another goroutine wakes it.
//
// Why not Go's netpoller: it cannot wait on many sockets from one
// goroutine, and a goroutine per socket hands every frame over (a wake of
// the reader by the runtime, then of the polling goroutine, and a copy),
// which cost most of a round trip. epoll_wait parks only the polling
// goroutine's thread, and only when nothing is ready; the endpoint then
// reads the ready sockets itself.
//
// Concurrency: Wait runs on one goroutine at a time (the endpoint's poll
// lock); Wake, ForceWake, Add and Del are safe from any goroutine; Close
// is called with no Wait in progress (the caller holds its poll lock
// after a ForceWake), and is safe more than once. Main type: Set.
package epoll
