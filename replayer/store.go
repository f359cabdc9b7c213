package replayer

import (
	"fmt"
	"math"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/internal/invariants"
	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/wire"
)

// A Store answers NAKs through the sequencer's repair policy.
var _ sequencer.RetransmitStore = (*Store)(nil)

// Store is one session's stream in append-only segment files (see doc.go
// for the format). It implements sequencer.RetransmitStore, so the
// sequencer's repair policy answers NAKs from it as from the Core's ring,
// and adds what a replayer needs: Append with errors, the epoch of each
// seq, the highest contiguous seq, durability (Sync, Tick, Durable).
//
// A Store has no goroutines and no locks: one goroutine uses it at a time,
// and the caller drives time with Tick.
type Store struct {
	dir     string
	fs      vfs.FS // cfg.FS, or vfs.Default
	cfg     Config
	session uint64

	segs   []segment // in ordinal order; the last is the active one
	active bool      // segs[len-1] takes appends (false: read-only, corrupt)

	// Write path: frames wait in wbuf until a flush writes them at the
	// active segment's written offset.
	wbuf     []byte
	pendSeq  uint64 // first seq of the first frame in wbuf
	unsynced int64  // bytes appended since the last fsync
	now      int64  // last Tick (mono ns)
	lastSync int64  // mono ns of the last fsync
	syncOut  bool   // a StartSync request is out
	syncCap  uint64 // FinishSync makes no seq above it durable (cutDurable)
	durable  uint64 // Contiguous() at the last fsync
	// With SyncInShell, a roll leaves the fsyncs of the segment it sealed
	// (sealedF) and of the directory that got the new one (sealedDir) to
	// the shell's next StartSync request, instead of running them inline
	// on the appending goroutine.
	sealedF   vfs.File
	sealedDir bool

	tail   tailState
	oldest sequencer.PacketInfo
	newest sequencer.PacketInfo
	epochs []Epoch

	// limit, when non-zero, is the first seq not served (a corruption);
	// stopSeg and stopOff are where the corrupt frame found by a read
	// lies: nothing from there on is read (frames of a restarted epoch
	// may lie after it with seqs below limit).
	limit   uint64
	stopSeg int
	stopOff int64
	corrupt *Corruption
	failed  error
	lastErr error // the last error Put swallowed
	// onAppend, if set, sees every packet appended (OnAppend).
	onAppend func(pkt []byte)
	closed   bool

	// Read path: rbuf caches bytes [roff, roff+rn) of segment rseg; out is
	// the copy handed to a PacketFunc (which may patch it).
	rbuf []byte
	rseg int
	roff int64
	rn   int
	out  []byte
	// fillBytes is the size of the next read (see fill).
	fillBytes int

	// tip is what other goroutines read (Reader): published after each
	// write.
	tip *Tip

	pkt   wire.Packet // scratch
	rec   wire.Record
	walk  recordWalk // Records
	stats Stats
}

// segment is one file and its sparse index.
type segment struct {
	f        vfs.File
	path     string
	ordinal  uint64
	firstSeq uint64
	size     int64 // logical end: bytes written plus bytes waiting in wbuf
	written  int64 // bytes in the file
	// prealloc: the file's blocks are reserved up to SegmentBytes
	// (vfs.Preallocate), so that appends skip the file system's block
	// reservation; the roll that seals it, or Close, gives the ones past
	// its end back (release).
	prealloc bool
	idx      []indexEntry
	lastIdx  int64                // offset of the newest index entry
	last     sequencer.PacketInfo // newest frame's packet
	tail     tailState            // after the newest frame
	// reach is the highest seq of any frame in this segment or an
	// earlier one: it never decreases along the segments, even where an
	// epoch restart made the frames' seqs go back (store_epoch.go).
	reach uint64
}

// indexEntry: the frame at off starts with seq firstSeq.
type indexEntry struct {
	off      int64
	firstSeq uint64
}

// Epoch is one row of the epoch table: epoch Epoch starts at seq Start
// (the previous epoch's cut plus one), taken from the EpochStart of the
// packet headers.
type Epoch struct {
	Epoch uint32
	Start uint64
}

