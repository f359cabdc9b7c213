package sequencer

import (
	"encoding/binary"

	"github.com/seqd/seqd/wire"
)

// Snapshot layout, version 3 (little-endian; this is the sequencer's own
// format, for the cluster's state transfer, not a network frame):
//
//	header (56 bytes): magic u32 "SQST", version u16 = 3, reserved u16,
//	  maxSenders u32, senders u32, accounts u32, timers u32,
//	  lastSeq u64, lastTime i64, epoch u32, reserved u32, epochStart u64
//	senders, in index order (48 bytes each): account u64, instance u8,
//	  flags u8 (bit 0 hot-hot, bit 1 fenced), reserved [6]u8,
//	  incarnation u64, lastCmdSeq
//	  u64, lastSeq u64, lastTime i64
//	accounts, in table order: account u64, active i32 (-1: none),
//	  instances u32, lastID u64 (hot-hot), then that many sender
//	  indexes u32
//
// Version 2 had no fenced bit (its flags byte is 0 or 1); it is still
// read (no incarnation fenced: a new primary restoring one may sequence
// a fenced incarnation's later commands, as a version 2 primary did).
// Version 1 (before hot-hot pairs) had no flags byte and no lastID; it
// is still read (no sender hot-hot, every lastID 0).
//
//	timers, in heap order (40 bytes each): account u64, instance u8,
//	  reserved [7]u8, id u64, at i64, period i64
//
// Orders are those of the tables, which depend only on the records
// applied: two States that applied the same stream encode to the same
// bytes, and Restore rebuilds the tables in the same orders, so a
// restored State encodes as it was and goes on applying as the original
// would. Per-sender timer counts and account links are derived on Restore.
const (
	snapshotMagic   = 0x54535153 // "SQST"
	snapshotVersion = 3
	snapHeaderBytes = 56
	snapSenderBytes = 48
	snapTimerBytes  = 40

	// A sender's flags byte (version 2: snapHotHot only).
	snapHotHot = 1
	snapFenced = 2
)

// AppendSnapshot appends the State's encoding to b and returns the
// extended slice; with a buffer of enough capacity it allocates nothing.
func (s *State) AppendSnapshot(b []byte) []byte {
	le := binary.LittleEndian
	b = le.AppendUint32(b, snapshotMagic)
	b = le.AppendUint16(b, snapshotVersion)
	b = le.AppendUint16(b, 0)
	b = le.AppendUint32(b, uint32(s.maxSenders))
	b = le.AppendUint32(b, uint32(len(s.senders.list)))
	b = le.AppendUint32(b, uint32(len(s.accounts.list)))
	b = le.AppendUint32(b, uint32(len(s.timers.heap)))
	b = le.AppendUint64(b, s.lastSeq)
	b = le.AppendUint64(b, uint64(s.lastTime))
	b = le.AppendUint32(b, s.epoch)
	b = le.AppendUint32(b, 0)
	b = le.AppendUint64(b, s.epochStart)
	for i := range s.senders.list {
		e := &s.senders.list[i]
		b = le.AppendUint64(b, uint64(e.account))
		inst := uint64(e.instance)
		if e.hotHot {
			inst |= snapHotHot << 8
		}
		if e.fenced {
			inst |= snapFenced << 8
		}
		b = le.AppendUint64(b, inst)
		b = le.AppendUint64(b, e.incarnation)
		b = le.AppendUint64(b, e.lastCmdSeq)
		b = le.AppendUint64(b, e.lastSeq)
		b = le.AppendUint64(b, uint64(e.lastTime))
	}
	for i := range s.accounts.list {
		a := &s.accounts.list[i]
		b = le.AppendUint64(b, uint64(a.account))
		b = le.AppendUint32(b, uint32(a.active))
		b = le.AppendUint32(b, uint32(len(a.instances)))
		b = le.AppendUint64(b, a.lastID)
		for _, idx := range a.instances {
			b = le.AppendUint32(b, uint32(idx))
		}
	}
	for _, slot := range s.timers.heap {
		tm := &s.timers.list[slot]
		b = le.AppendUint64(b, uint64(tm.key.account))
		b = le.AppendUint64(b, uint64(tm.key.instance))
		b = le.AppendUint64(b, tm.key.id)
		b = le.AppendUint64(b, uint64(tm.at))
		b = le.AppendUint64(b, uint64(tm.period))
	}
	return b
}

// Snapshot returns the State's encoding in a new slice.
func (s *State) Snapshot() []byte { return s.AppendSnapshot(nil) }

// snapReader reads a snapshot front to back; a read past the end sets bad.
type snapReader struct {
	b   []byte
	bad bool
}

func (r *snapReader) u64() uint64 {
	if len(r.b) < 8 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b)
	r.b = r.b[8:]
	return v
}

func (r *snapReader) u32() uint32 {
	if len(r.b) < 4 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b)
	r.b = r.b[4:]
	return v
}

func (r *snapReader) u16() uint16 {
	if len(r.b) < 2 {
		r.bad, r.b = true, nil
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b)
	r.b = r.b[2:]
	return v
}

