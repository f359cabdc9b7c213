// Package wire defines every byte that seqd puts on a network: the frames of
// the event stream (data packets and heartbeats), commands from nodes to the
// sequencer, retransmit requests (NAKs) and their refusals, receivers' position
// reports (status), rewind requests and replies, and the payloads of
// internal, sequencer-generated messages.
//
// # Main types
//
//   - Packet and Record: a stream packet (KindData, KindHeartbeat) and the
//     records in it, each with its seq, sequencer time, account, instance
//     and command seq; PacketWriter builds one in place.
//   - CommandPacket and Command: a node's frame of commands;
//     CommandWriter builds one.
//   - Nak, Gone, Status: repair requests, their refusal, and receivers'
//     position reports (a standby's ack is a Status with StatusStandby).
//   - Internal, TimerRequest, ControlRequest, RejectReason: the payloads
//     of internal records and of timer and control commands.
//   - RewindRequest, RewindReply: the rewind connection's handshake.
//   - PeerRequest and the peer answer frames: the peer protocol of
//     sequencer members (fetch, seal, status) on a member's peer port.
//   - Account: an account name of at most 8 bytes packed in a uint64.
//   - Auth, Key: authenticated frames (auth.go): a frame with FlagMAC
//     ends in a trailer (nonce, key id, AES-128-GMAC tag over every byte
//     before the tag); Sign and Verify work in place and allocate
//     nothing. ParseKeys and FormatKey are the keys file format.
//
// All integers are little-endian at fixed offsets. Encoders write into
// buffers the caller owns; decoders fill caller-owned structs whose byte
// slices are views into the frame (zero copies, zero allocations). A decoder
// validates the whole frame before returning nil, so iterating the records
// of a decoded frame cannot fail and cannot read out of bounds. Malformed
// input returns one of the sentinel errors in errors.go; it never panics.
// Every decoder is fuzzed.
//
// This is version 2. Every frame starts with the same 8-byte prefix: magic
// u16 0x5153 ("SQ"), version u8, kind u8, hdrLen u16, flags u16. A frame
// of another version is refused (ErrVersion), and so are unknown flag
// bits (ErrFlags); a later minor change adds header fields and raises
// hdrLen, which readers of this version skip.
//
// # Concurrency
//
// None: the package holds no state. A decoded value is a view of the
// frame it was decoded from and is valid only while that frame is.
//
// Every layout, field by field, and the versioning rules: docs/wire.md.
// What the frames mean: docs/protocol.md.
package wire
