// Package ops is how people operate a seqd deployment: one admin surface
// for every process (docs/ops.md).
//
//   - Surface (surface.go): a process's command Table, status, health and
//     Prometheus registry, served over HTTP (Handler: /v1/status,
//     /v1/commands, /v1/cmd, /metrics, /healthz, /readyz) and over a line
//     console (ServeConsole); Serve listens on both. Auth: loopback
//     always, others with the token only (constant-time compare); every
//     mutating command is logged with who asked.
//   - the command language (command.go): ParseLine, Table (help, list,
//     node NAME ..., and each role's commands), NodeControl for the nodes
//     a process hosts (with a program's node.AdminActions).
//   - the roles' surfaces: MemberSurface (a cluster member: members,
//     transfer-primary, add-member, remove-member; readiness asks the
//     primary what it published), SequencerSurface, ReplayerSurface,
//     NodeSurface (roles.go).
//   - status (status.go): ProcessStatus, one snake_case JSON schema with
//     a section per kind; StatusProvider is what a status page reads.
//   - metrics (metrics*.go): SnapCollector takes one snapshot of a role's
//     Stats per scrape and reports Fields of it, so a scrape adds nothing
//     to a hot path; NewMemberCollector, NewSequencerCollector,
//     NewNodeCollector, NewReplayerCollector, NewTransportCollector.
//   - the client (admin_client.go): Client (a token, errors in words:
//     ErrUnreachable instead of Go's `Get "http://..."`), for `seqd
//     admin`, drills and tests.
//
// The CLI option machinery (TOML, environment, flags) is ops/options;
// the tail's printer ops/tail.
//
// ops sits inside the roles it operates, never above them: it defines
// small interfaces (Member: the calls a member's surface makes) and the
// types they exchange, and a role implements them (cluster.Member does
// Member), so ops imports neither cluster nor hashicorp/raft; it reads
// sequencer, node and replayer Stats types. cmd/seqd wires them. Members
// talk to each other on their peer port, never through the admin port.
//
// Errors are sentinels (errors.go): the HTTP surface answers each with
// its own status and the Client turns the status back into the sentinel,
// so errors.Is works across the wire.
//
// # Concurrency
//
// A Surface runs commands on the HTTP server's and the console's
// goroutines, one per request or connection, so a Member's methods, a
// StatusProvider, a Health and a collector's snapshot function must be
// safe from any goroutine. A Table may gain commands while it serves.
// The Client is safe for concurrent use; each call is bounded by its ctx.
package ops
