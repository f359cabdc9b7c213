// Package adminnode is the admin node (`seqd admin-node`): one place for
// an operator to see and drive a whole deployment. It finds the
// deployment's processes by gossip (a Directory: *tiered.Agent), reads
// the sequencer members' admin endpoints (their Meta.AdminAddr) and the
// replayers' announced ranges, and serves
//
//   - the status page (ops/page) for the whole deployment, under /ui/,
//     with a table of every process gossip shows;
//   - GET /v1/deployment: the page's Status as JSON;
//   - a console: one command per line (help, list, status, members,
//     replayers, pairs, elections, transfer-primary [ID]), over TCP
//     (telnet, nc; each answer ends with "ok" or "error: ...") and over
//     HTTP (POST /v1/command with the line as the body).
//
// Main types: Deployment (what gossip shows, as a page.Source),
// Console (the command grammar over a Deployment, Exec), Server (the
// listeners).
//
// # Concurrency
//
// Deployment and Console are safe for concurrent use (they read the
// Directory and the members' endpoints; nothing is cached outside the
// page Handler). Server runs the HTTP server's goroutines and one per
// console session (at most MaxConsoleSessions, each ended after
// ConsoleIdle of silence); Serve returns once every one has ended. A
// mutating command (transfer-primary) is logged with who asked.
package adminnode
