package wire

// Sizes of the command layout (see the package comment).
const (
	CommandHeaderBytes = 40
	CommandRecordBytes = 12
)

// Command record flags.
const (
	CmdFragment uint8 = 1 << 1 // record holds part of a larger command
	CmdTimer    uint8 = 1 << 3 // payload is a TimerRequest for the sequencer
	// CmdOOB asks for out-of-band delivery: the sequencer numbers it as
	// usual and its stream record carries FlagOOB.
	CmdOOB uint8 = 1 << 4
	// CmdControl: the payload is a ControlRequest (activate, force
	// passive) for the sequencer.
	CmdControl uint8 = 1 << 5
	cmdFlags         = CmdFragment | CmdTimer | CmdOOB | CmdControl
)

// Command frame header flags.
const (
	// FrameHotHot: the sender is an instance of a hot-hot account. Every
	// record carries an 8-byte command id (after its 12-byte header,
	// before the fragment header): the stream position its handler sent it from, equal on every
	// instance. A hot-hot frame with no records is the instance's
	// heartbeat. A frame without the flag is laid out as before it existed.
	FrameHotHot uint16 = 1 << 0
	frameFlags         = FrameHotHot
)

// CommandIDBytes is the size of the id of a record in a hot-hot frame.
const CommandIDBytes = 8

// CommandPacket is the decoded header of a command frame plus a cursor over
// its records. It holds a view of the frame.
type CommandPacket struct {
	Account     Account
	Instance    uint8
	Incarnation uint64
	Session     uint64
	Count       int
	// HotHot: the frame has FrameHotHot (each Command has its ID).
	HotHot bool

	body []byte
}

// Command is one command, or one fragment of a command. Payload is a view.
type Command struct {
	CmdSeq uint64
	Flags  uint8
	Total  uint32
	Offset uint32
	// ID is the hot-hot command id (0 outside hot-hot frames).
	ID      uint64
	Payload []byte
}

// Fragment reports whether the command record holds only part of it.
func (c *Command) Fragment() bool { return c.Flags&CmdFragment != 0 }

// DecodeCommand validates b as a command frame and fills p.
func DecodeCommand(b []byte, p *CommandPacket) error {
	hdr, err := checkPrefix(b, CommandHeaderBytes, KindCommand)
	if err != nil {
		return err
	}
	fl := le.Uint16(b[6:])
	if fl&^frameFlags != 0 || b[35] != 0 || le.Uint32(b[36:]) != 0 {
		return ErrFlags
	}
	p.HotHot = fl&FrameHotHot != 0
	rh := CommandRecordBytes
	if p.HotHot {
		rh += CommandIDBytes
	}
	p.Account = Account(le.Uint64(b[8:]))
	p.Incarnation = le.Uint64(b[16:])
	p.Session = le.Uint64(b[24:])
	p.Count = int(le.Uint16(b[32:]))
	p.Instance = b[34]
	body := b[hdr:]
	p.body = body
	for i := 0; i < p.Count; i++ {
		if len(body) < CommandRecordBytes {
			return ErrRecord
		}
		if le.Uint64(body) == 0 {
			return ErrZeroSeq
		}
		n := int(le.Uint16(body[8:]))
		flags := body[10]
		if flags&^cmdFlags != 0 || body[11] != 0 {
			return ErrRecord
		}
		if p.HotHot && len(body) >= rh && le.Uint64(body[CommandRecordBytes:]) == 0 {
			return ErrZeroSeq
		}
		if body, err = skipRecord(body, rh, n, flags&CmdFragment != 0); err != nil {
			return err
		}
	}
	if len(body) != 0 {
		return ErrTrailing
	}
	return nil
}