// Stats are the Store's counters since Open.
type Stats struct {
	Appended      uint64 // packets appended
	AppendedBytes uint64 // packet bytes appended
	Refused       uint64 // Append (or Put) calls that returned an error
	Writes        uint64 // write system calls
	Fsyncs        uint64
	Rolls         uint64 // segments started
}

// tailState is what the newest packet held says about the next one.
type tailState struct {
	have    bool
	lastSeq uint64
	whole   bool   // the last record ends its message
	fragEnd uint32 // when !whole: end offset of the last fragment held
}

// follows checks that a packet starting with firstSeq (and, when frag, a
// fragment at offset off) is the next one after t: the stream is held
// gap-free.
func (t *tailState) follows(firstSeq uint64, frag bool, off uint32) error {
	switch {
	case !t.have:
		return nil
	case t.whole && firstSeq == t.lastSeq+1 && (!frag || off == 0):
		return nil
	case !t.whole && firstSeq == t.lastSeq && frag && off == t.fragEnd:
		return nil
	case firstSeq < t.lastSeq, firstSeq == t.lastSeq && (t.whole || off < t.fragEnd):
		return ErrDuplicate
	}
	return ErrGap
}

// contiguous is the highest seq held whole.
func (t *tailState) contiguous() uint64 {
	if !t.have {
		return 0
	}
	if t.whole {
		return t.lastSeq
	}
	return t.lastSeq - 1
}

// next is the seq of the first record after t.
func (t *tailState) next() uint64 {
	if t.whole {
		return t.lastSeq + 1
	}
	return t.lastSeq
}

// scanRecords reads p's records (p is consumed) and returns the first
// record's fragment offset and whether it is a fragment, and the tail
// state after the packet. A packet DecodePacket decoded gives its last
// record without the walk over the ones between (Packet.Last).
func scanRecords(p *wire.Packet, r *wire.Record) (frag bool, off uint32, t tailState) {
	if !p.Next(r) {
		return false, 0, t
	}
	frag, off = r.Fragment(), r.Offset
	if p.Count > 1 && !p.Last(r) {
		for p.Next(r) {
		}
		// r is the last record (Next leaves it as it was at the end).
	}
	end := r.Offset + uint32(len(r.Payload))
	return frag, off, tailState{have: true, lastSeq: r.Seq, whole: !r.Fragment() || end == r.Total, fragEnd: end}
}

// Append stores a published data packet as it is (its bytes are resent as
// they are). Packets must follow each other without a gap: the first
// record of pkt is the one after the newest held (ErrGap, ErrDuplicate
// otherwise). The store copies pkt. Append allocates nothing except when
// a segment rolls or the epoch changes.
func (s *Store) Append(pkt []byte) error {
	if err := s.append(pkt); err != nil {
		s.stats.Refused++
		return err
	}
	return nil
}

// writable says why the store takes no write now, nil when it does.
func (s *Store) writable() error {
	switch {
	case s.closed:
		return ErrClosed
	case s.failed != nil:
		return ErrFailed
	case s.corrupt != nil:
		return ErrCorrupt
	case s.cfg.ReadOnly:
		return ErrReadOnly
	}
	return nil
}

