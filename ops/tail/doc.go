// Package tail prints a seqd stream for people and tools: the live
// stream through a read-only node (Tailer, the handler of `seqd tail`),
// a session archive or a remote replayer's history (ReplayArchive,
// ReplayRemote: `seqd replay`), and an archive still being written
// (Follow: `seqd tail --archive DIR --follow`). Every message is one line
// (AppendMessage), text or JSON with stable keys, so that two tails can be
// compared with standard tools.
//
// Main types: Tailer, Printer (a replay's handler), Replay (what to
// replay and how to report it).
//
// Concurrency: a Tailer runs on its node's goroutine (its flush timer is
// the node's local timer); a Printer on its replay's. Nothing here starts
// a goroutine of its own.
package tail
