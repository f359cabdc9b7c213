// Package inventory is the seeds' Arcturus inventory service (TIKI's hot
// deal: ten 1đ phones in ten minutes) built on seqd: a single-threaded
// processor in the LMAX style whose input is the sequencer's stream, its
// state in memory and flushed to a database in batches, recovering from
// the seq the database was flushed at.
//
// # Main types
//
//   - State: the pure processor. Keys map to int64 stock; a transaction
//     (a set of updates, AppendTxn) applies whole or not at all, in stream
//     order; a reservation that would oversell is refused the same way on
//     every instance, since the outcome depends on the stream alone. Its
//     Digest is a running hash over the transactions' seqs, outcomes and
//     the stock they left, comparable between instances (DigestAt,
//     Service.Checkpoints).
//   - Service: a node.Handler around a State. It sends a reply command
//     per transaction (Reply), hands batches to a Flusher and loads its
//     Store at start; Resume is the seq to rewind after.
//   - Flusher and Store: batches written asynchronously, each in one
//     database transaction with its seq and digest (SQLStore: SQLite via
//     modernc.org/sqlite, or PostgreSQL via pgx).
//   - Instance (StartInstance, Run): a Service on its node and its
//     Store, the node rewinding from the flushed seq + 1; a failing
//     database stops it. What a process of the service (cmd/inventory)
//     and a drill run.
//   - Front: an HTTP front (one request, one answer) that sends a
//     transaction to the sequencer and answers when the service's reply
//     for it is in the stream. RunBuyers storms fronts with buyers.
//
// # Concurrency
//
// The State and the Service's handler methods run on the node's Run
// goroutine only. The Flusher writes on a goroutine of its own; the
// handler never waits for it (TryHandOff hands a batch over only when one
// is free, and changes accumulate meanwhile). Status, Checkpoints and the
// Flusher's counters are safe from any goroutine. Front's methods are
// safe from any goroutine; its OnMessage runs on its node's goroutine.
//
// The hot deal is examples/inventory/hotdeal; a service process for
// drills, examples/inventory/cmd/inventory. See README.md here.
package inventory
