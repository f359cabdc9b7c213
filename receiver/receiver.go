package receiver

import (
	"fmt"
	"slices"

	"github.com/seqd/seqd/internal/invariants"
	"github.com/seqd/seqd/wire"
)

// Receiver is the pure receiving state machine (see the package comment).
// It is not safe for concurrent use.
type Receiver struct {
	// Read or written for every packet: together, first.
	next           uint64 // next seq to deliver
	maxStored      uint64 // highest seq ever copied into the ring
	contig         uint64 // every seq in [next, contig] is held whole
	tail           uint64 // highest seq known to exist
	sealed         uint64 // highest seq known to be published whole (all fragments)
	stable         uint64
	now            int64  // sequencer time
	session        uint64 // the session followed
	epochStart     uint64 // first seq of the newest valid epoch
	heard          int64  // local time of the last packet of this session
	released       uint64 // lowest seq whose ring slot the current Ready may still view
	settled        int    // messages of Ready.Deliver that settle has seen
	tried          int    // distinct sources that answered Gone for nakFrom (goneSrcs)
	epoch          uint32 // newest valid epoch
	deliveredEpoch uint32 // epoch of the last message delivered (or the starting epoch)
	started        bool
	deliveredAny   bool
	stored         bool // slowRecord's record brought something new
	slowAdvance    bool // Advance has buffers to release or views to drop
	stepped        bool // the last Step took a stream packet
	rewindPkt      bool // the packet being handled came from StepRewind
	rewinding      bool // SetRewinding: gaps are not NAKed
	nakArmed       bool
	asked          bool         // askedFrom..askedTo were asked of src
	goneSrcs       [4]uint64    // the sources (bits 0..RepairSources) that answered Gone for nakFrom
	err            error        // sticky fatal error
	warn           error        // non-fatal error of the running Step (a packet dropped for a reason the shell should log)
	epochHeard     int64        // local time of the last valid packet of the current epoch
	below          otherSession // a newer epoch starting at or below stable (id: the epoch)
	own            ownSeen      // this receiver's own newest command taken but not delivered
	jump           otherSession // an epoch beyond epoch+MaxEpochJump (id: the epoch)
	back           otherSession // an older epoch live while the current one is silent (id: the epoch)
	ready          Ready
	pkt            wire.Packet
	rec            wire.Record

	cfg       Config
	rng       uint64
	stats     Stats
	out       []byte // bytes of the frames in ready.Send
	cuts      cutTable
	runs      runTable // where delivery entered each epoch (epoch.go)
	firstLive uint64

	reassembly
	hold hold // safe mode: in-order packets waiting for stable (hold.go)

	// Repair.
	nakFrom    uint64
	nakAt      int64
	nakBackoff int64
	nakOff     uint32 // held prefix of nakFrom when the gap was armed
	src        Source // where NAKs go
	askedFrom  uint64
	askedTo    uint64
	askedAt    int64 // first NAK to src since the gap opened or last progressed
	// askedWait: a NAK went to src since the gap opened or last
	// progressed, so its deadline (askedAt) runs. Progress clears it: a
	// source that answered is not timed out before it is asked again,
	// however late the next NAK goes (a process that slept).
	askedWait bool
	// askedNaks: NAKs sent to src while askedWait (see sourceTimeoutNaks).
	askedNaks int

	// Status.
	statusAt     int64
	statusSent   int64
	statusContig uint64
	statusDeliv  uint64
	statusAny    bool

	// Decode scratch, kept here so that the hot path allocates nothing.
	ix     wire.Internal
	gone   wire.Gone
	status wire.Status
}

// otherSession tracks a session other than the one followed.
type otherSession struct {
	id    uint64
	first int64 // local time it was first heard, this spell
	last  int64
}

// New validates cfg and builds a Receiver; every buffer of the hot path is
// allocated here.
func New(cfg Config) (*Receiver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	r := &Receiver{cfg: cfg, rng: cfg.Seed ^ 0x9e3779b97f4a7c15}
	r.initRing(cfg.PendingRecords)
	r.ready.Deliver = make([]Message, 0, 64)
	r.ready.Send = make([]Frame, 0, 4)
	r.out = make([]byte, 0, 4*wire.StatusBytes)
	r.src = cfg.PreferredSource
	r.next = 1
	r.released = 1
	r.hold.cur = -1
	return r, nil
}

// Ready is the output accumulated since the last Advance (see Ready). The
// pointer stays the same for the Receiver's life.
func (r *Receiver) Ready() *Ready { return &r.ready }

// Advance tells the receiver that the shell handled Ready: its frames and
// payloads may be reused.
func (r *Receiver) Advance() {
	if invariants.Enabled || r.slowAdvance {
		r.advanceSlow()
	}
	r.ready.Deliver = r.ready.Deliver[:0]
	r.settled = 0
	r.released = r.next
}

