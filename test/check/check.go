package check

import (
	"fmt"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/wire"
)

// Config says where the stream is joined and what to compute.
type Config struct {
	// FirstSeq is the sequence number the stream must start at; 0 takes
	// whatever comes first.
	FirstSeq uint64
	// Late says that the stream was joined mid-session: a sender first
	// seen by a command (its incarnation's announcement went by before)
	// is numbered from that command on instead of from 1.
	Late bool
	// Digest folds every message delivered into Digest (a pass over each
	// payload: off for throughput runs).
	Digest bool
	// HotHot are accounts whose commands are numbered from the stream
	// (a hot-hot pair's ids, S<<16|k: docs/node.md), not 1, 2, 3: their
	// seqs are checked and digested, their numbering is the caller's to
	// check.
	HotHot []wire.Account
}

// Fault is what is wrong with one delivered message.
type Fault uint8

const (
	OK Fault = iota
	// SeqRepeat: a sequence number at or below the last one. The message
	// is not otherwise looked at.
	SeqRepeat
	// SeqGap: a sequence number above the next one (Lost counts the
	// skipped ones). The message is checked and counted as usual.
	SeqGap
	// CmdRepeat: a sender's command at or below its last one (a command
	// delivered twice).
	CmdRepeat
	// CmdGap: a sender's command above its next one (Lost counts the
	// skipped ones; PrevCmd 0 is a first command other than 1).
	CmdGap
)

// Sender names a sender: its account and instance.
type Sender struct {
	Account  wire.Account
	Instance uint8
}

// Verdict is Observe's answer on one message.
type Verdict struct {
	Fault Fault
	// Seq is the message's, PrevSeq the last delivered before it.
	Seq, PrevSeq uint64
	// Sender, CmdSeq and PrevCmd describe a command fault.
	Sender          Sender
	CmdSeq, PrevCmd uint64
}

// Err is the verdict as an error, nil when OK.
func (v Verdict) Err() error {
	switch v.Fault {
	case SeqRepeat, SeqGap:
		return fmt.Errorf("stream gap or repeat: seq %d after %d", v.Seq, v.PrevSeq)
	case CmdRepeat, CmdGap:
		if v.PrevCmd == 0 {
			return fmt.Errorf("seq %d: first command of %v/%d in this incarnation is %d, want 1: lost", v.Seq, v.Sender.Account, v.Sender.Instance, v.CmdSeq)
		}
		return fmt.Errorf("seq %d: command %d of %v/%d after %d: lost or duplicated", v.Seq, v.CmdSeq, v.Sender.Account, v.Sender.Instance, v.PrevCmd)
	}
	return nil
}

// Stream checks one receiver's delivered stream. The zero value is a
// Stream with the zero Config.
type Stream struct {
	cfg Config
	// Last is the last sequence number delivered (0: none yet).
	Last uint64
	// Lost counts the sequence numbers and commands skipped, Dup those
	// delivered again.
	Lost, Dup uint64
	// Digest folds every message delivered (Config.Digest): FNV-1a over
	// each one's seq, epoch, account, command seq, instance, flags and
	// payload, from 0.
	Digest uint64

	// senders[s] is s's slot in slots. The stream comes in runs of one
	// sender's commands, so the last sender's slot is kept: one map
	// lookup per run, not a lookup and an update per message.
	senders  map[Sender]int
	slots    []slot
	cacheKey Sender
	cacheIdx int // valid once slots is not empty
}

type slot struct {
	sender   Sender
	lastCmd  uint64 // 0: none in this incarnation
	received uint64 // commands delivered once
	counted  bool   // its numbering is known (an announcement or a command seen)
}

// New returns a Stream checking from cfg.
func New(cfg Config) *Stream { return &Stream{cfg: cfg} }

