// Package transporttest is the conformance suite every seqd transport (mem,
// tcp, shm, multicast) must pass. A transport's tests call Run with a
// Factory that builds one connected server and its clients:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T, n int) (transport.Server, []transport.Client, func()) {
//			...
//		})
//	}
//
// The suite checks the contract in package transport: every client gets
// every published frame once and in order, SendTo reaches one client only,
// frames of the advertised maximum size cross intact, a handler's frame is
// not reused while the handler runs, idle Polls return (0, nil), Close
// makes every later call fail with transport.ErrClosed and unblocks a Poll
// waiting in another goroutine, and Flush is allowed at any point.
//
// The suite assumes a lossless path (no fault injection): loopback sockets
// are fine. It sends in bursts and lets receivers drain between them, so a
// datagram transport with ordinary socket buffers keeps up. Waits are only
// upper bounds for liveness (a stuck transport fails instead of hanging);
// no check depends on how fast anything is.
package transporttest