// advanceSlow empties Ready.Send, releases big buffers delivered from the
// ring and drops the views Ready held.
func (r *Receiver) advanceSlow() {
	r.slowAdvance = false
	r.ready.Send = r.ready.Send[:0]
	r.out = r.out[:0]
	if invariants.Enabled {
		r.checkInvariants()
	}
	if len(r.releaseLater) > 0 {
		for _, q := range r.releaseLater {
			if s := &r.ring[q&r.mask]; s.state == slotEmpty && s.seq == q {
				r.release(s)
			}
		}
		r.releaseLater = r.releaseLater[:0]
		clear(r.ready.Deliver) // drop views of released buffers
	}
	if len(r.ready.Persist) > 0 {
		clear(r.ready.Persist)
		r.ready.Persist = r.ready.Persist[:0]
	}
}

// Step feeds one frame received from source from: a stream packet (data or
// heartbeat) or a Gone. A malformed frame is counted and its decoder's
// sentinel error returned, with no other change. A packet dropped for a
// reason the shell should log returns its sentinel with Err() still nil
// (ErrEpochBelowStable). After a fatal error Step does nothing and returns
// Err().
func (r *Receiver) Step(now int64, frame []byte, from Source) error {
	if r.err != nil {
		return r.err
	}
	r.stepped = false
	r.warn = nil
	k, err := wire.PeekKind(frame)
	if err != nil {
		r.stats.Malformed++
		return err
	}
	switch k {
	case wire.KindData, wire.KindHeartbeat:
		if err := wire.DecodePacket(frame, &r.pkt); err != nil {
			r.stats.Malformed++
			return err
		}
		r.stepped = true
		r.onPacket(now, frame)
	case wire.KindGone:
		if err := wire.DecodeGone(frame, &r.gone); err != nil {
			r.stats.Malformed++
			return err
		}
		r.onGone(now, from)
	default:
		r.stats.Malformed++
		return ErrFrameKind
	}
	if r.err == nil && r.warn != nil {
		return r.warn
	}
	return r.err
}

// Tick runs what is due at now: the NAK of an open gap, a status report.
func (r *Receiver) Tick(now int64) {
	if r.err != nil {
		return
	}
	r.updateGap(now)
	if r.nakArmed && now >= r.nakAt && !r.rewinding {
		r.sendNak(now)
	}
	if r.cfg.StatusInterval > 0 && r.started && now >= r.statusAt {
		r.sendStatus(now)
	}
}

// NextDue is the local time of the next thing Tick will do (a NAK, a
// status report), if any: a shell may sleep until then.
func (r *Receiver) NextDue() (int64, bool) {
	var at int64
	ok := false
	if r.nakArmed && !r.rewinding {
		at, ok = r.nakAt, true
	}
	if r.cfg.StatusInterval > 0 && r.started && r.err == nil {
		s := r.statusAt
		if r.statusAny && !r.statusMoved() {
			s = max(s, r.statusSent+statusKeepalive*int64(r.cfg.StatusInterval))
		}
		if !ok || s < at {
			at, ok = s, true
		}
	}
	return at, ok
}

// Stepped reports whether the last Step took a stream packet (data or
// heartbeat) of a valid frame: evidence that the sequencer is live.
func (r *Receiver) Stepped() bool { return r.stepped }

// Err is the fatal error that stopped the receiver (ErrUnrecoverable,
// ErrDiverged, ErrNewSession, ErrTooLarge, ErrEpochBelowStable), or nil.
// Once set it never changes.
func (r *Receiver) Err() error { return r.err }

// Stats returns the counters.
func (r *Receiver) Stats() Stats { return r.stats }

// Started reports whether a live packet fixed the session and the start.
func (r *Receiver) Started() bool { return r.started }

// Next is the next seq to deliver: every seq below it is in a Ready.
func (r *Receiver) Next() uint64 { return r.next }

// Contiguous is the highest seq up to which the stream is held whole.
func (r *Receiver) Contiguous() uint64 { return r.contig }

// Tail is the highest seq known to exist.
func (r *Receiver) Tail() uint64 { return r.tail }

// FirstLive is the first seq seen live (the start of a non-rewinding
// receiver; the end of a rewind).
func (r *Receiver) FirstLive() uint64 { return r.firstLive }

// Stable is the highest stable seq believed.
func (r *Receiver) Stable() uint64 { return r.stable }

// Session is the session followed (0 before the first packet).
func (r *Receiver) Session() uint64 { return r.session }

// Epoch is the newest valid epoch seen.
func (r *Receiver) Epoch() uint32 { return r.epoch }

// Source is where NAKs go now.
func (r *Receiver) Source() Source { return r.src }

// Now is sequencer time: the time of the last message delivered, or of a
// heartbeat once everything it announced was delivered.
func (r *Receiver) Now() int64 { return r.now }