func (s *Store) append(pkt []byte) error {
	if err := s.writable(); err != nil {
		return err
	}
	if len(pkt) > s.cfg.MaxPacketBytes {
		return ErrTooLarge
	}
	p := &s.pkt
	if err := wire.DecodePacket(pkt, p); err != nil {
		return err
	}
	if p.Kind != wire.KindData || p.Count == 0 {
		return ErrNotData
	}
	if s.session != 0 && p.Session != s.session {
		return ErrSession
	}
	epoch, epochStart, firstSeq := p.Epoch, p.EpochStart, p.FirstSeq
	frag, off, t := scanRecords(p, &s.rec)
	restart := false
	if err := s.tail.follows(firstSeq, frag, off); err != nil {
		if !s.restartsEpoch(epoch, epochStart, firstSeq, frag, off) {
			return err
		}
		// A new epoch cut the stream below what is held: it starts a
		// segment of its own (store_epoch.go).
		restart = true
	}
	s.session = s.pkt.Session
	n := FrameHeaderBytes + len(pkt)
	if restart || !s.active || s.segs[len(s.segs)-1].size+int64(n) > s.cfg.SegmentBytes {
		if err := s.roll(firstSeq, 0); err != nil {
			return err
		}
	}
	if len(s.wbuf)+n > cap(s.wbuf) {
		if err := s.flush(); err != nil {
			return err
		}
	}
	seg := &s.segs[len(s.segs)-1]
	if len(s.wbuf) == 0 {
		s.pendSeq = firstSeq
	}
	at := len(s.wbuf)
	s.wbuf = s.wbuf[:at+n]
	putFrame(s.wbuf[at:], pkt, firstSeq)
	info := packetInfo(pkt)
	s.held(seg, seg.size, int64(n), info, t)
	s.noteEpoch(epoch, epochStart)
	if restart {
		s.cutDurable(epochStart - 1)
	}
	s.stats.Appended++
	s.stats.AppendedBytes += uint64(len(pkt))
	s.unsynced += int64(n)
	if invariants.Enabled {
		s.checkWrite()
	}
	switch {
	case s.cfg.Sync == SyncAlways,
		s.cfg.Sync == SyncInterval && !s.cfg.SyncInShell && s.unsynced >= s.cfg.SyncBytes:
		if err := s.sync(); err != nil {
			return err
		}
	}
	if s.onAppend != nil {
		s.onAppend(pkt)
	}
	return nil
}

// OnAppend makes f see every packet appended from now on, on the
// appending goroutine, as soon as Append took it: before it reaches the
// file (a Reader sees it only after the next Tick). f must not keep pkt
// nor call the Store. A bridge's sending end forwards the stream so,
// without waiting for the tip. Call it before the Store is used (before
// a Service's Run); nil stops it.
func (s *Store) OnAppend(f func(pkt []byte)) { s.onAppend = f }

// held records a frame of n bytes at off in seg (appended or found by
// Open).
func (s *Store) held(seg *segment, off, n int64, info sequencer.PacketInfo, t tailState) {
	if len(seg.idx) == 0 || off-seg.lastIdx >= int64(s.cfg.IndexIntervalBytes) {
		seg.idx = append(seg.idx, indexEntry{off: off, firstSeq: info.FirstSeq})
		seg.lastIdx = off
	}
	seg.size = off + n
	seg.last = info
	seg.reach = max(seg.reach, info.LastSeq())
	seg.tail = t
	if !s.tail.have {
		s.oldest = info
	}
	s.newest = info
	s.tail = t
	if invariants.Enabled {
		s.checkIndex(seg)
	}
}

// reach is the reach of the newest segment (0 when none).
func (s *Store) reach() uint64 {
	if k := len(s.segs); k > 0 {
		return s.segs[k-1].reach
	}
	return 0
}

// noteEpoch extends the epoch table when a packet names a newer epoch.
func (s *Store) noteEpoch(epoch uint32, start uint64) {
	if k := len(s.epochs); k == 0 || epoch > s.epochs[k-1].Epoch {
		s.epochs = append(s.epochs, Epoch{Epoch: epoch, Start: start})
		s.tip.publishEpochs(s.epochs)
	}
}

