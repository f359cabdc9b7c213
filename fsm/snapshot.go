package fsm

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
)

// SnapshotVersion is the version of the snapshot encoding AppendSnapshot
// writes. Version 2 added the sealed epoch; DecodeSnapshot still reads
// version 1 (sealed 0), so a member upgraded in place restores the
// snapshot it took before.
const SnapshotVersion = 2

// snapshotMagic starts every snapshot, so a file of something else is
// refused before its bytes are read as counts.
var snapshotMagic = [4]byte{'S', 'Q', 'F', 'S'}

// MaxSnapshotBytes bounds what Restore reads: the largest valid state
// (MaxCuts cuts, MaxCheckpoints checkpoints, MaxMembers members with
// MaxAddrBytes addresses) is below it.
const MaxSnapshotBytes = 4 + 2 + 6*8 + 3*4 + MaxCuts*32 + MaxCheckpoints*16 + MaxMembers*(9+4*(1+MaxAddrBytes)) + 4

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// AppendSnapshot appends the snapshot encoding of s to dst:
//
//	magic "SQFS" | version u16 (=2) |
//	index u64 | session u64 | epoch u64 | primary u64 | epochStart u64 |
//	ncuts u32 | ncuts × (session u64 | epoch u64 | primary u64 | last u64) |
//	ncheckpoints u32 | ncheckpoints × (seq u64 | unixNano u64) |
//	nmembers u32 | nmembers × member (as in commands) |
//	sealed u64 (version 2 only) |
//	crc32c u32 of everything before it
//
// Big-endian throughout.
func AppendSnapshot(dst []byte, s *State) []byte {
	start := len(dst)
	dst = append(dst, snapshotMagic[:]...)
	dst = binary.BigEndian.AppendUint16(dst, SnapshotVersion)
	for _, v := range [...]uint64{s.index, s.session, s.epoch, s.primary, s.epochStart} {
		dst = binary.BigEndian.AppendUint64(dst, v)
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.cuts)))
	for _, c := range s.cuts {
		for _, v := range [...]uint64{c.Session, c.Epoch, c.Primary, c.Last} {
			dst = binary.BigEndian.AppendUint64(dst, v)
		}
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.checkpoints)))
	for _, c := range s.checkpoints {
		dst = binary.BigEndian.AppendUint64(dst, c.Seq)
		dst = binary.BigEndian.AppendUint64(dst, uint64(c.UnixNano))
	}
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s.members)))
	for _, m := range s.members {
		dst = appendMember(dst, m)
	}
	dst = binary.BigEndian.AppendUint64(dst, s.sealed)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], castagnoli))
}

// DecodeSnapshot parses a snapshot and checks the state's invariants.
// Malformed, corrupt or inconsistent bytes return an error (wrapping
// ErrMalformed, ErrUnknownVersion, ErrChecksum, ErrSnapshotTooLarge or
// ErrInvalidState); it never panics, and it allocates in proportion to the
// bytes given, never to a count the bytes declare.
func DecodeSnapshot(b []byte) (*State, error) {
	if len(b) > MaxSnapshotBytes {
		return nil, fmt.Errorf("%w: %d bytes (max %d)", ErrSnapshotTooLarge, len(b), MaxSnapshotBytes)
	}
	if len(b) < len(snapshotMagic)+2+4 || [4]byte(b[:4]) != snapshotMagic {
		return nil, fmt.Errorf("%w: not a snapshot", ErrMalformed)
	}
	v := binary.BigEndian.Uint16(b[4:])
	if v != 1 && v != SnapshotVersion {
		return nil, fmt.Errorf("%w: snapshot version %d", ErrUnknownVersion, v)
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, castagnoli) != sum {
		return nil, ErrChecksum
	}
	r := reader{b: body[6:]}
	s := &State{index: r.u64(), session: r.u64(), epoch: r.u64(), primary: r.u64(), epochStart: r.u64()}
	n := r.count(MaxCuts, 32)
	for range n {
		s.cuts = append(s.cuts, Cut{Session: r.u64(), Epoch: r.u64(), Primary: r.u64(), Last: r.u64()})
	}
	n = r.count(MaxCheckpoints, 16)
	for range n {
		s.checkpoints = append(s.checkpoints, Checkpoint{Seq: r.u64(), UnixNano: int64(r.u64())})
	}
	n = r.count(MaxMembers, 13)
	for range n {
		s.members = append(s.members, r.member())
	}
	if v >= 2 {
		s.sealed = r.u64()
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%w: %d trailing bytes", ErrMalformed, len(r.b))
	}
	if r.err != nil {
		return nil, fmt.Errorf("snapshot: %w", r.err)
	}
	if err := s.validate(); err != nil {
		return nil, fmt.Errorf("snapshot: %w", err)
	}
	return s, nil
}

// count reads a u32 count and refuses one above max or one that the
// remaining bytes cannot hold at minBytes each.
func (r *reader) count(max, minBytes int) int {
	n := int(r.u32())
	if r.err != nil {
		return 0
	}
	if n > max || n*minBytes > len(r.b) {
		r.err = fmt.Errorf("%w: count %d (max %d, %d bytes left)", ErrMalformed, n, max, len(r.b))
		return 0
	}
	return n
}
