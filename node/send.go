package node

import "github.com/seqd/seqd/wire"

// cmdSlot keeps a copy of one unacked command for resends. small is the
// slot's piece of an arena allocated once; bigger payloads get their own
// buffer, dropped at the ack.
type cmdSlot struct {
	flags   uint8
	sentAt  int64
	payload []byte
	small   []byte
}

// maxArenaBytes bounds the memory reserved up front for small commands.
const maxArenaBytes = 16 << 20

// send is the sending half of Core.
type send struct {
	nextCmd    uint64 // cmdSeq of the next command; numbering restarts at 1 per incarnation
	acked      uint64 // every cmdSeq <= acked was seen in the stream
	inflightB  int    // payload bytes of the unacked commands
	resendWait int64  // current resend interval: doubles while resends bring no ack
	cmds       []cmdSlot
	maxWhole   int // largest payload sent as one record
	frameBuf   []byte
	cw         wire.CommandWriter
	cmd        wire.Command
	frameOpen  bool
	frameSince int64
	timerBuf   [wire.TimerRequestBytes]byte
}

func (c *Core) initSend() {
	c.nextCmd = 1
	c.maxWhole = min(c.cfg.MaxPacketBytes-wire.CommandHeaderBytes-wire.CommandRecordBytes, 0xFFFF)
	small := min(c.maxWhole, maxArenaBytes/c.cfg.Window)
	arena := make([]byte, small*c.cfg.Window)
	c.cmds = make([]cmdSlot, c.cfg.Window)
	for i := range c.cmds {
		c.cmds[i].small = arena[i*small : (i+1)*small : (i+1)*small]
	}
	c.frameBuf = make([]byte, c.cfg.MaxPacketBytes)
}

// Send queues payload as the next command and returns its cmdSeq. The
// payload is copied. The command goes out when its frame fills, on Flush,
// or on Tick; it is resent until seen in the stream.
func (c *Core) Send(now int64, payload []byte) (uint64, error) {
	return c.enqueue(now, payload, 0)
}

// SendTimer asks the sequencer for centralized timer id at sequencer time
// at, then every period ns if period > 0. It fires as InternalTimer in the
// stream (OnTimer), at the same point on every node and replay. It uses a
// window slot like any command.
func (c *Core) SendTimer(now int64, id uint64, at, period int64) error {
	b, err := wire.AppendTimerRequest(c.timerBuf[:], &wire.TimerRequest{ID: id, At: at, Period: period})
	if err != nil {
		return err
	}
	_, err = c.enqueue(now, b, wire.CmdTimer)
	return err
}

// CancelTimer cancels centralized timer id.
func (c *Core) CancelTimer(now int64, id uint64) error {
	b, err := wire.AppendTimerRequest(c.timerBuf[:], &wire.TimerRequest{ID: id, Cancel: true})
	if err != nil {
		return err
	}
	_, err = c.enqueue(now, b, wire.CmdTimer)
	return err
}

func (c *Core) enqueue(now int64, payload []byte, flags uint8) (uint64, error) {
	if c.cfg.ReadOnly {
		return 0, ErrReadOnly
	}
	if c.err != nil {
		return 0, c.err
	}
	if len(payload) > c.cfg.MaxMessageBytes {
		return 0, ErrTooLarge
	}
	// Timer requests count toward Window but not WindowBytes: the shell,
	// which admits commands against the same limits, sees no payload.
	size := len(payload)
	if flags&wire.CmdTimer != 0 {
		size = 0
	}
	if c.InFlight() >= c.cfg.Window || c.InFlight() > 0 && c.inflightB+size > c.cfg.WindowBytes {
		return 0, ErrWindowFull
	}
	c.inflightB += size
	seq := c.nextCmd
	c.nextCmd++
	s := c.slot(seq)
	s.flags = flags
	s.sentAt = now
	if len(payload) <= cap(s.small) {
		s.payload = append(s.small[:0], payload...)
	} else {
		s.payload = append(make([]byte, 0, len(payload)), payload...)
	}
	c.stats.CommandsSent++
	c.appendCommand(now, seq, s)
	return seq, nil
}

func (c *Core) slot(cmdSeq uint64) *cmdSlot {
	return &c.cmds[cmdSeq%uint64(len(c.cmds))]
}

