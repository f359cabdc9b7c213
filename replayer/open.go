package replayer

import (
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"slices"
	"strings"

	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/wire"
)

// Recovery is what Open found, for the caller to log: what it serves, the
// torn tail it cut and the corruption it stopped at.
type Recovery struct {
	Segments   int    // segment files served
	Packets    uint64 // packets served
	Bytes      int64  // bytes of the segment files served
	Oldest     uint64 // first seq held (0: empty)
	Contiguous uint64 // highest seq held whole
	// Cuts are the torn tails found: bytes after the last complete frame
	// of the newest segment (a write cut short by a crash). They are
	// removed from the file, unless Config.ReadOnly.
	Cuts []Cut
	// Corrupt is the first frame that fails its checksum or does not
	// decode, when not a torn tail; nothing from it on is served.
	Corrupt *Corruption
}

// Cut is a torn tail: Bytes bytes at Offset of File, after seq AfterSeq.
// Offset 0 means the whole file (a segment with no complete frame).
type Cut struct {
	File     string
	Offset   int64
	Bytes    int64
	AfterSeq uint64
	Reason   string
}

// Corruption names a frame that fails a check inside a segment: Seq is
// the first seq not served (the seq of the frame's first record, as the
// frames before it say).
type Corruption struct {
	File   string
	Offset int64
	Seq    uint64
	Reason string
}

// Error describes the corruption; it matches ErrCorrupt.
func (c *Corruption) Error() string {
	return fmt.Sprintf("replayer: corrupt segment %s at offset %d (seq %d): %s", c.File, c.Offset, c.Seq, c.Reason)
}

// Unwrap makes errors.Is(c, ErrCorrupt) true.
func (c *Corruption) Unwrap() error { return ErrCorrupt }

// String is one line for a log.
func (r *Recovery) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "store: %d segments, %d packets, %d bytes, seqs %d..%d", r.Segments, r.Packets, r.Bytes, r.Oldest, r.Contiguous)
	for _, c := range r.Cuts {
		fmt.Fprintf(&b, "; cut torn tail %s: %d bytes at offset %d after seq %d (%s)", filepath.Base(c.File), c.Bytes, c.Offset, c.AfterSeq, c.Reason)
	}
	if r.Corrupt != nil {
		fmt.Fprintf(&b, "; CORRUPT %s at offset %d, seq %d (%s): nothing from it on is served",
			filepath.Base(r.Corrupt.File), r.Corrupt.Offset, r.Corrupt.Seq, r.Corrupt.Reason)
	}
	return b.String()
}

