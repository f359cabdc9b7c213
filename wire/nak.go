package wire

// Sizes of the NAK and Gone frames.
const (
	NakBytes  = 48
	GoneBytes = 48
)

// Nak asks for the records FromSeq..ToSeq (inclusive) again. FromOffset is
// how many leading bytes of a fragmented FromSeq the receiver already holds,
// so the sender may skip fragments that lie wholly before it. ToOffset,
// when not 0, narrows the request to the bytes [FromOffset, ToOffset) of
// FromSeq alone (FromSeq == ToSeq): a hole in the middle of a large
// message, whose later fragments the receiver holds.
type Nak struct {
	Epoch      uint32
	Session    uint64
	FromSeq    uint64
	ToSeq      uint64
	FromOffset uint32
	ToOffset   uint32
}

func (n *Nak) check() error {
	if n.FromSeq == 0 {
		return ErrZeroSeq
	}
	if n.ToSeq < n.FromSeq {
		return ErrNakRange
	}
	if n.ToOffset != 0 && (n.ToSeq != n.FromSeq || n.ToOffset <= n.FromOffset) {
		return ErrNakRange
	}
	return nil
}

// AppendNak encodes n into buf[:NakBytes] and returns that slice.
func AppendNak(buf []byte, n *Nak) ([]byte, error) {
	if len(buf) < NakBytes {
		return nil, ErrNoRoom
	}
	if err := n.check(); err != nil {
		return nil, err
	}
	putPrefix(buf, KindNak, NakBytes)
	le.PutUint64(buf[8:], n.Session)
	le.PutUint32(buf[16:], n.Epoch)
	le.PutUint32(buf[20:], n.FromOffset)
	le.PutUint64(buf[24:], n.FromSeq)
	le.PutUint64(buf[32:], n.ToSeq)
	le.PutUint32(buf[40:], n.ToOffset)
	le.PutUint32(buf[44:], 0)
	return buf[:NakBytes], nil
}

// DecodeNak validates b as a NAK frame and fills n.
func DecodeNak(b []byte, n *Nak) error {
	hdr, err := checkPrefix(b, NakBytes, KindNak)
	if err != nil {
		return err
	}
	if len(b) != hdr {
		return ErrTrailing
	}
	if le.Uint16(b[6:]) != 0 || le.Uint32(b[44:]) != 0 {
		return ErrFlags
	}
	n.Session = le.Uint64(b[8:])
	n.Epoch = le.Uint32(b[16:])
	n.FromOffset = le.Uint32(b[20:])
	n.FromSeq = le.Uint64(b[24:])
	n.ToSeq = le.Uint64(b[32:])
	n.ToOffset = le.Uint32(b[40:])
	return n.check()
}

// Gone tells a receiver that the records FromSeq..ToSeq it asked for (the
// NAK's range, echoed so that a receiver honours a Gone only for what it
// asked) can no longer be repaired by this sender: Oldest is the oldest seq
// it still retains (0 if none). The receiver must rewind from a replayer
// or stop with an error.
type Gone struct {
	Epoch   uint32
	Session uint64
	FromSeq uint64
	ToSeq   uint64
	Oldest  uint64
}

// AppendGone encodes g into buf[:GoneBytes] and returns that slice.
func AppendGone(buf []byte, g *Gone) ([]byte, error) {
	if len(buf) < GoneBytes {
		return nil, ErrNoRoom
	}
	if g.FromSeq == 0 {
		return nil, ErrZeroSeq
	}
	if g.ToSeq < g.FromSeq {
		return nil, ErrNakRange
	}
	putPrefix(buf, KindGone, GoneBytes)
	le.PutUint64(buf[8:], g.Session)
	le.PutUint32(buf[16:], g.Epoch)
	le.PutUint32(buf[20:], 0)
	le.PutUint64(buf[24:], g.FromSeq)
	le.PutUint64(buf[32:], g.ToSeq)
	le.PutUint64(buf[40:], g.Oldest)
	return buf[:GoneBytes], nil
}

// DecodeGone validates b as a Gone frame and fills g.
func DecodeGone(b []byte, g *Gone) error {
	hdr, err := checkPrefix(b, GoneBytes, KindGone)
	if err != nil {
		return err
	}
	if len(b) != hdr {
		return ErrTrailing
	}
	if le.Uint16(b[6:]) != 0 || le.Uint32(b[20:]) != 0 {
		return ErrFlags
	}
	g.Session = le.Uint64(b[8:])
	g.Epoch = le.Uint32(b[16:])
	g.FromSeq = le.Uint64(b[24:])
	g.ToSeq = le.Uint64(b[32:])
	g.Oldest = le.Uint64(b[40:])
	if g.FromSeq == 0 {
		return ErrZeroSeq
	}
	if g.ToSeq < g.FromSeq {
		return ErrNakRange
	}
	return nil
}
