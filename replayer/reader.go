package replayer

import (
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"slices"

	"github.com/seqd/seqd/internal/vfs"
)

// Reader reads a Store's frames from seq From on, from its own goroutine,
// while the Store's goroutine goes on appending: it opens the segment
// files read-only, reads each one up to the Store's published Tip, and
// follows new segments as they roll. It is how a rewind is served (one
// Reader per rewind), and it never touches the Store itself.
//
// A Reader is used by one goroutine. Next returns runs of whole frames,
// each checked (length, CRC-32C, order), as views of the Reader's buffer:
// reading allocates nothing per frame (it allocates when it opens a
// segment).
type Reader struct {
	tip  *Tip
	from uint64
	buf  []byte
	err  error

	positioned bool
	oldest     uint64
	ord        uint64   // segment being read
	f          vfs.File // segment ord, read-only
	path       string
	boff       int64 // file offset of buf[0]
	bn         int   // valid bytes in buf
	rpos       int   // next frame in buf
	lastFirst  uint64
	lastSeq    uint64 // last seq of the newest packet returned
	lastEpoch  uint32 // epoch of the newest packet returned
}

// restarts reports whether pkt, whose first seq fs lies below the
// previous packet's, is an epoch restart as the Store writes one
// (store_epoch.go): the first packet of a newer epoch, at that epoch's
// start. Anything else going back is corruption.
func (r *Reader) restarts(pkt []byte, epoch uint32, fs uint64) bool {
	return epoch > r.lastEpoch && fs == le.Uint64(pkt[48:])
}

// NextSeq is the seq after the newest packet returned (from, before any).
func (r *Reader) NextSeq() uint64 {
	if r.lastSeq == 0 {
		return r.from
	}
	return r.lastSeq + 1
}

// ReaderBufferBytes is the default read buffer of a Reader: large reads
// keep a rewind at disk (or page cache) speed.
const ReaderBufferBytes = 1 << 20

// NewReader returns a Reader of the store behind t serving every packet
// that carries a record of seq from or later (from 0 means 1), oldest
// first. bufBytes sizes its read buffer (0: ReaderBufferBytes; at least a
// largest frame). It reads nothing yet.
func NewReader(t *Tip, from uint64, bufBytes int) *Reader {
	if bufBytes <= 0 {
		bufBytes = ReaderBufferBytes
	}
	bufBytes = max(bufBytes, FrameHeaderBytes+t.maxPacket)
	return &Reader{tip: t, from: max(from, 1), buf: make([]byte, bufBytes)}
}

// Oldest is the first seq of the oldest segment, known once Next
// positioned the Reader (0 before).
func (r *Reader) Oldest() uint64 { return r.oldest }

// Err is the error that stopped the Reader, if any.
func (r *Reader) Err() error { return r.err }

// Close releases the open segment file.
func (r *Reader) Close() error {
	if r.f == nil {
		return nil
	}
	err := r.f.Close()
	r.f = nil
	if r.err == nil {
		r.err = ErrClosed
	}
	return err
}

// Next returns the next run of whole frames (the segment frame layout of
// doc.go: crc, length, firstSeq, packet), consecutive in the stream,
// valid until the next call; an empty run and no error when the Reader
// is at the tip (the caller waits and calls again: see Tip.Closed). The
// first packets returned are the first that carry a record of from or
// later. Errors are sticky: ErrGone (from lies below the oldest seq
// held), a *Corruption (a frame that fails its checks; nothing at or
// after it is returned), or an I/O error.
func (r *Reader) Next() ([]byte, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.positioned {
		ok, err := r.position()
		if err != nil || !ok {
			return nil, err
		}
	}
	for {
		run, err := r.frames()
		if err != nil || len(run) > 0 {
			return run, err
		}
		more, err := r.more()
		if err != nil || !more {
			return nil, err
		}
	}
}

// frames returns the whole frames buffered from rpos on, skipping those
// that end before from, and moves rpos past them.
func (r *Reader) frames() ([]byte, error) {
	i, first := r.rpos, -1
	for i+FrameHeaderBytes <= r.bn {
		b := r.buf[i:r.bn]
		n, err := frameLen(b, r.tip.maxPacket)
		if err != nil {
			if first >= 0 {
				break // serve what precedes it first
			}
			return nil, r.corrupt(i, err)
		}
		if n > len(b) {
			break
		}
		pkt := b[FrameHeaderBytes:n]
		info := packetInfo(pkt)
		epoch := packetEpoch(pkt)
		if cut := info.FirstSeq >= r.tip.cutFrom(epoch); cut || (first < 0 && info.LastSeq() < r.from) {
			// Before from, or a deposed primary's packet above its
			// epoch's cut (never served, as by Store.Range): skip it, at
			// the start of a run only so that a run stays whole frames
			// back to back.
			if first >= 0 {
				break
			}
			i += n
			r.rpos = i
			continue
		}
		err = nil
		if _, cerr := checkFrame(b[:n]); cerr != nil {
			err = cerr
		} else if fs := le.Uint64(b[8:]); fs != info.FirstSeq || le.Uint64(pkt[8:]) != r.tip.Session() ||
			(fs < r.lastFirst && !r.restarts(pkt, epoch, fs)) {
			err = errFrameSeq
		}
		if err != nil {
			if first >= 0 {
				break // serve what precedes it first
			}
			return nil, r.corrupt(i, err)
		}
		fs := info.FirstSeq
		r.lastFirst, r.lastSeq, r.lastEpoch = fs, info.LastSeq(), epoch
		if first < 0 {
			first = i
		}
		i += n
	}
	if first < 0 {
		return nil, nil
	}
	r.rpos = i
	return r.buf[first:i], nil
}

