// Package bridge carries one site's sequenced stream to another site, and
// the far site's commands back, over redundant channels (DESIGN.md,
// "Bridges"; the protocol in docs/bridge.md). A link is a pair of
// processes (`seqd bridge --role send|receive`), one per site.
//
// # Main types
//
//   - SendEnd: follows its site's stream as a replayer does, with a
//     replayer.Service into a replayer.Store of its own (no other store),
//     so it can resend anything. Every TCP channel is a rewind with
//     follow served from that store by a replayer.RewindServer: the far
//     end asks "everything from seq N" and, after a cut, asks again from
//     the seq after what it holds (the NAK over TCP); nothing is skipped.
//     Every UDP channel is a flow of datagrams to a far address, one
//     stored packet each, read from the store by a replayer.Reader at the
//     tip, plus a hello (the origin's identity) when idle. Commands that
//     come back on a UDP channel are injected into the site's command
//     group through the follow client.
//   - ReceiveEnd: reads every channel on a goroutine of its own (TCP: a
//     tiered.Upstream; UDP: a socket), merges them with Merge, and hands
//     the merged stream, in order and gap-free, to a replayer.Service
//     (ServiceConfig.Upstream: records stored as they come) that persists
//     it and answers the site's NAKs from its store; each packet, once
//     persisted, is republished byte for byte on the site's stream group
//     (or TCP fan-out), with a heartbeat carrying the origin's stable.
//     The site's commands (heard on its command group) go back over
//     every UDP channel, or, with none heard lately, over each TCP
//     channel's control connection (which also carries the hellos); a
//     rewind server serves the store.
//   - Merge: the pure A/B arbitration core. Offer(channel, packet, now)
//     says whether the packet is the first arrival of its stream place
//     (deliver it, or hold it until the hole before it fills), a
//     duplicate (drop it) or malformed; Next hands out held packets in
//     order. Per-channel Stats: bytes, packets, first arrivals, lag in
//     seqs and in µs behind the first arrival, repairs.
//   - Config (DefaultConfig, WANConfig, Validate): role, channels, site
//     groups, store directory, site identity.
//   - Redundancy: a receiving end may follow several sending ends (a
//     TCP channel to each, their UDP flows to one address), and several
//     receiving ends may publish on one site; a SIGKILL of either end
//     then costs nothing (docs/bridge.md).
//   - Cross: a cross-connect node reading several independent streams
//     (several sequencer groups, each its own session and groups) and
//     sending to each; one StreamHandler told which stream each message
//     is of. Each stream keeps its order; there is none between streams.
//
// # Identity and loops
//
// The stream keeps the origin's session, epochs, seqs, timestamps and
// stable. Each hello (on the UDP flows and the TCP channels' control
// connections) names the origin site (Config.Origin, by default the
// sending end's Site) and the session; a receiving end whose Site is the
// origin refuses the stream (ErrLoop), so a ring of sites delivers each
// message once per site.
//
// # Concurrency
//
// Merge is pure and used by one goroutine. A SendEnd and a ReceiveEnd
// run their Service's goroutine (which owns the store, the site's
// transports and the merge) plus one goroutine per channel; channel
// goroutines hand packets to the Service goroutine in pooled chunks, so
// forwarding allocates nothing per packet. Run blocks until ctx ends or
// a fatal error; Stats is safe from any goroutine.
package bridge
