// Package mem is an in-memory transport.Server and transport.Client pair for
// tests and the deterministic simulator. A Network joins one server and any
// number of clients; frames cross it through per-endpoint inboxes, with
// optional seeded loss, duplication and reordering (transport/fault, one
// Injector per link direction), seeded random delays measured in virtual
// time, bounded inboxes that drop on overflow like a UDP socket buffer, and
// partitions.
//
// Time: the network has a virtual clock set with SetNow. A frame sent at
// virtual time t with delay d is deliverable once the clock reaches t+d;
// with zero delays frames are deliverable at once. A simulator advances the
// clock to NextDelivery and polls with wait=0. Poll with wait > 0 blocks in
// real time until a frame becomes deliverable, the wait ends, or the
// endpoint is closed, so goroutine-based users work too.
//
// Determinism: every decision (faults, delays, delivery order) is drawn from
// per-link generators seeded by Config.Faults.Seed, and delivery is ordered
// by (deliverAt, global send order). The same seed and the same sequence of
// calls give the same deliveries. Calls made from several goroutines
// interleave in whatever order the scheduler picks, so only a
// single-goroutine driver replays exactly.
//
// Concurrency: one mutex guards the whole network (lock order: there is
// only Network.mu). Each endpoint is used by one goroutine at a time; Close,
// SetNow, Partition, NextDelivery and Pending may be called from any
// goroutine. Handlers run without the lock held, so a handler may send.
//
// Buffers: Publish, SendTo and Send copy the frame into a buffer from the
// network's free list; a published frame is copied once and shared by
// every client's inbox (handlers only read frames, as package transport
// requires). The buffer goes back to the list when the last handler that
// saw it returns. In steady state nothing is allocated per frame.
package mem