// Open opens (or, unless ReadOnly, creates) the store of one session in
// dir. It reads every segment, checks every frame, rebuilds the index and
// the epoch table, cuts a torn tail (a crash mid-write), and stops at the
// first corrupt frame: the Recovery says what it found. An error means the
// directory could not be used at all.
func Open(dir string, cfg Config) (*Store, *Recovery, error) {
	if err := cfg.Validate(); err != nil {
		return nil, nil, err
	}
	fsys := cfg.fs()
	if !cfg.ReadOnly {
		if err := fsys.MkdirAll(dir, 0o755); err != nil {
			return nil, nil, fmt.Errorf("replayer: open store: %w", err)
		}
	}
	ents, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, nil, fmt.Errorf("replayer: open store: %w", err)
	}
	var ordinals []uint64
	for _, e := range ents {
		if o, ok := parseSegmentName(e.Name()); ok && e.Type().IsRegular() {
			ordinals = append(ordinals, o)
		}
	}
	slices.Sort(ordinals)
	s := &Store{
		dir:     dir,
		fs:      fsys,
		cfg:     cfg,
		session: cfg.Session,
		wbuf:    make([]byte, 0, writeBufferBytes(cfg)),
		rbuf:    make([]byte, cfg.ReadBufferBytes),
		rseg:    -1,
		syncCap: math.MaxUint64,
		stopSeg: math.MaxInt,
		out:     make([]byte, 0, cfg.MaxPacketBytes),
		tip:     &Tip{dir: dir, fs: fsys, maxPacket: cfg.MaxPacketBytes},
	}
	rec := &Recovery{}
	sc := &scanner{buf: make([]byte, max(1<<20, cfg.ReadBufferBytes)), maxPacket: cfg.MaxPacketBytes}
	for i, o := range ordinals {
		last := i == len(ordinals)-1
		if i > 0 && o != ordinals[i-1]+1 {
			s.setCorrupt(rec, filepath.Join(dir, segmentName(ordinals[i-1]+1)), 0, fmt.Errorf("segment missing (next found: %s)", segmentName(o)))
			break
		}
		if err := s.load(rec, sc, o, last); err != nil {
			s.Close()
			return nil, nil, err
		}
		if rec.Corrupt != nil {
			break
		}
	}
	if rec.Corrupt == nil && !cfg.ReadOnly && len(s.segs) > 0 {
		s.active = true
		// Appends go on in the newest segment: reserve its blocks as a
		// roll does (blocks a crash left reserved past its end are
		// given back by the next roll or Close).
		seg := &s.segs[len(s.segs)-1]
		seg.prealloc = vfs.Preallocate(seg.f, s.cfg.SegmentBytes) == nil
	}
	rec.Segments = len(s.segs)
	for i := range s.segs {
		rec.Bytes += s.segs[i].size
	}
	rec.Packets = s.stats.Appended
	s.stats = Stats{}
	if s.tail.have {
		rec.Oldest = s.oldest.FirstSeq
	}
	rec.Contiguous = s.tail.contiguous()
	if !cfg.ReadOnly {
		// The previous process may have left pages the disk never got (a
		// crash under SyncNone, or between two fsyncs): make what is served
		// durable before Durable says so. Clean files cost little.
		for i := range s.segs {
			if err := s.segs[i].f.Sync(); err != nil {
				s.Close()
				return nil, nil, fmt.Errorf("replayer: open store: fsync %s: %w", s.segs[i].path, err)
			}
		}
		s.durable = rec.Contiguous
	}
	s.publishTip()
	return s, rec, nil
}