// roll seals the active segment (flushed, and fsynced unless SyncNone)
// and starts segment ordinal+1 whose first frame starts with firstSeq;
// epoch, when not 0, makes it an epoch-start segment (BeginEpoch).
func (s *Store) roll(firstSeq uint64, epoch uint32) error {
	ordinal := uint64(1)
	if k := len(s.segs); k > 0 {
		ordinal = s.segs[k-1].ordinal + 1
		if s.active {
			if err := s.flush(); err != nil {
				return err
			}
			s.release(&s.segs[k-1])
			switch {
			case s.deferSyncs() && s.sealedF == nil:
				// The shell's next request fsyncs it (StartSync): an
				// inline fsync of a whole segment's dirty pages
				// stalled the appending loop for up to 150 ms.
				s.sealedF = s.segs[k-1].f
			case s.cfg.Sync != SyncNone:
				if err := s.sync(); err != nil {
					return err
				}
			}
		}
	}
	path := filepath.Join(s.dir, segmentName(ordinal))
	f, err := s.fs.Create(path, 0o644)
	if err != nil {
		return s.fail(fmt.Errorf("replayer: create segment: %w", err))
	}
	switch {
	case s.deferSyncs():
		s.sealedDir = true
	case s.cfg.Sync != SyncNone:
		if err := syncDir(s.fs, s.dir); err != nil {
			f.Close()
			return s.fail(err)
		}
	}
	h := segmentHeader{Session: s.session, Ordinal: ordinal, FirstSeq: firstSeq, Created: time.Now().UnixNano(), Epoch: epoch}
	if len(s.wbuf) != 0 {
		panic("replayer: roll with bytes waiting for the previous segment")
	}
	s.wbuf = s.wbuf[:SegmentHeaderBytes]
	putSegmentHeader(s.wbuf, &h)
	s.pendSeq = firstSeq
	s.unsynced += SegmentHeaderBytes
	s.segs = append(s.segs, segment{
		f: f, path: path, ordinal: ordinal, firstSeq: firstSeq, size: SegmentHeaderBytes, reach: s.reach(),
		idx:      make([]indexEntry, 0, s.cfg.SegmentBytes/int64(s.cfg.IndexIntervalBytes)+2),
		prealloc: vfs.Preallocate(f, s.cfg.SegmentBytes) == nil,
	})
	s.active = true
	s.stats.Rolls++
	return nil
}

// release gives back the blocks reserved past seg's end (a Truncate to
// its size frees them); seg's frames are all written (flush). A failure
// leaves them reserved: disk space until the segment is removed, not
// the store's failure (its bytes are untouched).
func (s *Store) release(seg *segment) {
	if seg.prealloc {
		seg.prealloc = false
		_ = seg.f.Truncate(seg.written)
	}
}

// flush writes the waiting frames to the active segment.
func (s *Store) flush() error {
	if len(s.wbuf) == 0 {
		return nil
	}
	if s.failed != nil {
		return ErrFailed
	}
	seg := &s.segs[len(s.segs)-1]
	n, err := seg.f.WriteAt(s.wbuf, seg.written)
	s.stats.Writes++
	if err != nil {
		return s.fail(fmt.Errorf("replayer: write %s at %d: %w", seg.path, seg.written+int64(n), err))
	}
	seg.written += int64(n)
	s.wbuf = s.wbuf[:0]
	s.publishTip()
	return nil
}

// deferSyncs says whether a roll leaves its fsyncs to the shell.
func (s *Store) deferSyncs() bool { return s.cfg.Sync == SyncInterval && s.cfg.SyncInShell }

// syncSealed runs the fsyncs a roll left to the shell, inline.
func (s *Store) syncSealed() error {
	if s.sealedF != nil {
		if err := s.sealedF.Sync(); err != nil {
			return s.fail(fmt.Errorf("replayer: fsync a sealed segment: %w", err))
		}
		s.sealedF = nil
	}
	if s.sealedDir {
		if err := syncDir(s.fs, s.dir); err != nil {
			return s.fail(err)
		}
		s.sealedDir = false
	}
	return nil
}

// sync flushes and fsyncs the active segment (and what a roll left).
func (s *Store) sync() error {
	if err := s.flush(); err != nil {
		return err
	}
	if err := s.syncSealed(); err != nil {
		return err
	}
	if s.unsynced == 0 || !s.active {
		return nil
	}
	if err := s.segs[len(s.segs)-1].f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the dirty pages:
		// nothing written since the last good fsync can be trusted.
		return s.fail(fmt.Errorf("replayer: fsync %s: %w", s.segs[len(s.segs)-1].path, err))
	}
	s.stats.Fsyncs++
	s.unsynced = 0
	s.lastSync = s.now
	s.durable = max(s.durable, s.tail.contiguous())
	return nil
}

// SyncDue reports whether the interval policy wants an fsync now: bytes
// wait and SyncInterval has passed since the last one (at the last Tick),
// or SyncBytes wait. With Config.SyncInShell the shell asks it after
// Append and Tick and runs the fsync with StartSync.
func (s *Store) SyncDue() bool {
	return s.cfg.Sync == SyncInterval && s.unsynced > 0 && (s.now-s.lastSync >= int64(s.cfg.SyncInterval) || s.unsynced >= s.cfg.SyncBytes)
}

