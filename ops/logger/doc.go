// Package logger is the logger node (`seqd logger`): it follows the
// stream as a read-only node (as `seqd tail` does, from the live tail or
// from a seq through a rewind) and writes it as human-readable log
// files, rotated by size and by day, as text lines or JSON Lines.
//
// Files are PREFIX-YYYY-MM-DD.NNN.log (or .jsonl) in one directory: the
// day is that of the sequencer's time of the messages (not the logger's
// clock), so a replay of a session cuts its files where the live logger
// did; N counts the files of a day rotated by size. A restarted logger
// appends to the newest file of the day. Keep bounds the files kept.
//
// Main types: Config, Logger (the node.Handler), AppendLine (one
// message as one line).
//
// # Concurrency
//
// A Logger runs on its node's goroutine: OnMessage and its flush timer
// (a node local timer) are the only callers of its files. Failed may
// be read from any goroutine; Err, Lines and Close after the node
// stopped. Nothing here starts a goroutine.
package logger
