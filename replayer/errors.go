package replayer

import "errors"

// Sentinel errors. Append returns them bare (it is a hot path); Open and
// the recovery report wrap them with the file and offset.
var (
	// ErrConfig: a Config field is out of range (the message names it).
	ErrConfig = errors.New("replayer: invalid config")
	// ErrNotData: Append got a heartbeat or an empty packet; the store
	// holds records only.
	ErrNotData = errors.New("replayer: not a data packet")
	// ErrTooLarge: the packet is larger than Config.MaxPacketBytes.
	ErrTooLarge = errors.New("replayer: packet larger than MaxPacketBytes")
	// ErrSession: the packet belongs to another session than the store's.
	ErrSession = errors.New("replayer: packet of another session")
	// ErrDuplicate: the packet's records are already held.
	ErrDuplicate = errors.New("replayer: packet already held")
	// ErrGap: the packet does not follow the newest packet held (a seq or
	// a fragment is missing in between); the store is gap-free, so the
	// caller appends the missing packets first.
	ErrGap = errors.New("replayer: packet does not follow the newest held")
	// ErrEpochStart: BeginEpoch named an epoch no newer than one held (at
	// another start), or a start below the newest epoch's or at or below
	// the oldest seq held: the epoch table only grows, and a store keeps
	// at least its oldest record.
	ErrEpochStart = errors.New("replayer: epoch start out of order")
	// ErrReadOnly: the store was opened with Config.ReadOnly.
	ErrReadOnly = errors.New("replayer: store is read-only")
	// ErrCorrupt: a segment holds bytes that fail their checksum or do not
	// decode; nothing at or past them is served, and the store takes no
	// appends (see Corruption).
	ErrCorrupt = errors.New("replayer: corrupt segment")
	// ErrFailed: a write or fsync failed earlier; the file's state is
	// unknown, so the store takes no more appends.
	ErrFailed = errors.New("replayer: store failed")
	// ErrGone: a Reader (or a rewind) asked for seqs below the oldest the
	// store holds.
	ErrGone = errors.New("replayer: seqs no longer held")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("replayer: store closed")

	// ErrPendingFull: a Reorder would hold back more than its bound of
	// frames waiting for a hole before them to be repaired (the replayer
	// service's bound is ServiceConfig.MaxPendingBytes).
	ErrPendingFull = errors.New("replayer: too many frames held back for a hole")
	// ErrHole: a frame the receiver delivered cannot follow what the store
	// holds, and what is missing will not come again.
	ErrHole = errors.New("replayer: hole in the persisted stream")
	// ErrServiceClosed: the service stopped before a Do ran.
	ErrServiceClosed = errors.New("replayer: service stopped")
	// ErrRangeStalled: a RangeSource that does not follow the tip
	// (RangeSendConfig.TipPoll 0) had nothing to send and did not end.
	ErrRangeStalled = errors.New("replayer: range source returned nothing and did not end")
)