// more reads more of the current segment, up to the tip, or moves to the
// next segment once this one is complete; false when at the tip.
func (r *Reader) more() (bool, error) {
	pord, poff := unpackPosition(r.tip.pos.Load())
	end := r.boff + int64(r.bn) // file offset read up to
	if r.ord == pord && end >= poff {
		return false, nil
	}
	// Keep the partial frame at the end, read after it.
	if r.rpos > 0 {
		copy(r.buf, r.buf[r.rpos:r.bn])
		r.boff += int64(r.rpos)
		r.bn -= r.rpos
		r.rpos = 0
	}
	want := len(r.buf) - r.bn
	if r.ord == pord {
		want = int(min(int64(want), poff-end))
	}
	got, err := r.f.ReadAt(r.buf[r.bn:r.bn+want], end)
	r.bn += got
	if got > 0 {
		return true, nil
	}
	if err != nil && !errors.Is(err, io.EOF) {
		r.err = fmt.Errorf("replayer: read %s: %w", r.path, err)
		return false, r.err
	}
	if r.ord == pord {
		// The file ends before the published position: changed under us.
		return false, r.corrupt(r.bn, errShortFrame)
	}
	// Segment ord is complete (a later one was published): anything left
	// is a frame cut short.
	if r.bn > 0 {
		return false, r.corrupt(0, errShortFrame)
	}
	return true, r.open(r.ord + 1)
}

// position finds the segment holding from among those published; false
// when nothing is published yet.
func (r *Reader) position() (bool, error) {
	pord, _ := unpackPosition(r.tip.pos.Load())
	if pord == 0 {
		return false, nil
	}
	ents, err := r.tip.fs.ReadDir(r.tip.dir)
	if err != nil {
		r.err = fmt.Errorf("replayer: reader: %w", err)
		return false, r.err
	}
	var ords []uint64
	for _, e := range ents {
		if o, ok := parseSegmentName(e.Name()); ok && o <= pord {
			ords = append(ords, o)
		}
	}
	slices.Sort(ords)
	// The segments from the newest published one down to the first
	// consecutive one are served; the newest whose first seq lies below
	// from holds the first packet wanted (a packet may start with the
	// later fragments of a message begun in the previous segment).
	lo := len(ords) - 1
	for lo > 0 && ords[lo-1] == ords[lo]-1 {
		lo--
	}
	if len(ords) == 0 || ords[len(ords)-1] != pord {
		r.err = fmt.Errorf("%w: segment %s missing", ErrCorrupt, segmentName(pord))
		return false, r.err
	}
	pick := -1
	for i := len(ords) - 1; i >= lo; i-- {
		h, err := readSegmentHeader(r.tip.fs, filepath.Join(r.tip.dir, segmentName(ords[i])))
		if err != nil {
			r.err = err
			return false, err
		}
		if i == lo {
			r.oldest = h.FirstSeq
		}
		if h.FirstSeq < r.from {
			pick = i
			break
		}
	}
	if pick < 0 {
		if r.oldest > r.from {
			r.err = fmt.Errorf("%w: seq %d (oldest held %d)", ErrGone, r.from, r.oldest)
			return false, r.err
		}
		pick = lo
	}
	if r.oldest == 0 {
		h, err := readSegmentHeader(r.tip.fs, filepath.Join(r.tip.dir, segmentName(ords[lo])))
		if err != nil {
			r.err = err
			return false, err
		}
		r.oldest = h.FirstSeq
	}
	if err := r.open(ords[pick]); err != nil {
		return false, err
	}
	r.positioned = true
	return true, nil
}

// open switches to segment ordinal, checking its header.
func (r *Reader) open(ordinal uint64) error {
	if r.f != nil {
		r.f.Close()
		r.f = nil
	}
	path := filepath.Join(r.tip.dir, segmentName(ordinal))
	f, err := r.tip.fs.Open(path)
	if err != nil {
		r.err = fmt.Errorf("replayer: reader: %w", err)
		return r.err
	}
	var hb [SegmentHeaderBytes]byte
	var h segmentHeader
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		f.Close()
		r.err = &Corruption{File: path, Reason: "segment header: " + err.Error()}
		return r.err
	}
	if err := decodeSegmentHeader(hb[:], &h); err != nil || h.Ordinal != ordinal || h.Session != r.tip.Session() {
		f.Close()
		reason := "segment header names another segment or session"
		if err != nil {
			reason = err.Error()
		}
		r.err = &Corruption{File: path, Seq: h.FirstSeq, Reason: reason}
		return r.err
	}
	r.f, r.path, r.ord = f, path, ordinal
	r.boff, r.bn, r.rpos = SegmentHeaderBytes, 0, 0
	return nil
}

// readSegmentHeader reads and checks the header of the segment at path.
func readSegmentHeader(fsys vfs.FS, path string) (segmentHeader, error) {
	var h segmentHeader
	f, err := fsys.Open(path)
	if err != nil {
		return h, fmt.Errorf("replayer: reader: %w", err)
	}
	defer f.Close()
	var hb [SegmentHeaderBytes]byte
	if _, err := f.ReadAt(hb[:], 0); err != nil {
		return h, &Corruption{File: path, Reason: "segment header: " + err.Error()}
	}
	if err := decodeSegmentHeader(hb[:], &h); err != nil {
		return h, &Corruption{File: path, Reason: err.Error()}
	}
	return h, nil
}

// corrupt makes the frame at buffer index i the Reader's sticky
// Corruption.
func (r *Reader) corrupt(i int, cause error) error {
	seq := r.lastFirst
	if i+FrameHeaderBytes <= r.bn {
		seq = le.Uint64(r.buf[i+8:])
	}
	r.err = &Corruption{File: r.path, Offset: r.boff + int64(i), Seq: seq, Reason: cause.Error()}
	return r.err
}
