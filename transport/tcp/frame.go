package tcp

import (
	"encoding/binary"
	"io"

	"github.com/seqd/seqd/wire"
)

// On the stream every frame is preceded by its length, a u32 little endian.
const lenPrefixBytes = 4

// appendFrame appends frame with its length prefix to dst.
func appendFrame(dst, frame []byte) []byte {
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(frame)))
	return append(dst, frame...)
}

// appendSigned appends frame with its length prefix to dst, signed by
// auth (wire.Auth.Sign: the trailer after it, counted in the prefix); with
// no auth it is appendFrame. On an error dst is returned unchanged.
func appendSigned(dst, frame []byte, auth *wire.Auth) ([]byte, error) {
	if auth == nil {
		return appendFrame(dst, frame), nil
	}
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(frame)+wire.AuthTrailerBytes))
	dst = append(dst, frame...)
	dst = append(dst, zeroTrailer[:]...)
	if _, err := auth.Sign(dst[start+lenPrefixBytes:], len(frame)); err != nil {
		return dst[:start], err
	}
	return dst, nil
}

var zeroTrailer [wire.AuthTrailerBytes]byte

// frameReader splits a byte stream into length-prefixed frames. One fill
// (one read syscall) usually yields many frames; next hands them out as
// views into the buffer, valid until the following fill.
type frameReader struct {
	buf        []byte
	start, end int // buf[start:end] is read but not yet returned by next
	maxFrame   int
}

func newFrameReader(bufBytes, maxFrame int) *frameReader {
	return &frameReader{buf: make([]byte, bufBytes), maxFrame: maxFrame}
}

// next returns the next complete frame, or nil if the buffer holds none.
// A length above maxFrame is ErrOversizedFrame: the stream cannot be
// trusted past it, so the caller closes the connection.
func (f *frameReader) next() ([]byte, error) {
	rec, err := f.nextRecord()
	if rec == nil {
		return nil, err
	}
	return rec[lenPrefixBytes:], nil
}

// nextRecord is next with the frame's length prefix in front of it: the
// caller may overwrite those 4 bytes (Poll puts the sender's Peer there
// for a fault injector, as the inbox does).
func (f *frameReader) nextRecord() ([]byte, error) {
	avail := f.end - f.start
	if avail < lenPrefixBytes {
		return nil, nil
	}
	n := binary.LittleEndian.Uint32(f.buf[f.start:])
	if uint64(n) > uint64(f.maxFrame) {
		return nil, ErrOversizedFrame
	}
	total := lenPrefixBytes + int(n)
	if avail < total {
		return nil, nil
	}
	rec := f.buf[f.start : f.start+total : f.start+total]
	f.start += total
	return rec, nil
}

// fill reads once from r. Call it only after next returned nil, nil.
func (f *frameReader) fill(r io.Reader) (int, error) {
	n, err := r.Read(f.room())
	f.end += n
	return n, err
}

// room returns the free end of the buffer for the next read, whose count
// the caller adds to end. Call it only after next returned nil, nil: it
// moves the partial frame left over to the front of the buffer (so reads
// stay large) and grows the buffer once if that frame cannot fit.
func (f *frameReader) room() []byte {
	if f.start > 0 {
		f.end = copy(f.buf, f.buf[f.start:f.end])
		f.start = 0
	}
	if f.end >= lenPrefixBytes {
		// The header is validated by next before room is called.
		need := lenPrefixBytes + int(binary.LittleEndian.Uint32(f.buf))
		if need > len(f.buf) && need <= lenPrefixBytes+f.maxFrame {
			grown := make([]byte, need)
			copy(grown, f.buf[:f.end])
			f.buf = grown
		}
	}
	return f.buf[f.end:]
}
