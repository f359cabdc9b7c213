// Package logging makes a seqd process's one logger and routes the
// libraries' loggers through it.
//
// New builds the process's *slog.Logger from a format (text or json) and
// a level (debug, info, warn, error). Libraries that log on their own
// come in through adapters: StdLog turns a *log.Logger whose lines carry
// "[DEBUG]"/"[INFO]"/"[WARN]"/"[ERR]" prefixes (hashicorp/memberlist's)
// into records at those levels; package cluster adapts hashicorp/raft's
// hclog the same way (cluster/raftlog.go). Both pass through Limiter,
// which lets one record per key through per interval and reports how many
// it suppressed on the next one, so a dead peer costs a line every ten
// seconds instead of seven a second.
//
// Main types: Limiter (a rate limit keyed by the caller), Options.
//
// Concurrency: a Logger, a Limiter and the *log.Logger of StdLog are safe
// for concurrent use; the Limiter's table is bounded (MaxKeys) and
// forgets keys by age.
package logging