// load opens segment ordinal and adds its good frames to s. An error is a
// failure to use the file at all (not its contents).
func (s *Store) load(rec *Recovery, sc *scanner, ordinal uint64, last bool) error {
	path := filepath.Join(s.dir, segmentName(ordinal))
	open := s.fs.OpenReadWrite
	if s.cfg.ReadOnly {
		open = s.fs.Open
	}
	f, err := open(path)
	if err != nil {
		return fmt.Errorf("replayer: open segment: %w", err)
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return fmt.Errorf("replayer: open segment: %w", err)
	}
	sc.reset(f, fi.Size())
	var h segmentHeader
	herr := sc.header(&h)
	if herr == nil && len(s.segs) == 0 && s.cfg.Session != 0 && h.Session != s.cfg.Session {
		f.Close()
		return fmt.Errorf("%w: %s holds session %d, the config says %d", ErrSession, path, h.Session, s.cfg.Session)
	}
	if herr == nil && (h.Ordinal != ordinal || (s.session != 0 && h.Session != s.session)) {
		herr = fmt.Errorf("segment header names segment %d of session %d, want segment %d of session %d", h.Ordinal, h.Session, ordinal, s.session)
	}
	if herr != nil {
		if last && (errors.Is(herr, errShortHeader) || sc.zeroFrom(0)) {
			return s.cutFile(rec, f, path, fi.Size(), "segment header incomplete: "+herr.Error())
		}
		f.Close()
		s.setCorrupt(rec, path, 0, herr)
		return nil
	}
	s.session = h.Session
	s.segs = append(s.segs, segment{f: f, path: path, ordinal: ordinal, firstSeq: h.FirstSeq, size: SegmentHeaderBytes, reach: s.reach()})
	if last && !s.cfg.ReadOnly {
		// The newest segment takes appends: its index must not grow per
		// packet.
		s.segs[len(s.segs)-1].idx = make([]indexEntry, 0, s.cfg.SegmentBytes/int64(s.cfg.IndexIntervalBytes)+2)
	}
	seg := &s.segs[len(s.segs)-1]
	if h.Epoch != 0 {
		// An epoch-start segment (Store.BeginEpoch): the epoch begins at
		// its first seq, cutting what earlier segments hold from there.
		if err := s.fitsEpochStart(h.Epoch, h.FirstSeq); err != nil {
			s.segs = s.segs[:len(s.segs)-1]
			f.Close()
			s.setCorrupt(rec, path, 0, fmt.Errorf("segment begins epoch %d at seq %d, which the stream before it does not allow: %w", h.Epoch, h.FirstSeq, err))
			return nil
		}
		s.cutTo(h.FirstSeq)
		s.noteEpoch(h.Epoch, h.FirstSeq)
	}
	off := int64(SegmentHeaderBytes)
	for {
		n, pkt, err := sc.frame(off)
		if err == io.EOF {
			break
		}
		if err == nil {
			s.pkt = sc.pkt
			err = s.checkLoaded(seg, off, pkt)
		}
		if err != nil {
			if last && (errors.Is(err, errShortFrame) || sc.zeroFrom(off)) {
				if off == SegmentHeaderBytes && h.Epoch == 0 {
					s.segs = s.segs[:len(s.segs)-1]
					return s.cutFile(rec, f, path, fi.Size(), "no complete frame: "+err.Error())
				}
				return s.cutTail(rec, seg, off, fi.Size(), err)
			}
			seg.written = seg.size
			if off == SegmentHeaderBytes && s.tail.have && s.tail.next() > seg.firstSeq {
				// The segment would start an epoch that cut the stream
				// below the previous segment's tail (its header says
				// where): nothing from its start on is served.
				s.tail = tailState{have: seg.firstSeq > 1, lastSeq: seg.firstSeq - 1, whole: true}
			}
			s.setCorrupt(rec, path, off, err)
			if off == SegmentHeaderBytes && h.Epoch == 0 {
				s.segs = s.segs[:len(s.segs)-1]
				f.Close()
			}
			return nil
		}
		p := &s.pkt
		epoch, start := p.Epoch, p.EpochStart
		_, _, t := scanRecords(p, &s.rec)
		s.held(seg, off, int64(n), packetInfo(pkt), t)
		s.noteEpoch(epoch, start)
		s.stats.Appended++
		off += int64(n)
	}
	seg.written = seg.size
	if off == SegmentHeaderBytes && last && h.Epoch == 0 {
		// A segment that holds no frame: rolled just before a crash (an
		// epoch-start segment is kept: its header is the epoch's row).
		s.segs = s.segs[:len(s.segs)-1]
		return s.cutFile(rec, f, path, fi.Size(), "no frame")
	}
	return nil
}

// checkLoaded checks that the frame at off (decoded into s.pkt) belongs
// here: the session, the segment's first seq, the order.
func (s *Store) checkLoaded(seg *segment, off int64, pkt []byte) error {
	p := &s.pkt
	if p.Session != s.session {
		return fmt.Errorf("packet of session %d in a segment of session %d", p.Session, s.session)
	}
	if off == SegmentHeaderBytes && p.FirstSeq != seg.firstSeq {
		return fmt.Errorf("first packet starts at seq %d, the segment header says %d", p.FirstSeq, seg.firstSeq)
	}
	q := *p
	frag, fragOff, _ := scanRecords(&q, &s.rec)
	if err := s.tail.follows(p.FirstSeq, frag, fragOff); err != nil {
		// An epoch restart is written at the start of a segment only.
		if off != SegmentHeaderBytes || !s.restartsEpoch(p.Epoch, p.EpochStart, p.FirstSeq, frag, fragOff) {
			return fmt.Errorf("packet at seq %d: %w", p.FirstSeq, err)
		}
	}
	return nil
}

// setCorrupt records the first corrupt frame (or segment) found by Open.
func (s *Store) setCorrupt(rec *Recovery, path string, off int64, err error) {
	seq := s.tail.next()
	if !s.tail.have {
		seq = 0
	}
	rec.Corrupt = &Corruption{File: path, Offset: off, Seq: seq, Reason: err.Error()}
	s.corrupt = rec.Corrupt
	s.limit = seq
	if seq == 0 {
		s.limit = 1
	}
}