// HeldHead fills m with the next message to deliver when only part of it
// is held and that part is stable (Payload nil), and reports whether there
// is one: a node acknowledges its own large command by it while the rest
// is repaired.
func (r *Receiver) HeldHead(m *Message) bool {
	if r.next > r.maxStored {
		return false
	}
	s := &r.ring[r.next&r.mask]
	if s.seq != r.next || s.state != slotPartial || s.seq > r.stable {
		return false
	}
	*m = Message{Seq: s.seq, Time: s.time, Epoch: s.epoch, Account: s.account, Instance: s.instance, CmdSeq: s.cmdSeq, Flags: s.flags}
	return true
}

func (r *Receiver) fail(err error) {
	if r.err == nil {
		r.err = err
	}
}

// random returns the next value of a splitmix64 sequence seeded by
// Config.Seed, so NAK jitter replays in a simulation.
func (r *Receiver) random() uint64 {
	r.rng += 0x9e3779b97f4a7c15
	z := r.rng
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

func (r *Receiver) onPacket(now int64, frame []byte) {
	p := &r.pkt
	if r.cfg.Session != 0 && p.Session != r.cfg.Session {
		r.stats.Fenced++
		return
	}
	if !r.started {
		if p.Flags&wire.PacketRetransmit != 0 {
			// A repair meant for another receiver says nothing about
			// where the live stream is; wait for a live packet.
			r.stats.Duplicates += uint64(p.Count)
			return
		}
		r.start(now, p)
	} else if p.Session != r.session && !r.otherSession(now, p) {
		return
	}
	r.heard = now

	// Only a live packet says an older epoch still publishes: a rewind's
	// or a repair's is history (a rewinder that delivered nothing yet
	// in the current epoch went back to the older one on its own
	// rewind's packets, then refused the current epoch as starting below
	// the stable it had heard: simulator seed 77 with the rewind stream).
	if p.Epoch < r.epoch && !r.rewindPkt && p.Flags&wire.PacketRetransmit == 0 && r.epochGone(now, p) {
		r.revertEpoch(now, p)
	}
	current := true
	var limit uint64 // older epoch: records at or above it were cut
	switch {
	case p.Epoch == r.epoch:
		if p.EpochStart != r.epochStart {
			r.stats.BadEpoch++
			return
		}
		r.epochHeard = now
	case p.Epoch > r.epoch:
		if !r.newEpoch(now, p) {
			return
		}
	default:
		if !r.cuts.add(p.Epoch, p.EpochStart) {
			r.stats.BadEpoch++
			return
		}
		if r.divergedAt(p.Epoch, p.EpochStart) {
			return
		}
		next, ok := r.cuts.startOf(p.Epoch + 1)
		if !ok {
			// This receiver missed where the next epoch began, so the
			// cut is unknown; but every failover keeps what was stable
			// (the cut is at or above it), and the cut lies below the
			// next epoch it knows.
			next = min(p.Stable+1, r.cuts.startAfter(p.Epoch))
			if r.rewindPkt {
				// The stored stream holds no cut record (see StepRewind).
				next = r.cuts.startAfter(p.Epoch)
			}
		}
		if p.FirstSeq >= next {
			// A deposed primary's packet above its cut.
			r.stats.Fenced++
			return
		}
		current, limit = false, next
	}

	last := p.LastSeq()
	if current {
		highest := max(r.tail, last)
		if p.Stable > r.stable {
			if p.Stable-highest > r.cfg.StableLeadSeqs && p.Stable > highest {
				r.stats.WildStable++
			} else {
				r.stable = p.Stable
			}
		}
		if last > r.tail {
			if r.tail > 0 && p.FirstSeq > r.tail+1 {
				// A gap is born: the seqs between the tail and this
				// packet (Stats.GapSeqs). Counted here, once, where it
				// costs nothing: measuring it where the NAK is armed
				// walked the window each time a rewind's progress moved
				// the gap's head, and a late joiner fell behind the ring.
				r.stats.GapSeqs += p.FirstSeq - r.tail - 1
			}
			r.tail = last
		}
		sealed := last
		if p.Count > 0 {
			// The last record may be one fragment of a message still
			// being published; only the seqs before it are surely whole.
			sealed--
		}
		sealed = max(sealed, r.stable)
		if sealed > r.sealed {
			r.sealed = sealed
		}
		if r.stable > r.tail {
			if r.tail > 0 {
				r.stats.GapSeqs += r.stable - r.tail // stable says these exist
			}
			r.tail = r.stable
		}
	} else if last := min(last, limit-1); last > r.tail {
		r.tail = last
		r.sealed = max(r.sealed, min(last, limit-1))
	}

	if r.next <= r.maxStored || r.hold.end > r.next {
		r.drain()
	}
	fresh := false
	maxRecv := uint32(r.cfg.MaxReceiveMessageBytes)
	// The hot path: a record of this epoch, whole, next in line and
	// deliverable goes into Ready.Deliver as a view of the packet (zero
	// copy) with no other test; anything else takes the slow path.
	rec := &r.rec
	fastOK := current && (r.cfg.Mode == Fast || r.stable >= last) && maxRecv >= 0xFFFF
	// Safe mode, stable behind: the in-order run waits in the packet that
	// carries it (hold.go), unless it runs into records the ring holds.
	holdOK := current && !fastOK && r.cfg.Mode == Safe && r.cfg.HoldBytes > 0
	r.hold.cur = -1
	for p.Next(rec) {
		if fastOK && rec.Seq == r.next && rec.Flags&wire.FlagFragment == 0 && rec.Seq >= p.EpochStart &&
			rec.Seq > r.maxStored && len(r.ready.Deliver) < cap(r.ready.Deliver) {
			d := r.ready.Deliver[:len(r.ready.Deliver)+1]
			m := &d[len(d)-1] // field by field: a struct literal costs twice as much
			m.Seq, m.Time, m.Account, m.CmdSeq = rec.Seq, rec.Time, rec.Account, rec.CmdSeq
			m.Payload, m.Epoch, m.Instance, m.Flags = rec.Payload, p.Epoch, rec.Instance, rec.Flags
			r.ready.Deliver = d
			r.next++
			fresh = true
			continue
		}
		if holdOK && rec.Seq > r.stable && rec.Seq == r.holdNext() && rec.Seq > r.maxStored &&
			rec.Flags&wire.FlagFragment == 0 && rec.Seq >= p.EpochStart && r.holdRecord(frame, rec, p.Epoch) {
			fresh = true
			r.sawOwn(rec, p.Epoch)
			continue
		}
		if !r.slowRecord(p, rec, current, limit, maxRecv) {
			break
		}
		if r.stored && current {
			r.sawOwn(rec, p.Epoch)
		}
		fresh = fresh || r.stored
	}
	if n := len(r.ready.Deliver); n > r.settled {
		r.now = max(r.now, r.ready.Deliver[n-1].Time)
	}
	r.settle()
	if r.next <= r.maxStored || r.hold.end > r.next {
		r.drain()
	}
	if p.Kind == wire.KindHeartbeat && r.next == p.FirstSeq && p.BaseTime > r.now {
		r.now = p.BaseTime
	}
	if fresh && r.cfg.Persist {
		r.ready.Persist = append(r.ready.Persist, frame)
		r.slowAdvance = true
	}
	if fresh && r.askedWait && p.FirstSeq <= r.askedTo && last >= r.askedFrom {
		// New records of the range asked: an answer (the source asked,
		// or a multicast repair), even if the gap's first seq is still
		// missing (lost on the way). The source deadline runs from the
		// next NAK, so a source that answers is not left for one that
		// said Gone (whose second Gone would then be fatal) just because
		// the receiver's next tick came after RepairSourceTimeout.
		r.askedWait = false
	}
	if r.contig < r.tail || r.nakArmed || r.asked || r.tried > 0 {
		r.updateGap(now)
	}
}

// slowRecord handles a record off the hot path: a duplicate, a record of
// an older epoch or below its header's epoch start, a fragment, one not
// yet deliverable. It reports false when the receiver stopped; r.stored
// tells whether the record brought anything new.
func (r *Receiver) slowRecord(p *wire.Packet, rec *wire.Record, current bool, limit uint64, maxRecv uint32) bool {
	r.stored = false
	if rec.Seq < r.next {
		r.duplicate(rec)
		return r.err == nil
	}
	if r.inHold(rec.Seq) {
		r.stats.Duplicates++ // held, not delivered: nothing can diverge yet
		return true
	}
	if !current && rec.Seq >= limit {
		r.stats.Fenced++
		return true
	}
	ep := p.Epoch
	if rec.Seq < p.EpochStart {
		var ok bool
		if ep, ok = r.cuts.epochOf(rec.Seq); !ok {
			r.stats.Fenced++
			return true
		}
	}
	if rec.Total > maxRecv {
		r.fail(fmt.Errorf("%w: seq %d is %d bytes, MaxReceiveMessageBytes is %d", ErrTooLarge, rec.Seq, rec.Total, maxRecv))
		return false
	}
	if rec.Flags&(wire.FlagInternal|wire.FlagSeqGen|wire.FlagFragment) == wire.FlagInternal|wire.FlagSeqGen && rec.Seq > r.next {
		r.learnEmptyEpochs(rec, ep)
	}
	if rec.Seq == r.next && rec.Flags&wire.FlagFragment == 0 && (r.cfg.Mode == Fast || rec.Seq <= r.stable) {
		// In order and deliverable: zero-copy from the packet. A copy
		// stored earlier (out of order) must not be delivered again; only
		// seqs at or below maxStored can have one, which spares the hot
		// path a cache miss in the ring.
		if rec.Seq <= r.maxStored {
			if s := &r.ring[rec.Seq&r.mask]; s.seq == rec.Seq {
				s.state = slotEmpty
			}
		}
		r.emit(rec.Seq, rec.Time, ep, rec.Account, rec.Instance, rec.CmdSeq, rec.Flags, rec.Payload)
		r.stored = true
		return true
	}
	r.stored = r.store(rec, ep)
	return r.err == nil
}

// learnEmptyEpochs reads an EpochStart record of epoch ep ahead of
// delivery: its Extra names the epoch of the record before it, so the
// epochs in between left nothing and the one after that epoch starts
// here too. Without this a receiver that never heard those epochs (it
// rewinds from a replayer, or joined after them) fences every packet of
// the earlier epoch past the stable its header carries (the cut is
// unknown), and waits forever when the epoch right after it was cut
// whole. Read early, not at delivery: the receiver is stuck below it.
func (r *Receiver) learnEmptyEpochs(rec *wire.Record, ep uint32) {
	if wire.DecodeInternal(rec.Payload, &r.ix) != nil || r.ix.Type != wire.InternalEpochStart || r.ix.Epoch != ep {
		return
	}
	if prev := uint32(r.ix.Extra); r.ix.Extra > 0 && prev+1 < ep && !r.cuts.add(prev+1, rec.Seq) {
		r.stats.BadEpoch++ // contradicts the starts known: a forgery or a bug, never in silence
	}
}

// start fixes the session, the epoch and where delivery begins.
func (r *Receiver) start(now int64, p *wire.Packet) {
	r.started = true
	r.session = p.Session
	r.heard = now
	r.epoch = p.Epoch
	r.epochStart = p.EpochStart
	r.epochHeard = now
	r.below = otherSession{}
	r.jump = otherSession{}
	r.cuts.reset()
	r.cuts.add(p.Epoch, p.EpochStart)
	r.runs.reset()
	r.firstLive = p.FirstSeq
	if r.cfg.Rewind {
		r.next = max(1, r.cfg.RewindFrom)
		r.deliveredEpoch = r.cfg.RewindEpoch
	} else {
		r.next = p.FirstSeq
		r.deliveredEpoch = p.Epoch
	}
	r.released = r.next
	r.contig = r.next - 1
	r.tail = r.next - 1
	r.sealed = 0
	r.stable = 0
	r.statusAt = now
}

// otherSession handles a packet of a session other than the one
// followed, and reports whether the receiver now follows it. A foreign
// session is counted (OtherSession) and dropped with ErrOtherSession for
// as long as the followed one publishes: packets alone never stop or
// capture a receiver (forged session heartbeats for 2.5 s used to stop
// every tail, node, replayer and standby). Once the followed session is
// provably gone (silent for SessionTimeout) while the other one
// publishes, a live sequencer is never ignored in silence, whatever the
// order of session ids: a receiver that delivered nothing switches to it,
// one that did stops with ErrNewSession (a restarted sequencer: restart to
// follow it).
func (r *Receiver) otherSession(now int64, p *wire.Packet) bool {
	if p.Flags&wire.PacketRetransmit != 0 {
		r.stats.Fenced++
		return false
	}
	silent := now - r.heard
	if silent < int64(r.cfg.SessionTimeout) {
		r.stats.OtherSession++
		r.warn = ErrOtherSession
		return false
	}
	if !r.deliveredAny {
		r.stats.SessionSwitch++
		r.resetStream()
		r.start(now, p)
		return true
	}
	r.fail(fmt.Errorf("%w: session %d publishes while session %d, which this receiver followed, has been silent for %dms: the sequencer restarted; restart to follow the new session",
		ErrNewSession, p.Session, r.session, silent/1e6))
	return false
}

// resetStream forgets everything learned from the stream followed so far.
func (r *Receiver) resetStream() {
	r.resetRing()
	r.resetHold()
	r.nakArmed, r.asked, r.askedWait = false, false, false
	r.clearGone()
	r.src = r.cfg.PreferredSource
	r.maxStored = 0
	r.now = 0
	r.own = ownSeen{}
}

// newEpoch validates a header of a newer epoch and moves to it. A valid
// epoch start is above every stable seq (the failover keeps everything
// stable) and not below the current epoch's start; anything else is a
// forgery or a bug, counted (BadEpoch) and dropped. A receiver that
// delivered seqs at or above the start in an older epoch has diverged,
// whether or not it saw the EpochStart record. Buffered records of older
// epochs at or above their epoch's cut are dropped: the start, or, for an
// epoch whose successor this receiver skipped, anything not stable (see
// cutBound).
func (r *Receiver) newEpoch(now int64, p *wire.Packet) bool {
	if p.Epoch-r.epoch > r.cfg.MaxEpochJump && !r.farEpoch(now, p.Epoch) {
		return false
	}
	start := p.EpochStart
	if start >= r.epochStart && start <= r.stable {
		r.stats.BadEpoch++
		r.stats.EpochBelowStable++
		r.belowStable(now, p.Epoch, start)
		return false
	}
	if start < r.epochStart || !r.cuts.add(p.Epoch, start) {
		r.stats.BadEpoch++
		return false
	}
	if r.next > start && r.deliveredEpoch < p.Epoch && !r.deliveredAny && !r.cfg.Rewind {
		// A live-tail joiner that delivered nothing started on a deposed
		// primary's packet (delayed or replayed) past the cut: it owes
		// nothing, so it starts over on this one, as if it had come
		// first (it stopped with ErrDiverged: seed 89 with the replayed
		// epochs).
		r.stats.StartedOver++
		r.resetStream()
		r.start(now, p)
		return true
	}
	if r.next > start && r.deliveredEpoch < p.Epoch {
		r.fail(fmt.Errorf("%w: epoch %d starts at seq %d but seqs up to %d were delivered in epoch %d",
			ErrDiverged, p.Epoch, start, r.next-1, r.deliveredEpoch))
		return false
	}
	if r.divergedAt(p.Epoch, start) {
		return false
	}
	r.epoch = p.Epoch
	r.epochStart = start
	r.epochHeard = now
	r.below = otherSession{}
	r.jump = otherSession{}
	r.trimHold(start)
	end := r.released + uint64(len(r.ring))
	for q := r.next; q < end; q++ {
		s := &r.ring[q&r.mask]
		if s.state != slotEmpty && s.seq == q && s.epoch < p.Epoch && q >= r.cutBound(s.epoch, start) {
			r.dropSlot(s)
			r.stats.DroppedByEpoch++
		}
	}
	r.contig = max(r.next-1, min(r.contig, start-1))
	r.tail = max(r.next-1, min(r.tail, start-1))
	r.sealed = min(r.sealed, r.tail)
	r.nakArmed, r.asked, r.askedWait = false, false, false
	r.clearGone()
	r.src = r.cfg.PreferredSource
	return true
}

// farEpoch reports whether epoch e, more than MaxEpochJump beyond the
// current one, may be followed; when not, the packet is counted
// (EpochJumpHeld) and dropped with ErrEpochJump.
//
// Why the bound is sound: each epoch is one failover that Raft committed
// (an election, then the epoch's commit and the seal), and a primary
// stops publishing once it lost leadership or its lease. A receiver that
// hears the current epoch live therefore cannot have missed many epochs:
// only those elected in the last SessionTimeout, each at least an election
// timeout apart (tens to hundreds of ms), far fewer than the default 16.
// A header that claims more while the current epoch publishes is a
// forgery or a bug; one heartbeat of epoch 2^32-1 used to capture every
// receiver (the real primary's packets became an older epoch's, stable
// froze, and no later epoch could follow it). A receiver that really
// slept through many failovers finds its epoch silent: the jump is
// followed once it has been heard for SessionTimeout while the current
// epoch was silent as long, a delay of SessionTimeout in a rare case
// only. A jump within the bound is followed at once, as a failover must
// be; forging one is stopped only by authenticated frames.
func (r *Receiver) farEpoch(now int64, e uint32) bool {
	j := &r.jump
	timeout := int64(r.cfg.SessionTimeout)
	if j.id != uint64(e) || now-j.last > timeout {
		*j = otherSession{id: uint64(e), first: now}
	}
	j.last = now
	if now-j.first < timeout || now-r.epochHeard < timeout {
		r.stats.EpochJumpHeld++
		r.warn = ErrEpochJump
		return false
	}
	return true
}

// epochGone reports whether the receiver should go back from the current
// epoch to p's older one: nothing was delivered in the current epoch, it
// has been silent for SessionTimeout, and p's epoch has published for as
// long. A real new epoch's primary heartbeats all the time, so that is an
// epoch no primary publishes: a forged header within MaxEpochJump (or a
// forged first packet) would otherwise keep the receiver off the real
// stream for good, stable frozen. Going back to a deposed primary costs
// nothing in safe mode (its stable cannot advance without the standbys,
// which left its epoch); a fast receiver that delivers past its cut stops
// with ErrDiverged when the next epoch comes, never in silence.
func (r *Receiver) epochGone(now int64, p *wire.Packet) bool {
	if r.deliveredAny && r.deliveredEpoch >= r.epoch {
		return false
	}
	b := &r.back
	timeout := int64(r.cfg.SessionTimeout)
	if b.id != uint64(p.Epoch) || now-b.last > timeout {
		*b = otherSession{id: uint64(p.Epoch), first: now}
	}
	b.last = now
	return now-b.first >= timeout && now-r.epochHeard >= timeout
}

// revertEpoch goes back to p's older epoch (see epochGone): the newer
// epochs' starts are forgotten.
func (r *Receiver) revertEpoch(now int64, p *wire.Packet) {
	r.cuts.dropAfter(p.Epoch)
	if !r.cuts.add(p.Epoch, p.EpochStart) {
		return
	}
	r.stats.EpochReverted++
	r.epoch, r.epochStart, r.epochHeard = p.Epoch, p.EpochStart, now
	r.back, r.jump, r.below = otherSession{}, otherSession{}, otherSession{}
	r.nakArmed, r.asked, r.askedWait = false, false, false
	r.clearGone()
}

// belowStable handles a header of epoch e starting at start, at or below
// the stable this receiver believes: the receiver was told a stable the
// group did not keep (a deposed primary's header, a member that counted
// what it had not written), or the start is forged. The packet is
// dropped, never in silence: Step returns ErrEpochBelowStable. Once such
// an epoch has been heard for SessionTimeout while the current one was
// silent as long, the receiver cannot follow the stream: it stops.
func (r *Receiver) belowStable(now int64, e uint32, start uint64) {
	b := &r.below
	timeout := int64(r.cfg.SessionTimeout)
	if b.id != uint64(e) || now-b.last > timeout {
		*b = otherSession{id: uint64(e), first: now}
	}
	b.last = now
	if now-b.first < timeout || now-r.epochHeard < timeout {
		r.warn = ErrEpochBelowStable
		return
	}
	r.fail(fmt.Errorf("%w: epoch %d starts at seq %d, at or below stable %d believed in epoch %d, and has been the only live epoch for %dms: a header claimed a stable the group did not keep; restart to rejoin the stream",
		ErrEpochBelowStable, e, start, r.stable, r.epoch, (now-r.epochHeard)/1e6))
}

// cutBound is the first seq that a record held from epoch e may not
// keep when an epoch starting at start begins: the start of epoch e+1 if
// known. Otherwise the receiver skipped epoch e+1, whose start (e's cut)
// may lie anywhere from e's stable up to start, so only what it believes
// stable is surely kept; the rest is dropped and asked for again.
func (r *Receiver) cutBound(e uint32, start uint64) uint64 {
	if next, ok := r.cuts.startOf(e + 1); ok {
		return next
	}
	return min(start, r.stable+1)
}

// duplicate handles a record already delivered. It is also where a fast
// receiver learns that a new epoch started at or below what it delivered.
func (r *Receiver) duplicate(rec *wire.Record) {
	r.stats.Duplicates++
	if rec.Flags&wire.FlagInternal == 0 || wire.DecodeInternal(rec.Payload, &r.ix) != nil {
		return
	}
	// Only what this receiver delivered can diverge: one that started
	// at RewindFrom and delivered nothing yet knows no epoch below it
	// (the shell holds those seqs), and an old epoch's start repaired to
	// others says nothing about them.
	if r.ix.Type == wire.InternalEpochStart && r.deliveredAny {
		if r.ix.Epoch > r.deliveredEpoch {
			r.fail(fmt.Errorf("%w: epoch %d starts at seq %d but seqs up to %d were delivered in epoch %d",
				ErrDiverged, r.ix.Epoch, rec.Seq, r.next-1, r.deliveredEpoch))
			return
		}
		r.divergedAt(r.ix.Epoch, rec.Seq)
	}
}

// divergedAt stops the receiver with ErrDiverged and reports true when
// epoch e starting at start (learned from any header or EpochStart
// record, repairs included) cut what this receiver delivered from an
// older epoch: a seq at or above start delivered in an epoch before e. A
// fast receiver that missed a whole epoch learns its start only from a
// repair, after it went on.
func (r *Receiver) divergedAt(e uint32, start uint64) bool {
	last, old, ok := r.runs.below(e, r.next)
	if !ok || last < start {
		return false
	}
	r.fail(fmt.Errorf("%w: epoch %d starts at seq %d but seqs up to %d were delivered in epoch %d",
		ErrDiverged, e, start, last, old))
	return true
}

// emit puts one message into Ready.Deliver. What follows from the last
// message emitted (contig, the delivered epoch, counters) is brought up to
// date once per batch by settle.
func (r *Receiver) emit(seq uint64, t int64, epoch uint32, acct wire.Account, inst uint8, cmdSeq uint64, flags uint8, payload []byte) {
	if t > r.now {
		r.now = t
	}
	d := r.ready.Deliver
	n := len(d)
	if n == cap(d) {
		d = append(d, Message{})
	}
	d = d[:n+1]
	m := &d[n]
	m.Seq, m.Time, m.Account, m.CmdSeq, m.Payload = seq, t, acct, cmdSeq, payload
	m.Epoch, m.Instance, m.Flags = epoch, inst, flags&^wire.FlagFragment
	r.ready.Deliver = d
	r.next = seq + 1
}

// settle updates what follows from the messages emitted since the last
// call (they are in seq order, so the last one tells).
func (r *Receiver) settle() {
	d := r.ready.Deliver
	if len(d) == r.settled {
		return
	}
	last := &d[len(d)-1]
	if last.Epoch != r.runs.last() {
		for i := r.settled; i < len(d); i++ { // rare: delivery enters an epoch
			r.runs.enter(d[i].Epoch, d[i].Seq)
		}
	}
	r.stats.Delivered += uint64(len(d) - r.settled)
	r.settled = len(d)
	r.deliveredAny = true
	r.deliveredEpoch = max(r.deliveredEpoch, last.Epoch)
	r.contig = max(r.contig, last.Seq)
}

// drain delivers held records from next on while they are whole and, in
// safe mode, stable.
func (r *Receiver) drain() {
	for r.err == nil {
		before := r.next
		if r.hold.end != 0 && r.hold.start == r.next {
			r.drainHold() // the held run (hold.go)
		}
		// Nothing is held at or above next unless something was stored
		// there: an in-order stream never touches the ring.
		for r.err == nil && r.next <= r.maxStored {
			s := &r.ring[r.next&r.mask]
			if s.state != slotFull || s.seq != r.next || r.cfg.Mode == Safe && r.next > r.stable {
				break
			}
			s.state = slotEmpty
			if s.owned && cap(s.buf) > bigBufferBytes {
				r.releaseLater = append(r.releaseLater, s.seq)
				r.slowAdvance = true
			}
			r.emit(s.seq, s.time, s.epoch, s.account, s.instance, s.cmdSeq, s.flags, s.buf[:s.total])
		}
		if r.next == before || r.hold.end == 0 {
			break
		}
	}
	r.settle()
}

// sendStatus reports this receiver's position to the sequencer when it
// moved, or as a keepalive.
func (r *Receiver) sendStatus(now int64) {
	interval := int64(r.cfg.StatusInterval)
	r.statusAt = now + interval
	delivered := r.next - 1
	contig := max(r.contig, delivered)
	if r.statusAny && !r.statusMoved() && now-r.statusSent < statusKeepalive*interval {
		return
	}
	s := &r.status
	*s = wire.Status{Session: r.session, Epoch: r.epoch, Instance: r.cfg.Instance, Account: r.cfg.Account,
		Incarnation: r.cfg.Incarnation, Contiguous: contig, Delivered: delivered}
	if r.cfg.ReadOnly || r.rewinding {
		// A receiver catching up through a rewind is far behind by
		// design: the sequencer's flow control must not hold the
		// stream back for it (its NAKs wait meanwhile too).
		s.Flags |= wire.StatusReadOnly
	}
	if r.cfg.Replayer {
		s.Flags |= wire.StatusReplayer
	}
	if _, err := wire.AppendStatus(r.queue(Sequencer, wire.StatusBytes), s); err == nil {
		r.statusAny, r.statusSent, r.statusContig, r.statusDeliv = true, now, contig, delivered
		r.stats.StatusSent++
	}
}

// statusMoved reports whether the position changed since the last status.
func (r *Receiver) statusMoved() bool {
	return max(r.contig, r.next-1) != r.statusContig || r.next-1 != r.statusDeliv
}

// queue adds a frame of n bytes for to to Ready.Send and returns its
// bytes for the caller to fill.
func (r *Receiver) queue(to Source, n int) []byte {
	off := len(r.out)
	r.out = slices.Grow(r.out, n)[:off+n]
	b := r.out[off : off+n : off+n]
	r.ready.Send = append(r.ready.Send, Frame{To: to, Bytes: b})
	r.slowAdvance = true
	return b
}

// statusKeepalive: an unchanged position is reported every this many
// StatusIntervals (500ms by default), well within the sequencer's
// FlowReceiverTimeout.
const statusKeepalive = 50

// checkInvariants panics when the receiver's positions contradict each
// other (built with -race or -tags invariants: internal/invariants; and
// called by the tests' drive helper).
func (r *Receiver) checkInvariants() {
	switch {
	case r.settled != len(r.ready.Deliver):
		panic(fmt.Sprintf("receiver: %d messages emitted, %d settled", len(r.ready.Deliver), r.settled))
	case r.contig+1 < r.next:
		panic(fmt.Sprintf("receiver: contiguous %d below delivered %d", r.contig, r.next-1))
	case r.used < 0 || r.used > r.cfg.MaxReassemblyBytes:
		panic(fmt.Sprintf("receiver: reassembly bytes %d outside 0..%d", r.used, r.cfg.MaxReassemblyBytes))
	case r.released > r.next:
		panic(fmt.Sprintf("receiver: released %d beyond next %d", r.released, r.next))
	case r.inHold(r.contig + 1):
		panic(fmt.Sprintf("receiver: contiguous %d inside the held run %d..%d", r.contig, r.hold.start, r.hold.end-1))
	case r.hold.end != 0 && (r.hold.start < r.next || r.hold.start >= r.hold.end):
		panic(fmt.Sprintf("receiver: held run %d..%d, next %d", r.hold.start, r.hold.end-1, r.next))
	case r.hold.end > r.next && r.cfg.Mode != Safe:
		panic("receiver: a fast receiver holds packets")
	}
}
