// Package agent is the one shape of every process loop in seqd and the
// one runner that drives it, after Aeron's Agent and AgentRunner: the
// loop's work is an Agent, and a Runner owns what every loop shares,
// idling, yielding and the clock.
//
// # Agent
//
// An Agent is a thin shell around a pure core (a sequencer.Core, a node
// core, a standby or replayer core). One iteration of its loop is, in
// this order:
//
//   - Poll(wait): wait at most wait for the first frame on the agent's
//     transport (a blocking wait on its readiness, never a sleep) and
//     hand every frame that came to the core;
//   - DoWork(now): the rest of the iteration at the clock reading now
//     (flush, tick, hand the core's output to the transport, flush the
//     transport); it returns the units of work it did beyond the frames
//     (0 when it only did what they asked for): a busy loop spins on
//     (Config.Spin) after frames or work;
//   - NextDue(): the monotonic time (the clock's, in ns) of the agent's
//     next timed work, or false when it has none: how long the next Poll
//     may block.
//
// Poll and DoWork return the error that ends the loop (a closed
// transport, a fatal core error, a lost leadership); nil keeps it going.
//
// # Runner
//
// The Runner calls Poll with a wait of at most NextDue - now (never
// longer than Config.MaxWait; 0 when work is due, or while
// Config.Spin says to keep polling after a frame or work:
// transport.Idle; the first Poll never blocks), reads
// the clock once (Config.Clock, after Poll: an agent that reads the same
// clock lazily in its frame handler, as the sequencer's does, gets one
// reading for the whole batch), calls DoWork with it, and passes through
// the Go scheduler every transport.YieldInterval of a busy stretch, never
// while idle (transport.Yield says why). An idle loop therefore blocks in
// its transport until a frame, a wake (transport.Waker) or its next timed
// work, and spends no CPU.
//
// Once runs one iteration (tests drive a loop with it); Run iterates
// until ctx ends or an iteration fails. An iteration allocates nothing.
//
// Loops on it: sequencer.Agent (a standalone sequencer), cluster's
// primary shell, node.Node.
//
// # Concurrency
//
// A Runner and its Agent belong to one goroutine, the loop's. What other
// goroutines read (counters, positions) the agent publishes itself;
// whatever must stop or redirect a blocked loop wakes its transport.
package agent
