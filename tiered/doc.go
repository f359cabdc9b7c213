// Package tiered finds replayers through gossip (DESIGN.md, "Discovery"):
// every replayer, sequencer and node announces itself with
// hashicorp/memberlist, and a node or tail picks the replayer to ask with
// no address configured.
//
// # Main types
//
//   - Meta is what a member announces: name, role (replayer, sequencer,
//     node), NAK and rewind addresses, tier, session, the lowest and
//     highest seq held, and a load figure. AppendMeta and DecodeMeta are
//     its versioned compact encoding (meta.go documents the bytes); the
//     decoder takes untrusted bytes and is fuzzed.
//   - Select is the pure choice among candidates: a replayer that holds
//     the seq wanted (and announces the address needed; Follow: or is
//     just below it, for one who follows the tip; MaxTier; not the Avoid
//     address that just failed, unless it is the only one), then the
//     lowest tier (the highest with HighTierFirst: late joiners' rewinds
//     go to tier 2 so that they leave tier 1 alone), then the least
//     loaded, then the one holding the most, then the smallest name, so
//     members that see the same cluster agree. Agent.RewindSource wraps
//     it for a rewind that resumes after its replayer failed.
//   - Upstream is how a tier-2 replayer follows a tier-1 one: a
//     transport.Client over a rewind with follow (handed to a
//     replayer.Service with ServiceConfig.Upstream), resuming on another
//     tier-1 replayer (its Source, or the next address) after the last
//     whole record read when one dies (docs/protocol.md, "Tier-2
//     replayers"). One goroutine reads the connection into chunks; Poll
//     allocates nothing per packet.
//   - Agent is the thin shell around memberlist: it binds on loopback by
//     default (gossip reaches beyond the host only when told to), joins
//     seeds from its Config or SEQD_GOSSIP_SEEDS (as consul's and serf's
//     retry-join do: it starts anyway and retries in the background),
//     refreshes its Meta every MetaInterval from a MetaFunc (a replayer's
//     highest seq and load move) and gossips it when it changed, and lists
//     the live members from memberlist's events. Close leaves gracefully;
//     a member that dies is dropped by memberlist's failure detector
//     within a few probe intervals.
//
// # Concurrency
//
// Meta, Select and the codec are pure. An Agent's methods are safe from
// any goroutine; it runs one goroutine of its own (the Meta refresh and
// the rejoin) besides memberlist's. Lock order is written beside Agent.
//
// This package is where memberlist is imported (cluster may join the
// same gossip through an Agent).
package tiered
