package sequencer

import (
	"encoding/binary"

	"github.com/seqd/seqd/wire"
)

// sender is the dedupe entry of one (account, instance): the incarnation
// on record, the last cmdSeq sequenced, and the command being reassembled.
type sender struct {
	account     wire.Account
	instance    uint8
	acct        int32 // index in Core.accounts
	incarnation uint64
	lastCmdSeq  uint64
	lastHeard   int64 // mono time of its last valid frame (ActiveTimeout)
	asm         assembly
}

// senderTable is an open-addressing hash table from (account, instance) to
// sender. Entries are allocated up front (MaxSenders) and never move, so a
// lookup costs one hash and usually one probe and allocates nothing.
type senderTable struct {
	slots []int32 // index+1 into list; 0 = empty
	mask  uint64
	list  []sender
}

func (t *senderTable) init(capacity int) {
	n := 1
	for n < 2*capacity {
		n <<= 1
	}
	t.slots = make([]int32, n)
	t.mask = uint64(n - 1)
	t.list = make([]sender, 0, capacity)
}

func senderHash(a wire.Account, instance uint8) uint64 {
	x := uint64(a) ^ uint64(instance)*0x9E3779B97F4A7C15
	x ^= x >> 31
	x *= 0xBF58476D1CE4E5B9
	x ^= x >> 29
	return x
}

// lookup returns the sender's index, or -1 and the empty slot where it
// would go.
func (t *senderTable) lookup(a wire.Account, instance uint8) (int32, uint64) {
	i := senderHash(a, instance) & t.mask
	for {
		s := t.slots[i]
		if s == 0 {
			return -1, i
		}
		e := &t.list[s-1]
		if e.account == a && e.instance == instance {
			return s - 1, i
		}
		i = (i + 1) & t.mask
	}
}

// insert adds a sender at the empty slot lookup returned; -1 when full.
func (t *senderTable) insert(slot uint64, a wire.Account, instance uint8) int32 {
	if len(t.list) == cap(t.list) {
		return -1
	}
	t.list = append(t.list, sender{account: a, instance: instance})
	idx := int32(len(t.list) - 1)
	t.slots[slot] = idx + 1
	return idx
}

// stepCommand validates a command frame, then dedupes and sequences its
// commands.
func (c *Core) stepCommand(now Time, frame []byte) error {
	p := &c.cmd
	if err := wire.DecodeCommand(frame, p); err != nil {
		c.stats.Malformed++
		return err
	}
	if err := c.checkCommands(frame); err != nil {
		c.stats.Malformed++
		return err
	}
	if p.Session != 0 && p.Session != c.session {
		c.stats.WrongSession++
		return nil
	}
	if c.flowPaused() {
		// The slowest receiver that matters is a flow window behind: the
		// node resends this frame after its backoff.
		c.stats.FlowPaused++
		return nil
	}
	idx, slot := c.senders.lookup(p.Account, p.Instance)
	isNew := idx < 0
	if isNew {
		if idx = c.senders.insert(slot, p.Account, p.Instance); idx < 0 {
			c.stats.Rejected++
			return ErrTooManySenders
		}
	}
	s := &c.senders.list[idx]
	if p.Incarnation < s.incarnation {
		c.stats.StaleFrames++
		return nil
	}
	c.advance(now)
	s.lastHeard = c.mono
	if isNew {
		c.accounts.addInstance(c, s, idx)
	}
	if p.Incarnation > s.incarnation {
		// A restarted node: the reset goes into the stream so that a new
		// primary rebuilding the table from the stream agrees.
		s.incarnation = p.Incarnation
		s.lastCmdSeq = 0
		s.asm.clear()
		c.in = wire.Internal{Type: wire.InternalIncarnation, Account: s.account, Instance: s.instance, Value: s.incarnation}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	}
	cmd := &c.c
	for p.Next(cmd) {
		switch {
		case cmd.CmdSeq <= s.lastCmdSeq:
			c.stats.Duplicates++
		case cmd.CmdSeq != s.lastCmdSeq+1:
			c.stats.OutOfOrder++
		case cmd.Flags&wire.CmdFragment != 0:
			c.addFragment(s, cmd)
		case cmd.Flags&wire.CmdTimer != 0:
			c.sequenceTimer(s, cmd)
		default:
			s.asm.clear()
			c.appendMessage(0, s.account, s.instance, cmd.CmdSeq, cmd.Payload)
			s.lastCmdSeq = cmd.CmdSeq
			c.stats.Commands++
		}
	}
	return nil
}

// checkCommands rejects, before anything changes, commands that decode but
// that the sequencer cannot take: oversized ones and bad timer requests.
// It walks the record headers of the frame DecodeCommand has validated
// (layout in package wire's doc) instead of decoding every command: this
// pass runs for every frame and only timer requests need a closer look.
func (c *Core) checkCommands(frame []byte) error {
	max := uint64(c.cfg.MaxMessageBytes)
	b := frame[wire.CommandHeaderBytes:]
	for len(b) > 0 {
		n := int(binary.LittleEndian.Uint16(b[8:]))
		flags := b[10]
		h := wire.CommandRecordBytes
		total := uint64(n)
		if flags&wire.CmdFragment != 0 {
			total = uint64(binary.LittleEndian.Uint32(b[12:]))
			h += wire.FragmentHeaderBytes
		}
		if total > max {
			return ErrCommandTooLarge
		}
		if flags&wire.CmdTimer != 0 {
			if flags&wire.CmdFragment != 0 {
				return ErrFragmentedTimer
			}
			if err := wire.DecodeTimerRequest(b[h:h+n], &c.tr); err != nil {
				return err
			}
		}
		b = b[h+n:]
	}
	return nil
}

// keepAssemblyBytes: a reassembly buffer up to this size is kept for the
// sender's next fragmented command; a larger one is released.
const keepAssemblyBytes = 1 << 20

// addFragment adds a fragment of the expected command to the sender's
// reassembly and sequences the command once every byte is held.
func (c *Core) addFragment(s *sender, cmd *wire.Command) {
	a := &s.asm
	if a.cmdSeq != cmd.CmdSeq {
		if grow := int(cmd.Total) - cap(a.buf); grow > 0 {
			if c.asmBytes+grow > c.cfg.MaxReassemblyBytes {
				c.stats.ReassemblyFull++
				return
			}
			c.asmBytes += grow
		}
		a.start(cmd.CmdSeq, cmd.Total)
	} else if a.total != cmd.Total {
		c.stats.BadFragments++
		return
	}
	c.stats.Fragments++
	if !a.add(cmd.Offset, cmd.Payload) {
		return
	}
	c.appendMessage(0, s.account, s.instance, cmd.CmdSeq, a.buf[:a.total])
	a.clear()
	if cap(a.buf) > keepAssemblyBytes {
		// Many senders each keeping a 16 MiB buffer would pin gigabytes.
		c.asmBytes -= cap(a.buf)
		a.buf = nil
	}
	s.lastCmdSeq = cmd.CmdSeq
	c.stats.Commands++
}