// Next fills c with the next command and reports whether there was one.
func (p *CommandPacket) Next(c *Command) bool {
	b := p.body
	if len(b) == 0 {
		return false
	}
	c.CmdSeq = le.Uint64(b)
	n := int(le.Uint16(b[8:]))
	c.Flags = b[10]
	h := CommandRecordBytes
	if p.HotHot {
		c.ID = le.Uint64(b[h:])
		h += CommandIDBytes
	} else {
		c.ID = 0
	}
	if c.Flags&CmdFragment != 0 {
		c.Total = le.Uint32(b[h:])
		c.Offset = le.Uint32(b[h+4:])
		h += FragmentHeaderBytes
	} else {
		c.Total = uint32(n)
		c.Offset = 0
	}
	c.Payload = b[h : h+n : h+n]
	p.body = b[h+n:]
	return true
}

// CommandWriter builds a command frame in a caller-owned buffer.
type CommandWriter struct {
	buf   []byte
	n     int
	count int
	rh    int // record header bytes: CommandRecordBytes, + CommandIDBytes when hot-hot
}

// Reset starts a command frame in buf (whose length is the size limit).
func (w *CommandWriter) Reset(buf []byte, account Account, instance uint8, incarnation, session uint64) error {
	if len(buf) < CommandHeaderBytes {
		return ErrNoRoom
	}
	putPrefix(buf, KindCommand, CommandHeaderBytes)
	le.PutUint64(buf[8:], uint64(account))
	le.PutUint64(buf[16:], incarnation)
	le.PutUint64(buf[24:], session)
	le.PutUint16(buf[32:], 0)
	buf[34] = instance
	buf[35] = 0
	le.PutUint32(buf[36:], 0)
	w.buf = buf
	w.n = CommandHeaderBytes
	w.count = 0
	w.rh = CommandRecordBytes
	return nil
}

// SetHotHot marks the frame begun by Reset as a hot-hot instance's
// (FrameHotHot): every command appended carries its ID. Call it before
// the first Append.
func (w *CommandWriter) SetHotHot() {
	le.PutUint16(w.buf[6:], FrameHotHot)
	w.rh = CommandRecordBytes + CommandIDBytes
}

// Count is the number of commands appended since Reset.
func (w *CommandWriter) Count() int { return w.count }

// Len is the number of bytes written so far.
func (w *CommandWriter) Len() int { return w.n }

// Room is how many payload bytes one more whole command can carry.
func (w *CommandWriter) Room() int { return len(w.buf) - w.n - w.rh }

// FragmentRoom is how many payload bytes one more fragment can carry.
func (w *CommandWriter) FragmentRoom() int {
	return len(w.buf) - w.n - w.rh - FragmentHeaderBytes
}

// Append adds a command; c.Total and c.Offset are written only with
// CmdFragment. Nothing is written on error.
func (w *CommandWriter) Append(c *Command) error {
	if c.CmdSeq == 0 {
		return ErrZeroSeq
	}
	if w.rh > CommandRecordBytes && c.ID == 0 {
		return ErrZeroSeq
	}
	h := w.rh
	if c.Flags&CmdFragment != 0 {
		h += FragmentHeaderBytes
	}
	n := len(c.Payload)
	if n > 0xFFFF {
		return ErrPayloadSize
	}
	if w.count == 0xFFFF || w.n+h+n > len(w.buf) {
		return ErrNoRoom
	}
	b := w.buf[w.n:]
	le.PutUint64(b, c.CmdSeq)
	le.PutUint16(b[8:], uint16(n))
	b[10] = c.Flags & cmdFlags
	b[11] = 0
	at := CommandRecordBytes
	if w.rh > CommandRecordBytes {
		le.PutUint64(b[at:], c.ID)
		at += CommandIDBytes
	}
	if c.Flags&CmdFragment != 0 {
		le.PutUint32(b[at:], c.Total)
		le.PutUint32(b[at+4:], c.Offset)
	}
	copy(b[h:], c.Payload)
	w.n += h + n
	w.count++
	le.PutUint16(w.buf[32:], uint16(w.count))
	return nil
}

// Bytes returns the frame built so far (a view of the buffer).
func (w *CommandWriter) Bytes() []byte { return w.buf[:w.n] }
