// Package ops is how people operate a seqd deployment. It owns:
//
//   - admin: the HTTP REST endpoint of a sequencer member (AdminHandler:
//     status, transfer of the primary role, members added and removed
//     live) and its client (FetchStatus, FetchAll, RequestTransfer,
//     RequestAddMember, RequestRemoveMember), which `seqd admin`, the
//     drills and the tests use; next, a telnet command language over the
//     same operations;
//   - Prometheus metrics of every role;
//   - health: liveness and readiness of each process;
//   - the console: a live view of the cluster for an operator.
//
// Only admin is here yet; the operations issue fills the rest. The CLI
// option machinery (TOML, environment, flags) is ops/options.
//
// ops sits inside the roles it operates, never above them: it defines
// small interfaces (Member: the calls the admin endpoint makes) and the
// types they exchange, and a role implements them (cluster.Member does
// Member), so ops imports neither cluster nor hashicorp/raft; cmd/seqd
// wires the two. The admin endpoint is for people and their tools:
// members talk to each other on their peer port, not through it.
//
// Errors of the admin API are sentinels (errors.go): the endpoint answers
// each with its own HTTP status and the client turns the status back into
// the sentinel, so errors.Is works across the wire.
//
// # Concurrency
//
// AdminHandler calls its Member from the HTTP server's goroutines, one per
// request, so a Member's methods must be safe from any goroutine. The
// client functions are safe for concurrent use; each is bounded by its ctx.
package ops
