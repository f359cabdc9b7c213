// Package sim is seqd's deterministic simulator: a sequencer core and
// several node cores on one goroutine, a virtual clock, and a mem network
// with seeded loss, duplication, reordering, delay and partitions.
//
// A checker runs after every step and asserts the guarantees of DESIGN.md:
// each node's delivered stream is a prefix of the sequencer's stream, with
// no gap; each command is delivered exactly once even when resent; the
// sequencer's clock never goes back; a read-only node sends no command.
// At the end every command has been acknowledged and every node has
// delivered the whole stream (liveness).
//
// Everything random comes from the seed, so a failure replays exactly with
// the command that Result.Replay prints.
package sim
