// Package bench is `seqd bench`: end-to-end throughput, round trip,
// rewind and idle measurements of seqd, and the baselines they are read
// against (plain UDP between two processes on loopback, no seqd protocol).
//
// Run takes a Config (the command's flags, field by field) and prints one
// result line per run, `bench transport=... mode=... key=value...`, on
// Config.Out; scripts/bench-table.sh and the README parse those lines, so
// their fields are an interface. Modes:
//
//   - tput over mem: the sequencer, the senders and a receiving node on
//     one goroutine (the protocol's own cost, no system calls);
//   - tput, rtt, rewind and idle over udp or tcp: the sequencer (or a Raft
//     group of three, Sequencers 3) and every node are separate seqd
//     processes started from Config.Exe, each verifying the stream;
//   - baseline: a `seqd bench-peer` child echoes or sinks UDP (RunPeer).
//
// Every child runs under test/proc, the supervisor the drills share: the
// first child that dies unasked ends the run at once with its exit status
// and last stderr lines.
//
// LoadNode is `seqd node`, the sender and receiver every process run
// starts: it sends Count commands (at a rate, or one round trip at a
// time), verifies the whole stream from seq 1 and prints what it
// measured.
//
// Files: bench.go (Config, Run), node.go (LoadNode), mem.go, processes.go (the real-socket
// runs), cluster.go, rewind.go, idle.go, baseline.go (and the peer),
// breakdown.go (the rtt hops) and histogram.go.
//
// The rtt breakdown's instruments live here too, used by `seqd node
// --stamps` (TraceClient, RTTStamps, WriteStamps) and `seqd sequencer
// --publish-times` (NewTracedServer); Summarize gives every mode's
// percentiles. The payload a bench sender writes and checks when its
// command comes back is test/check's (FillPayload, PayloadOK), and so is
// the mem bench receiver's stream check.
//
// Concurrency: Run blocks until its bench ends; it starts goroutines
// that read its children's output and ends them before it returns. The
// traced transports are used by one goroutine, the one that drives the
// transport they wrap.
package bench
