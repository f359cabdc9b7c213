package tiered

import "errors"

// Sentinel errors; callers test them with errors.Is.
var (
	// ErrConfig: a Config field is out of range (the message names it).
	ErrConfig = errors.New("tiered: invalid config")
	// ErrMeta: gossip meta bytes that do not decode (truncated, a field
	// out of range, an unknown role); the member is listed but never
	// selected.
	ErrMeta = errors.New("tiered: bad member meta")
	// ErrMetaVersion: meta of version 0 (never written); versions above
	// MetaVersion are read as far as this version knows them.
	ErrMetaVersion = errors.New("tiered: unknown member meta version")
	// ErrMetaTooLarge: a Meta whose encoding passes the gossip limit
	// (MaxMetaBytes), or a field past its own limit.
	ErrMetaTooLarge = errors.New("tiered: member meta too large")
	// ErrNoSeeds: seeds were given and none could be joined.
	ErrNoSeeds = errors.New("tiered: no gossip seed reachable")
	// ErrUpstream: a tier-2 replayer's Upstream found no replayer to
	// follow from its next seq for FailoverWait.
	ErrUpstream = errors.New("tiered: no upstream replayer")
	// ErrClosed: the Agent was closed.
	ErrClosed = errors.New("tiered: agent closed")
)