// SyncRequest is an fsync of the active segment that the shell runs off
// the store's goroutine (Run), so that appends go on meanwhile; it makes
// durable every seq up to Seq.
type SyncRequest struct {
	f      vfs.File
	sealed vfs.File // the segment a roll sealed, fsynced first (nil: none)
	dir    string   // the directory to fsync after a roll created a segment in it ("": none)
	fs     vfs.FS
	Seq    uint64
}

// Run fsyncs; it is safe to call from another goroutine while the store
// appends (the segment files stay open until Close). After a roll it
// fsyncs the sealed segment and the directory too, in that order, so that
// Seq is durable only once every byte below it is.
func (r SyncRequest) Run() error {
	if r.sealed != nil {
		if err := r.sealed.Sync(); err != nil {
			return err
		}
	}
	if err := r.f.Sync(); err != nil {
		return err
	}
	if r.dir != "" {
		return syncDir(r.fs, r.dir)
	}
	return nil
}

// StartSync hands the waiting frames to the OS and returns an fsync for
// the shell to Run, then report with FinishSync; false when there is
// nothing to sync or a request is still out (one at a time). Earlier
// segments were fsynced when they rolled (unless SyncNone), or their
// fsync rides in the first request after the roll (SyncInShell).
func (s *Store) StartSync() (SyncRequest, bool) {
	if s.syncOut || s.closed || s.cfg.ReadOnly || !s.active || s.unsynced == 0 {
		return SyncRequest{}, false
	}
	if err := s.flush(); err != nil {
		return SyncRequest{}, false // Err says why
	}
	s.syncOut, s.syncCap = true, math.MaxUint64
	s.unsynced = 0
	s.lastSync = s.now
	r := SyncRequest{f: s.segs[len(s.segs)-1].f, sealed: s.sealedF, fs: s.fs, Seq: s.tail.contiguous()}
	if s.sealedDir {
		r.dir = s.dir
	}
	s.sealedF, s.sealedDir = nil, false
	return r, true
}

// FinishSync records the outcome of a StartSync request. A failed fsync
// fails the store (ErrFailed), as an inline one does.
func (s *Store) FinishSync(r SyncRequest, err error) error {
	s.syncOut = false
	if err != nil {
		return s.fail(fmt.Errorf("replayer: fsync: %w", err))
	}
	s.stats.Fsyncs++
	if s.failed == nil && s.corrupt == nil {
		s.durable = max(s.durable, min(r.Seq, s.syncCap))
	}
	s.syncCap = math.MaxUint64
	return nil
}

// cutDurable lowers Durable to seq, the end of what an epoch restart or
// BeginEpoch left held, also for the fsync under way (its Seq counted
// records that are cut now).
func (s *Store) cutDurable(seq uint64) {
	s.durable = min(s.durable, seq)
	if s.syncOut {
		s.syncCap = min(s.syncCap, seq)
	}
}

func (s *Store) fail(err error) error {
	if s.failed == nil {
		s.failed = err
	}
	return err
}

// Tick is the shell's clock (monotonic ns): it hands the waiting frames
// to the operating system and, under SyncInterval, fsyncs when
// SyncInterval has passed since the last fsync. A shell calls it at least
// every SyncInterval while appending.
func (s *Store) Tick(now int64) error {
	if now > s.now {
		s.now = now
	}
	if s.closed || s.cfg.ReadOnly {
		return nil
	}
	if s.cfg.Sync == SyncInterval && !s.cfg.SyncInShell && s.SyncDue() {
		return s.sync()
	}
	return s.flush()
}

// Sync makes everything appended durable now, whatever the policy.
func (s *Store) Sync() error {
	if s.closed || s.cfg.ReadOnly {
		return nil
	}
	return s.sync()
}

