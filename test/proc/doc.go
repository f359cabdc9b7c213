// Package proc supervises the child processes of seqd's multi-process
// runs (the bench, the drills, the end-to-end tests): it starts a child
// under a name, collects its stdout lines and copies its stderr, each line
// prefixed, waits for a line with a deadline, and knows when a child died.
//
// The rule it enforces is STYLE.md's "a parent whose child dies fails at
// once with the child's error": the children of one Set share a death
// watch, so that whatever the parent waits for (a line, a sleep) ends as
// soon as any child exits unasked, with that child's exit status and its
// last stderr lines, instead of waiting for a line that will never come.
//
// Main types: Set (the children of one run and their death watch), Spec
// (how to start one child), Proc (a running child: its lines, WaitLine,
// Await, Send, Stop, Kill).
//
// Concurrency: every method may be called from any goroutine. A Proc's
// lines are collected by a goroutine of its own; Lines and Find return
// copies.
package proc