// Restore replaces the State with the one encoded in b (by AppendSnapshot),
// including its MaxSenders. On error (ErrSnapshot) the State is unchanged.
// A Core built on a restored State (a new primary) goes on from its
// LastSeq.
func (s *State) Restore(b []byte) error {
	var n State
	if err := n.decode(b); err != nil {
		return err
	}
	*s = n
	return nil
}

func (s *State) decode(b []byte) error {
	r := &snapReader{b: b}
	if r.u32() != snapshotMagic {
		return ErrSnapshot
	}
	version := r.u16()
	if version < 1 || version > snapshotVersion || r.u16() != 0 {
		return ErrSnapshot
	}
	acctBytes := 12
	if version >= 2 {
		acctBytes = 20
	}
	maxS, nS, nA, nT := int(r.u32()), int(r.u32()), int(r.u32()), int(r.u32())
	lastSeq, lastTime, epoch, res, epochStart := r.u64(), int64(r.u64()), r.u32(), r.u32(), r.u64()
	// Counts are checked against the bytes left before anything is
	// allocated, so a corrupt header cannot reserve memory it has no
	// bytes for.
	if r.bad || res != 0 || maxS < 1 || maxS > maxSenders || nS > maxS || nA > nS ||
		nS*snapSenderBytes+nA*acctBytes+nT*snapTimerBytes > len(r.b) {
		return ErrSnapshot
	}
	s.init(maxS, 1)
	s.lastSeq, s.lastTime, s.epoch, s.epochStart = lastSeq, lastTime, epoch, epochStart
	for i := 0; i < nS; i++ {
		a, inst := wire.Account(r.u64()), r.u64()
		flags := inst >> 8
		known := uint64(0)
		switch version {
		case 2:
			known = snapHotHot
		case 3:
			known = snapHotHot | snapFenced
		}
		if flags&^known != 0 || flags&snapFenced != 0 && flags&snapHotHot == 0 {
			return ErrSnapshot // an unknown flag, or a fenced sender that is not hot-hot
		}
		inst &= 0xFF
		idx, slot := s.senders.lookup(a, uint8(inst))
		if idx >= 0 {
			return ErrSnapshot // twice the same sender
		}
		idx = s.senders.insert(slot, a, uint8(inst))
		e := &s.senders.list[idx]
		e.acct = -1
		e.incarnation, e.lastCmdSeq, e.lastSeq, e.lastTime = r.u64(), r.u64(), r.u64(), int64(r.u64())
		e.hotHot, e.fenced = flags&snapHotHot != 0, flags&snapFenced != 0
	}
	for ai := 0; ai < nA; ai++ {
		a, active, k := wire.Account(r.u64()), int32(r.u32()), int(r.u32())
		var lastID uint64
		if version >= 2 {
			lastID = r.u64()
		}
		if r.bad || k < 1 || k > nS || active < -1 || int(active) >= nS {
			return ErrSnapshot
		}
		if _, dup := s.accounts.index[a]; dup {
			return ErrSnapshot
		}
		s.accounts.index[a] = int32(ai)
		st := accountState{account: a, active: active, instances: make([]int32, 0, k), lastID: lastID}
		for j := 0; j < k; j++ {
			idx := int32(r.u32())
			if r.bad || idx < 0 || int(idx) >= nS {
				return ErrSnapshot
			}
			e := &s.senders.list[idx]
			if e.account != a || e.acct != -1 {
				return ErrSnapshot // another account's sender, or listed twice
			}
			e.acct = int32(ai)
			st.instances = append(st.instances, idx)
		}
		if active >= 0 && s.senders.list[active].acct != int32(ai) {
			return ErrSnapshot
		}
		s.accounts.list = append(s.accounts.list, st)
	}
	for i := range s.senders.list {
		if s.senders.list[i].acct < 0 {
			return ErrSnapshot // a sender outside every account
		}
	}
	for i := 0; i < nT; i++ {
		k := timerKey{account: wire.Account(r.u64())}
		inst := r.u64()
		k.id = r.u64()
		at, period := int64(r.u64()), int64(r.u64())
		if r.bad || inst > 0xFF || period < 0 {
			return ErrSnapshot
		}
		k.instance = uint8(inst)
		if _, dup := s.timers.index[k]; dup {
			return ErrSnapshot
		}
		idx, _ := s.senders.lookup(k.account, k.instance)
		if idx < 0 {
			return ErrSnapshot // a timer of no sender
		}
		s.senders.list[idx].timers++
		s.senders.list[idx].timerRate += timerRate(period)
		// Appended in heap order, so the heap is rebuilt as it was.
		slot := int32(len(s.timers.list))
		s.timers.list = append(s.timers.list, timer{key: k, at: at, period: period, pos: len(s.timers.heap)})
		s.timers.heap = append(s.timers.heap, slot)
		s.timers.index[k] = slot
	}
	if r.bad || len(r.b) != 0 {
		return ErrSnapshot
	}
	for i := 1; i < len(s.timers.heap); i++ {
		if s.timers.less(i, (i-1)/2) {
			return ErrSnapshot // not a heap
		}
	}
	return nil
}
