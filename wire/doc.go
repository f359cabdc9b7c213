// Package wire defines every byte that seqd puts on a network: the frames of
// the event stream (data packets and heartbeats), commands from nodes to the
// sequencer, retransmit requests (NAKs) and their refusals, and the payloads
// of internal, sequencer-generated messages.
//
// All integers are little-endian at fixed offsets. Encoders write into
// buffers the caller owns; decoders fill caller-owned structs whose byte
// slices are views into the frame (zero copies, zero allocations). A decoder
// validates the whole frame before returning nil, so iterating the records
// of a decoded frame cannot fail and cannot read out of bounds. Malformed
// input returns one of the sentinel errors in errors.go; it never panics.
//
// Frame prefix (4 bytes), common to every frame:
//
//	0 magic   u16  0x5153 ("SQ")
//	2 version u8   1
//	3 kind    u8   Kind
//
// Stream packet (KindData, KindHeartbeat), PacketHeaderBytes = 44:
//
//	 4 epoch     u32
//	 8 session   u64
//	16 firstSeq  u64  seq of the first record; a heartbeat carries the next
//	                  seq to be assigned, so the tail is firstSeq-1
//	24 stable    u64  highest seq held by a quorum of the sequencer group
//	32 baseTime  i64  sequencer time (ns) the record time deltas count from
//	40 count     u16  number of records
//	42 flags     u16  PacketRetransmit
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
// Command packet (node -> sequencer), CommandHeaderBytes = 32:
//
//	 4 count       u16
//	 6 instance    u8
//	 7 flags       u8   reserved, 0
//	 8 account     u64
//	16 incarnation u64  a restarted node picks a larger one; resets dedupe
//	24 session     u64  0 = any
//
// Command record, CommandRecordBytes = 12 (+8 with CmdFragment):
//
//	 0 cmdSeq u64
//	 8 len    u16
//	10 flags  u8  CmdFragment, CmdTimer
//	11 reserved u8
//	[12 total u32, 16 offset u32]  only with CmdFragment
//
// NAK (NakBytes = 40): epoch u32 @4, session u64 @8, fromSeq u64 @16,
// toSeq u64 @24 (inclusive), fromOffset u32 @32 (fragment bytes of fromSeq
// already held), toOffset u32 @36 (0, or the end of the hole in fromSeq
// when only [fromOffset, toOffset) of fromSeq is asked for; then
// toSeq == fromSeq).
//
// Gone (GoneBytes = 32), the answer to a NAK that cannot be repaired:
// epoch u32 @4, session u64 @8, fromSeq u64 @16 (first seq asked for),
// oldest u64 @24 (oldest seq still retained; 0 = none).
package wire