// index returns s's slot, making one if s is new.
func (k *Stream) index(s Sender) int {
	if len(k.slots) > 0 && s == k.cacheKey {
		return k.cacheIdx
	}
	i, ok := k.senders[s]
	if !ok {
		if k.senders == nil {
			k.senders = map[Sender]int{}
		}
		i = len(k.slots)
		k.slots = append(k.slots, slot{sender: s})
		k.senders[s] = i
	}
	k.cacheKey, k.cacheIdx = s, i
	return i
}

// Observe checks the next delivered message and returns the first fault
// it has (OK: none).
func (k *Stream) Observe(m *node.Message) Verdict {
	v := Verdict{Seq: m.Seq, PrevSeq: k.Last}
	next := k.Last + 1
	if k.Last == 0 {
		next = k.cfg.FirstSeq
	}
	switch {
	case next == 0 || m.Seq == next:
	case m.Seq < next:
		k.Dup++
		v.Fault = SeqRepeat
		return v
	default:
		k.Lost += m.Seq - next
		v.Fault = SeqGap
	}
	k.Last = m.Seq
	if k.cfg.Digest {
		k.digest(m)
	}
	if m.Internal() {
		// A restarted sender announces a new incarnation and numbers its
		// commands from 1 again.
		var in wire.Internal
		if m.DecodeInternal(&in) == nil && in.Type == wire.InternalIncarnation {
			s := &k.slots[k.index(Sender{in.Account, in.Instance})]
			s.lastCmd, s.counted = 0, true
		}
		if m.Flags&wire.FlagSeqGen != 0 || m.CmdSeq == 0 {
			return v
		}
		// A timer request is a command: it takes its place in its
		// sender's numbering.
	}
	for _, a := range k.cfg.HotHot {
		if m.Account == a {
			return v
		}
	}
	s := &k.slots[k.index(Sender{m.Account, m.Instance})]
	if !s.counted && k.cfg.Late {
		s.lastCmd = m.CmdSeq - 1 // its first commands went by before the stream was joined
	}
	s.counted = true
	prev := s.lastCmd
	switch {
	case m.CmdSeq == prev+1:
	case m.CmdSeq <= prev:
		k.Dup++
		if v.Fault == OK {
			v.Fault, v.Sender, v.CmdSeq, v.PrevCmd = CmdRepeat, s.sender, m.CmdSeq, prev
		}
		return v
	default:
		k.Lost += m.CmdSeq - prev - 1
		if v.Fault == OK {
			v.Fault, v.Sender, v.CmdSeq, v.PrevCmd = CmdGap, s.sender, m.CmdSeq, prev
		}
	}
	s.lastCmd = m.CmdSeq
	s.received++
	return v
}

// LastCmd is s's last command delivered in its current incarnation.
func (k *Stream) LastCmd(s Sender) uint64 {
	if i, ok := k.senders[s]; ok {
		return k.slots[i].lastCmd
	}
	return 0
}

// Received is how many of s's commands were delivered once, in all its
// incarnations.
func (k *Stream) Received(s Sender) uint64 {
	if i, ok := k.senders[s]; ok {
		return k.slots[i].received
	}
	return 0
}

// Senders calls f for every sender with a command delivered, in the order
// first seen.
func (k *Stream) Senders(f func(s Sender, received uint64)) {
	for _, s := range k.slots {
		if s.received > 0 {
			f(s.sender, s.received)
		}
	}
}

const fnvPrime = 1099511628211

func fnvByte(h uint64, b byte) uint64 { return (h ^ uint64(b)) * fnvPrime }

func fnvU64(h, v uint64) uint64 {
	for i := 0; i < 8; i++ {
		h = fnvByte(h, byte(v>>(8*i)))
	}
	return h
}

func (k *Stream) digest(m *node.Message) {
	h := fnvU64(k.Digest, m.Seq)
	h = fnvU64(h, uint64(m.Epoch))
	h = fnvU64(h, uint64(m.Account))
	h = fnvU64(h, m.CmdSeq)
	h = fnvByte(fnvByte(h, m.Instance), m.Flags)
	for _, b := range m.Payload {
		h = fnvByte(h, b)
	}
	k.Digest = h
}
