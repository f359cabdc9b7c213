// Package bridge carries one site's sequenced stream to another site, and
// the far site's commands back, over redundant channels (DESIGN.md,
// "Bridges"). It is empty yet: the bridges issue fills it. It will own:
//
//   - a link: a pair of ends, one per site (`seqd bridge`). The sending
//     end follows its site's stream as a replayer does, from a store of
//     its own so that it can resend, and sends it over every configured
//     channel at once: one or more TCP connections and UDP unicast flows.
//   - A/B arbitration: the receiving end merges the channels by seq, the
//     first arrival wins and duplicates are dropped; a seq lost on every
//     channel is asked again from the sending end's store (a NAK over
//     TCP), never skipped.
//   - republishing: the receiving end publishes the stream on its site's
//     multicast group (or TCP fan-out) with the origin's session, epochs,
//     seqs, timestamps and stable unchanged, persists it, and answers its
//     nodes' NAKs and rewinds as a replayer, so a far-site node, replayer
//     or archive cannot tell the stream from the origin's.
//   - full duplex: far-site commands go back to the origin's command
//     group, exactly once across the link (the node's resend and the
//     sequencer's dedupe, as on one site).
//   - failover: the ends follow the origin's epoch changes as a receiver
//     does (nothing of a cut epoch republished as stable), and a standby
//     end, found by gossip, takes over from the last seq the far site
//     holds.
//   - loops: each bridged stream carries its origin's identity, and a
//     bridge never carries a stream back toward its origin.
//   - channel faults (seeded loss, delay, jitter, reordering, partitions)
//     in the transport layer, a WAN timing profile, and per-channel
//     metrics (through package ops).
//
// Like the other roles it will be pure cores (arbitration, repair) under
// thin shells that own the sockets and the clock, sharing the
// follow-and-persist core of the replayer and the standby; its frames are
// defined in package wire.
package bridge
