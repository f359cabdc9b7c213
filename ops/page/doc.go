// Package page is seqd's live status page: one HTML file, embedded
// (go:embed), with its CSS and script inline, so it works offline and
// behind any proxy. Every cluster member serves it on its admin endpoint
// under /ui/, and `seqd admin-node` serves it for a whole deployment.
//
// It shows the sequencer group's members and roles, the epoch, primary,
// stable and published seqs and their rate, the lag of each receiver
// (standbys, replayers), the replayers gossip shows and their ranges,
// hot-hot pairs (none until the node library reports them), and the
// recent elections with their durations. The browser keeps a
// server-sent event stream open (GET /events) and gets one Status per
// refresh; GET /status.json is the same value for scripts.
//
// Main types: Source (what gathers a Status: Cluster reads the members'
// admin endpoints through ops's client), History (a pure core that
// turns successive gatherings into rates, lag in seconds and a list of
// elections, since each member reports only the last it led) and
// Handler (the http.Handler).
//
// # Concurrency
//
// Handler is safe for concurrent use. One mutex guards the History and
// the last Status, and is held across a gathering (bounded by
// GatherTimeout), so viewers share one gathering per half refresh. A
// Source's functions are called from the HTTP server's goroutines.
// Nothing here runs a goroutine of its own: an event stream ends when
// its request's context does (the viewer left, or the server closed).
package page
