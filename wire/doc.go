// Package wire defines every byte that seqd puts on a network: the frames of
// the event stream (data packets and heartbeats), commands from nodes to the
// sequencer, retransmit requests (NAKs) and their refusals, receivers' position
// reports (status), and the payloads of internal, sequencer-generated
// messages.
//
// All integers are little-endian at fixed offsets. Encoders write into
// buffers the caller owns; decoders fill caller-owned structs whose byte
// slices are views into the frame (zero copies, zero allocations). A decoder
// validates the whole frame before returning nil, so iterating the records
// of a decoded frame cannot fail and cannot read out of bounds. Malformed
// input returns one of the sentinel errors in errors.go; it never panics.
//
// Versions and extension. This is version 2. Every frame starts with the
// same 8-byte prefix:
//
//	0 magic   u16  0x5153 ("SQ")
//	2 version u8   2: a frame of another version is refused (ErrVersion)
//	3 kind    u8   Kind
//	4 hdrLen  u16  header bytes, prefix included; the body starts here
//	6 flags   u16  per kind; unknown bits are refused (ErrFlags)
//
// A later minor change adds header fields after the fixed layout below and
// raises hdrLen: a reader of this version skips the bytes it does not know
// and still finds the body. hdrLen below the fixed size or past the frame
// is refused (ErrHeader). Reserved bytes must be zero. A change an older
// reader would misread (a meaning changed, a field moved) takes a new
// version, so old readers refuse it loudly instead of misreading it.
// Internal payloads may likewise grow past InternalBytes.
//
// Stream packet (KindData, KindHeartbeat), PacketHeaderBytes = 56; flags:
// PacketRetransmit.
//
//	 8 session    u64
//	16 epoch      u32
//	20 count      u16  number of records
//	22 reserved   u16
//	24 firstSeq   u64  seq of the first record; a heartbeat carries the next
//	                   seq to be assigned, so the tail is firstSeq-1
//	32 stable     u64  highest seq held by a quorum of the sequencer group
//	40 baseTime   i64  sequencer time (ns) the record time deltas count from
//	48 epochStart u64  first seq of epoch (the previous epoch's cut + 1):
//	                   a receiver that missed the EpochStart record still
//	                   learns where the epoch begins, and that records
//	                   below it belong to earlier epochs whatever header
//	                   carries them
//
// Stream record, RecordHeaderBytes = 24 (+8 with FlagFragment). Records in a
// packet carry consecutive sequence numbers from firstSeq; all fragments of
// a message share its sequence number.
//
//	 0 len       u16  payload bytes in this record
//	 2 flags     u8   FlagInternal, FlagFragment, FlagSeqGen
//	 3 instance  u8
//	 4 timeDelta u32  ns after baseTime
//	 8 account   u64
//	16 cmdSeq    u64
//	[24 total u32, 28 offset u32]  only with FlagFragment
//
// Command packet (node -> sequencer), CommandHeaderBytes = 40; flags 0:
//
//	 8 account     u64
//	16 incarnation u64  a restarted node picks a larger one; resets dedupe
//	24 session     u64  0 = any
//	32 count       u16
//	34 instance    u8
//	35 reserved    u8, 36 reserved u32
//
// Command record, CommandRecordBytes = 12 (+8 with CmdFragment):
//
//	 0 cmdSeq u64
//	 8 len    u16
//	10 flags  u8  CmdFragment, CmdTimer
//	11 reserved u8
//	[12 total u32, 16 offset u32]  only with CmdFragment
//
// NAK (NakBytes = 48): session u64 @8, epoch u32 @16, fromOffset u32 @20
// (fragment bytes of fromSeq already held), fromSeq u64 @24, toSeq u64 @32
// (inclusive), toOffset u32 @40 (0, or the end of the hole in fromSeq when
// only [fromOffset, toOffset) of fromSeq is asked for; then toSeq ==
// fromSeq), reserved u32 @44.
//
// Gone (GoneBytes = 48), the answer to a NAK that cannot be repaired:
// session u64 @8, epoch u32 @16, reserved u32 @20, fromSeq u64 @24 and
// toSeq u64 @32 (the range asked, echoed), oldest u64 @40 (oldest seq
// still retained; 0 = none).
//
// Status (StatusBytes = 56), receiver -> sequencer, periodic: session u64
// @8, epoch u32 @16, flags u16 @20 (StatusReadOnly, StatusReplayer, StatusStandby),
// instance u8 @22, reserved u8 @23, account u64 @24, incarnation u64 @32,
// contiguous u64 @40 (every seq up to it held whole), delivered u64 @48.
// A standby sequencer's ack (flag StatusStandby; StatusStandbyBytes = 64)
// adds member u64 @56, its cluster member id (never 0), inside the header
// length; without the flag, header bytes past 56 are skipped.
//
// Internal payload (InternalBytes = 40, in a record with FlagInternal):
// type u8 @0, instance u8 @1, reserved u16 @2, epoch u32 @4, account u64
// @8, id u64 @16, value u64 @24, extra i64 @32. InternalRejected names the
// refused command (account, instance, id = cmdSeq, extra = incarnation) and
// the reason (value, a RejectReason). InternalSenderForgotten names the
// sender a full sender table forgot (account, instance, id = its last
// cmdSeq, extra = its incarnation). InternalStaleIncarnation names a
// sender whose frames were dropped as stale (account, instance, value =
// the incarnation on record, extra = the frames').
package wire