// Close syncs (unless read-only) and closes the files. The Store is
// unusable afterwards. A shell using StartSync finishes its request first
// (Run on a closed file fails).
func (s *Store) Close() error {
	if s.closed {
		return nil
	}
	var err error
	if !s.cfg.ReadOnly && s.failed == nil {
		err = s.sync()
		if err == nil && s.active {
			s.release(&s.segs[len(s.segs)-1])
		}
	}
	for i := range s.segs {
		if cerr := s.segs[i].f.Close(); cerr != nil && err == nil {
			err = cerr
		}
	}
	s.closed = true
	s.tip.closed.Store(true)
	s.tip.signal()
	return err
}

// Put stores pkt (sequencer.RetransmitStore). It is Append for callers
// that cannot handle an error: a refused packet is counted in
// Stats.Refused and the error is kept for Err; info is recomputed from
// the packet.
func (s *Store) Put(pkt []byte, _ sequencer.PacketInfo) {
	if err := s.Append(pkt); err != nil && s.failed == nil {
		s.lastErr = err
	}
}

// Oldest describes the oldest packet held (sequencer.RetransmitStore).
func (s *Store) Oldest() (sequencer.PacketInfo, bool) {
	if !s.tail.have {
		return sequencer.PacketInfo{}, false
	}
	return s.oldest, true
}

// Newest describes the newest packet served (sequencer.RetransmitStore).
func (s *Store) Newest() (sequencer.PacketInfo, bool) {
	if !s.tail.have {
		return sequencer.PacketInfo{}, false
	}
	return s.newest, true
}

// Contiguous is the highest seq held whole (0 when none): every seq from
// the oldest held through it can be served.
func (s *Store) Contiguous() uint64 { return s.tail.contiguous() }

// Durable is Contiguous as of the last fsync: the seqs that survive a
// machine crash.
func (s *Store) Durable() uint64 { return s.durable }

// Session is the session held (0 while empty and not configured).
func (s *Store) Session() uint64 { return s.session }

// CheckSession returns nil when the store is empty or holds session, else
// an error wrapping ErrSession that names the directory and both
// sessions: one session per directory. The replayer runs it on the
// stream's first live packet, the cluster's standby on the session the
// failover state names.
func (s *Store) CheckSession(session uint64) error {
	if s.session == 0 || s.session == session {
		return nil
	}
	return fmt.Errorf("%w: %s holds session %d, the stream is session %d (one session per directory: use another --dir)",
		ErrSession, s.dir, s.session, session)
}

// Dir is the store's directory.
func (s *Store) Dir() string { return s.dir }

// Epochs returns the epoch table, oldest first (a copy).
func (s *Store) Epochs() []Epoch { return append([]Epoch(nil), s.epochs...) }

// EpochOf is the epoch of seq: that of the newest epoch starting at or
// before it. False when seq is below the first epoch start known or not
// held.
func (s *Store) EpochOf(seq uint64) (uint32, bool) {
	if !s.tail.have || seq > s.tail.lastSeq || (s.limit != 0 && seq >= s.limit) {
		return 0, false
	}
	return s.epochOf(seq)
}

// epochOf looks seq up in the epoch table.
func (s *Store) epochOf(seq uint64) (uint32, bool) {
	lo, hi := 0, len(s.epochs)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if s.epochs[m].Start <= seq {
			lo = m + 1
		} else {
			hi = m
		}
	}
	if lo == 0 {
		return 0, false
	}
	return s.epochs[lo-1].Epoch, true
}

// Corruption is the corrupt frame found by Open or by a later read, or
// nil.
func (s *Store) Corruption() *Corruption { return s.corrupt }

// Err is the first write failure (the store takes no appends after it),
// else the last error Put swallowed, else nil.
func (s *Store) Err() error {
	if s.failed != nil {
		return s.failed
	}
	return s.lastErr
}

// Stats returns the counters.
func (s *Store) Stats() Stats { return s.stats }

func syncDir(fsys vfs.FS, dir string) error {
	d, err := fsys.OpenDir(dir)
	if err != nil {
		return fmt.Errorf("replayer: sync dir: %w", err)
	}
	err = d.Sync()
	d.Close()
	if err != nil {
		return fmt.Errorf("replayer: sync dir %s: %w", dir, err)
	}
	return nil
}