// cutTail removes the torn tail of seg from off (unless read-only).
func (s *Store) cutTail(rec *Recovery, seg *segment, off, size int64, why error) error {
	rec.Cuts = append(rec.Cuts, Cut{File: seg.path, Offset: off, Bytes: size - off, AfterSeq: s.tail.contiguous(), Reason: why.Error()})
	seg.written = seg.size
	if s.cfg.ReadOnly {
		return nil
	}
	if err := seg.f.Truncate(off); err != nil {
		return fmt.Errorf("replayer: cut torn tail: %w", err)
	}
	if err := seg.f.Sync(); err != nil {
		return fmt.Errorf("replayer: cut torn tail: %w", err)
	}
	return nil
}

// cutFile removes a newest segment that holds no complete frame.
func (s *Store) cutFile(rec *Recovery, f vfs.File, path string, size int64, why string) error {
	f.Close()
	rec.Cuts = append(rec.Cuts, Cut{File: path, Bytes: size, AfterSeq: s.tail.contiguous(), Reason: why})
	if s.cfg.ReadOnly {
		return nil
	}
	if err := s.fs.Remove(path); err != nil {
		return fmt.Errorf("replayer: cut empty segment: %w", err)
	}
	return syncDir(s.fs, s.dir)
}

// scanner reads a segment file front to back in large chunks for Open.
type scanner struct {
	r         io.ReaderAt
	size      int64
	buf       []byte
	boff      int64
	bn        int
	maxPacket int
	pkt       wire.Packet
}

func (sc *scanner) reset(r io.ReaderAt, size int64) {
	sc.r, sc.size, sc.boff, sc.bn = r, size, 0, 0
}

// ensure makes bytes [off, off+n) available in buf (n <= len(buf), and
// off+n <= size).
func (sc *scanner) ensure(off int64, n int) ([]byte, error) {
	if off < sc.boff || off+int64(n) > sc.boff+int64(sc.bn) {
		want := int64(len(sc.buf))
		if rest := sc.size - off; rest < want {
			want = rest
		}
		got, err := sc.r.ReadAt(sc.buf[:want], off)
		sc.boff, sc.bn = off, got
		if got < n {
			if err == nil || err == io.EOF {
				err = errShortFrame
			}
			return nil, err
		}
	}
	return sc.buf[off-sc.boff : off-sc.boff+int64(n)], nil
}

func (sc *scanner) header(h *segmentHeader) error {
	if sc.size < SegmentHeaderBytes {
		return errShortHeader
	}
	b, err := sc.ensure(0, SegmentHeaderBytes)
	if err != nil {
		return err
	}
	return decodeSegmentHeader(b, h)
}

// frame decodes the frame at off into sc.pkt; io.EOF at the end of file.
func (sc *scanner) frame(off int64) (int, []byte, error) {
	if off == sc.size {
		return 0, nil, io.EOF
	}
	if off+FrameHeaderBytes > sc.size {
		return 0, nil, errShortFrame
	}
	b, err := sc.ensure(off, FrameHeaderBytes)
	if err != nil {
		return 0, nil, err
	}
	n, err := frameLen(b, sc.maxPacket)
	if err != nil {
		return 0, nil, err
	}
	if off+int64(n) > sc.size {
		return 0, nil, errShortFrame
	}
	if b, err = sc.ensure(off, n); err != nil {
		return 0, nil, err
	}
	return decodeFrame(b, sc.maxPacket, &sc.pkt)
}

// zeroFrom reports whether every byte from off to the end of the file is
// zero: a tail the file system extended but the crash never filled.
func (sc *scanner) zeroFrom(off int64) bool {
	for off < sc.size {
		n := min(int64(len(sc.buf)), sc.size-off)
		b, err := sc.ensure(off, int(n))
		if err != nil {
			return false
		}
		for _, c := range b {
			if c != 0 {
				return false
			}
		}
		off += n
	}
	return true
}