// minFragmentBytes avoids tiny fragments in the tail of a nearly full frame.
const minFragmentBytes = 64

// appendCommand writes one command into the open frame, fragmenting a
// payload that does not fit in one record. A full frame goes out at once.
func (c *Core) appendCommand(now int64, seq uint64, s *cmdSlot) {
	n := len(s.payload)
	cmd := &c.cmd
	cmd.CmdSeq = seq
	if n <= c.maxWhole {
		if c.frameOpen && c.cw.Room() < n {
			c.flushFrame()
		}
		c.openFrame(now)
		cmd.Flags, cmd.Total, cmd.Offset, cmd.Payload = s.flags, 0, 0, s.payload
		_ = c.cw.Append(cmd) // fits: checked above
		if c.cw.Room() <= 0 {
			c.flushFrame()
		}
		cmd.Payload = nil
		return
	}
	for off := 0; off < n; {
		c.openFrame(now)
		room := c.cw.FragmentRoom()
		if room < minFragmentBytes && room < n-off {
			c.flushFrame()
			c.openFrame(now)
			room = c.cw.FragmentRoom()
		}
		k := min(room, n-off, 0xFFFF)
		cmd.Flags, cmd.Total, cmd.Offset = s.flags|wire.CmdFragment, uint32(n), uint32(off)
		cmd.Payload = s.payload[off : off+k]
		_ = c.cw.Append(cmd)
		off += k
		if c.cw.FragmentRoom() < minFragmentBytes {
			c.flushFrame()
		}
	}
	cmd.Payload = nil
}

func (c *Core) openFrame(now int64) {
	if c.frameOpen {
		return
	}
	_ = c.cw.Reset(c.frameBuf, c.account, c.cfg.Instance, c.cfg.Incarnation, c.session)
	c.frameOpen = true
	c.frameSince = now
}

func (c *Core) flushFrame() {
	c.frameOpen = false
	if c.cw.Count() == 0 {
		return
	}
	c.out.Send(c.cw.Bytes())
	c.stats.CommandFrames++
}

// ack frees the window up to cmdSeq: the sequencer accepts a sender's
// commands only in order, so seeing cmdSeq means every earlier one made it.
func (c *Core) ack(cmdSeq uint64) {
	if cmdSeq <= c.acked || cmdSeq >= c.nextCmd {
		return
	}
	for q := c.acked + 1; q <= cmdSeq; q++ {
		s := c.slot(q)
		if s.flags&wire.CmdTimer == 0 {
			c.inflightB -= len(s.payload)
		}
		s.payload = nil
	}
	c.stats.Acked += cmdSeq - c.acked
	c.acked = cmdSeq
	c.resendWait = int64(c.cfg.ResendInterval)
}

// resend sends every unacked command again, in cmdSeq order, once the
// oldest has waited ResendInterval: the sequencer dropped everything after
// a lost command (it accepts only last+1), so all of them are needed.
// maxResendBackoff caps the resend interval at this many ResendIntervals.
const maxResendBackoff = 32

// nsPerByteInFlight stretches the resend interval by the payload in
// flight (10 ns a byte: 100 MB/s); 256 KiB of small commands adds 2.6ms.
const nsPerByteInFlight = 10

func (c *Core) resend(now int64) {
	if c.acked+1 >= c.nextCmd {
		return
	}
	if c.resendWait == 0 {
		c.resendWait = int64(c.cfg.ResendInterval)
	}
	// Big commands take time to cross even a healthy link: allow for
	// the bytes in flight at a modest 100 MB/s before calling them lost.
	if now-c.slot(c.acked+1).sentAt < c.resendWait+int64(c.inflightB)*nsPerByteInFlight {
		return
	}
	// Back off while resends bring no ack (a slow link, a long repair, a
	// sequencer away): resending faster than acks can come back only
	// piles copies into the transport. The first ack resets it.
	c.resendWait = min(2*c.resendWait, maxResendBackoff*int64(c.cfg.ResendInterval))
	if c.frameOpen {
		c.flushFrame()
	}
	for q := c.acked + 1; q < c.nextCmd; q++ {
		s := c.slot(q)
		s.sentAt = now
		c.appendCommand(now, q, s)
		c.stats.Resends++
	}
	if c.frameOpen {
		c.flushFrame()
	}
}
