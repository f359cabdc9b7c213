package sequencer

import (
	"fmt"
	"slices"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// Sink receives a Repairer's output (a replayer's), or a Core's through a
// SinkShell. Its methods are called synchronously; pkt is valid only
// during the call, so a sink that keeps it must copy it.
type Sink interface {
	// Publish sends a stream packet (data or heartbeat) to everyone.
	Publish(pkt []byte)
	// SendTo sends a unicast reply (a retransmitted packet or a Gone).
	SendTo(to transport.Peer, pkt []byte)
}

// RetainingSink is a Sink that can also publish a packet by reference
// (transport.Retainer): PublishRetained's pkt stays valid and unchanged
// until the sink's transport flushes it, which it does before it holds
// more than MaxRetainedBytes (0: it cannot retain). A SinkShell passes
// a Core's Retained packets to it this way (Core.SetRetained).
type RetainingSink interface {
	Sink
	PublishRetained(pkt []byte)
	MaxRetainedBytes() int
}

// retainMarginPackets is the room the ring keeps, beyond what the
// shell's transport holds by reference (SetRetained) and one call's
// output, for the packet being built and the padding at chunk ends while
// retained packets wait.
const retainMarginPackets = 4

// Stats are the Core's counters since New.
type Stats struct {
	Commands     uint64 // commands sequenced (whole or reassembled)
	Duplicates   uint64 // commands dropped: cmdSeq <= last sequenced
	OutOfOrder   uint64 // commands dropped: cmdSeq > last+1
	StaleFrames  uint64 // command frames dropped: incarnation older than on record
	StaleTold    uint64 // InternalStaleIncarnation records telling such a sender
	Fragments    uint64 // command fragments accepted into a reassembly
	BadFragments uint64 // fragments dropped: Total disagrees with the reassembly in progress
	// AheadFragments: fragments dropped because they reach far beyond the
	// bytes held of their command (resent by the node, in order).
	AheadFragments uint64
	Malformed      uint64 // frames rejected by a decoder or a sanity check
	WrongSession   uint64 // command frames and NAKs for another session (ignored)
	// Rejected counts InternalRejected records (commands refused, each
	// reported to its sender in the stream); the Rejected* fields split it
	// by reason.
	Rejected                uint64
	RejectedTooLarge        uint64 // over MaxMessageBytes
	RejectedSenderTableFull uint64 // unknown sender, table full of senders heard within SenderIdleTimeout
	RejectedReassemblyFull  uint64 // MaxReassemblyBytes reached
	RejectedTimerCap        uint64 // MaxTimersPerSender reached
	RejectedTimerRequest    uint64 // malformed timer request or period below MinTimerPeriod
	RejectedFragmentedTimer uint64 // timer request in fragments
	RejectedTimerRate       uint64 // timer request above the sender's MaxTimerFiresPerSecond
	SendersForgotten        uint64 // senders forgotten by a full table for a new one (InternalSenderForgotten)
	ReassembliesExpired     uint64 // reassemblies dropped after ReassemblyTimeout of silence
	Statuses                uint64 // receiver position reports taken
	StatusBeyondTail        uint64 // position reports beyond the last seq published whole (ignored)
	StatusNeverSent         uint64 // position reports of a sender with no command in the stream (kept, never slow the stream)
	StandbyAcks             uint64 // position reports of standby sequencers (wire.StatusStandby), queued for TakeStandbyAcks
	StandbyAcksDropped      uint64 // standby acks dropped: more distinct members than the queue holds between two drains
	FlowPaused              uint64 // command frames not taken: the slowest receiver that matters is a flow window behind
	Naks                    uint64 // NAKs received for this session
	NaksBeyondTail          uint64 // NAKs starting after the last published seq (ignored)
	Retransmitted           uint64 // packets sent again in answer to NAKs
	RepairsMulticast        uint64 // NAK answers published to everyone (several receivers asked)
	Throttled               uint64 // NAK answers cut short by RetransmitBytesPerSecond
	SourceThrottled         uint64 // NAK answers cut short by NakSourceBytesPerSecond (one source's budget)
	Gones                   uint64 // Gone replies (range left the ring)
	Heartbeats              uint64 // heartbeats published
	Packets                 uint64 // data packets published (first sends)
	Messages                uint64 // sequence numbers assigned
	TimersFired             uint64 // InternalTimer messages emitted
	TimerSkipped            uint64 // periods of periodic timers skipped (sequencer time jumped past them)
	ActivationSwitch        uint64 // hot-hot switches by ActiveTimeout (or a restart of the active instance)
	ActivityRestarts        uint64 // hot-hot timeouts restarted: the core itself had not run for ActiveTimeout
	RejectedNotActive       uint64 // hot-hot commands of an instance that is not active (fenced)
	RejectedDuplicateID     uint64 // hot-hot commands whose id the account already had sequenced
	HotHotMismatch          uint64 // frames dropped: hot-hot flag differs from the incarnation's
}

// Core is the sequencing state machine. See the package comment.
type Core struct {
	cfg     Config
	session uint64
	epoch   uint32
	// epochStart is the first seq of this epoch (FirstSeq): every header
	// carries it, so a receiver that missed the EpochStart record still
	// knows where the epoch begins.
	epochStart uint64

	// Clocks (see advance): mono drives every timeout; now is sequencer
	// time, the stamp of records, which never goes back.
	now         int64
	mono        int64
	clockSet    bool  // a reading was taken
	anchorMono  int64 // mono at the last anchor
	anchorStamp int64 // sequencer time at the last anchor

	nextSeq    uint64 // next sequence number to assign
	tail       uint64 // last seq with at least one published record
	published  uint64 // last seq whose every byte has been published
	stable     uint64
	stableSent uint64 // stable carried by the last packet or heartbeat published
	lastSend   int64  // mono time of the last publish (drives heartbeats)
	hbEvery    int64  // the idle heartbeat interval now: HeartbeatInterval, doubling while idle up to hbMax
	hbMax      int64  // MaxHeartbeatInterval, at least HeartbeatInterval

	// The open packet is built in place in the ring region it will occupy.
	w         wire.PacketWriter
	open      bool
	openInfo  PacketInfo // what the open packet holds (Count set at publish)
	openedAt  int64      // mono time the open packet was started (FlushDelay)
	partial   bool       // the open packet ends with a non-final fragment
	emptyRoom int        // payload bytes one whole record can carry in an empty packet

	ring     ring
	store    RetransmitStore // answers NAKs: the ring
	history  RetransmitStore // earlier epochs' packets (NewPrimary), or nil
	cuts     []EpochCut      // earlier epochs' ends (Takeover.Cuts)
	repairer *Repairer       // the repair policy (shared with replayers)
	answer   Answer          // scratch for stepNak
	// out is the output since the last Advance (Ready). retainMax is
	// what the shell's transport holds by reference (SetRetained; 0: the
	// data packets are not Retained); retainBudget the Ready bytes past
	// which a retaining Core would overwrite what it queued.
	out          output
	retainMax    int
	retainBudget int
	// state is what the stream determines (dedupe, activation, timers):
	// every record the core emits is applied to it at once.
	state State
	live  []liveSender // per State sender index: last frame heard
	// activityAt is the mono time of the last hot-hot activity check
	// (checkActivity; activitySet once there was one): a gap of a whole
	// ActiveTimeout since says this core did not run, not that the
	// instances were silent.
	activityAt  int64
	activitySet bool
	asm         reassemblies
	// asmExpireAt: the next Tick at or after it drops reassemblies silent
	// for ReassemblyTimeout.
	asmExpireAt int64

	// Scratch values reused on every call so that nothing escapes to the heap.
	cmd wire.CommandPacket
	c   wire.Command
	rec wire.Record
	app wire.Record // the record being applied to state
	nak wire.Nak
	// status is the last receiver report decoded; flow tracks them all.
	status wire.Status
	flow   flowTable
	// acks are the standby acks not yet taken by the shell (standby.go).
	acks []StandbyAck
	in   wire.Internal
	tr   wire.TimerRequest
	ibuf [wire.InternalBytes]byte

	stats Stats
}

// New validates cfg and returns a Core whose first records are
// InternalSessionStart (only when FirstSeq == 1) and InternalEpochStart,
// sequenced at StartTime and published by the first Flush or Tick. The
// dedupe table is allocated here; the retransmit ring grows as it fills,
// up to RingBytes. Its output is the Ready value.
func New(cfg Config) (*Core, error) {
	return build(cfg, Takeover{})
}

// Takeover is what a new primary inherits from the epochs before its own.
type Takeover struct {
	// State is the stream-derived State applied up to exactly the cut
	// (Config.FirstSeq-1): a standby's, or one rebuilt from a store. It is
	// copied; the caller keeps it.
	State *State
	// History holds the earlier epochs' packets (a standby's or
	// replayer's store), so the new primary answers NAKs for seqs at or
	// below the cut; nil: such NAKs get Gone. The Core reads it and may
	// patch the stable and flags of the packets it resends (see
	// RetransmitStore).
	History RetransmitStore
	// Cuts are the ends of earlier epochs, from the failover state
	// (oldest first; copied): a history packet of one of them is stamped
	// no higher than its end, also when the History's epoch table does
	// not know it (see Answer.Cuts).
	Cuts []EpochCut
}

// EpochCut is the last seq of an ended epoch (its cut).
type EpochCut struct {
	Epoch uint32
	Last  uint64
}

// cutOf is epoch e's cut in cuts (oldest first).
func cutOf(cuts []EpochCut, e uint32) (uint64, bool) {
	for i := len(cuts) - 1; i >= 0; i-- {
		if cuts[i].Epoch == e {
			return cuts[i].Last, true
		}
	}
	return 0, false
}

// NewPrimary starts a new epoch (Config.Epoch, from Config.FirstSeq = the
// cut + 1) as the primary after a failover: its dedupe table, incarnations,
// timers and activation are t.State's, so resent commands already in the
// stream are still dropped, and its clock starts no earlier than the last
// stamp of t.State. It fails (ErrTakeover) when t.State is not at the cut.
func NewPrimary(cfg Config, t Takeover) (*Core, error) {
	if t.State == nil || t.State.LastSeq() != cfg.FirstSeq-1 {
		at := uint64(0)
		if t.State != nil {
			at = t.State.LastSeq()
		}
		return nil, fmt.Errorf("%w: the state is at seq %d, the new epoch starts at %d", ErrTakeover, at, cfg.FirstSeq)
	}
	cfg.StartTime = max(cfg.StartTime, t.State.LastTime())
	return build(cfg, t)
}

// build is New and NewPrimary: a fresh State, or t.State taken over.
func build(cfg Config, t Takeover) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	c := &Core{
		cfg:        cfg,
		session:    cfg.Session,
		epoch:      cfg.Epoch,
		epochStart: cfg.FirstSeq,
		now:        cfg.StartTime,
		nextSeq:    cfg.FirstSeq,
		tail:       cfg.FirstSeq - 1,
		published:  cfg.FirstSeq - 1,
		emptyRoom:  cfg.MaxPacketBytes - wire.PacketHeaderBytes - wire.RecordHeaderBytes,
		hbEvery:    int64(cfg.HeartbeatInterval),
		hbMax:      int64(max(cfg.MaxHeartbeatInterval, cfg.HeartbeatInterval)),
	}
	// Whatever came before FirstSeq was made stable by the previous epoch's
	// cut (or does not exist).
	c.stable = cfg.FirstSeq - 1
	c.stableSent = c.stable
	c.ring.init(cfg.RingBytes, cfg.MaxPacketBytes)
	c.store = &c.ring
	c.state.init(cfg.MaxSenders, cfg.FirstSeq)
	if t.State != nil {
		if err := c.state.Restore(t.State.Snapshot()); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrTakeover, err)
		}
		if c.state.maxSenders != cfg.MaxSenders {
			return nil, fmt.Errorf("%w: the state holds up to %d senders, MaxSenders is %d", ErrTakeover, c.state.maxSenders, cfg.MaxSenders)
		}
		c.history = t.History
		c.cuts = slices.Clone(t.Cuts)
	}
	c.live = make([]liveSender, cfg.MaxSenders)
	c.asm.init()
	c.flow.init(cfg.MaxReceivers)
	c.acks = make([]StandbyAck, 0, maxPendingAcks)
	// The bucket holds 50ms of the rate, and at least one packet so that a
	// tiny rate still makes progress. Its answers are built in the
	// output's arena (a repair patches the headers of a copy, never of a
	// ring packet a Ready or a transport still holds) and go to Ready.
	c.repairer = NewRepairer(cfg.RepairConfig(), outSink{&c.out})
	c.repairer.arena = &c.out.arena
	c.out.ready.Packets = make([]Packet, 0, 64)
	c.out.ready.Replies = make([]Reply, 0, 16)
	c.out.pend = make([]int32, 0, 64)
	if cfg.FirstSeq == 1 {
		c.in = wire.Internal{Type: wire.InternalSessionStart, Value: uint64(cfg.StartTime)}
		c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	}
	// Extra names the epoch of the record before this one (the State's,
	// at the cut; 0 when unknown or none): epochs between it and this
	// one left nothing, and a receiver that never heard them learns so
	// here (receiver.learnEmptyEpochs), or it could not tell where that
	// earlier epoch was cut.
	prev, _ := c.state.Epoch()
	c.in = wire.Internal{Type: wire.InternalEpochStart, Value: cfg.FirstSeq, Extra: int64(prev)}
	c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
	return c, nil
}

// Step handles one frame from the network: a command frame or a NAK. A
// malformed frame returns a sentinel error (wire's or this package's) and
// changes nothing but the Malformed counter. Frames that are valid but
// ignored (duplicates, another session, stale incarnation) return nil and
// are counted. Records land in the open packet; full packets go to Ready
// at once, the rest by Flush.
func (c *Core) Step(now Time, frame []byte, from transport.Peer) error {
	k, err := wire.PeekKind(frame)
	if err != nil {
		c.stats.Malformed++
		return err
	}
	switch k {
	case wire.KindCommand:
		return c.stepCommand(now, frame)
	case wire.KindNak:
		return c.stepNak(now, frame, from)
	case wire.KindStatus:
		return c.stepStatus(now, frame, from)
	}
	c.stats.Malformed++
	return wire.ErrKind
}

// Flush publishes the open packet (to Ready). The shell calls it when its input is
// drained, so a lone command is not held back waiting for company.
func (c *Core) Flush(now Time) {
	c.advance(now)
	if c.open {
		c.publishOpen()
	}
}

// Tick does the time-driven work, in this order: hot-hot activity
// timeouts, centralized timers that are due, publication of the open
// packet (when Tick added records or it is older than FlushDelay), and a
// heartbeat when nothing was published for HeartbeatInterval or stable
// moved since the last header went out.
func (c *Core) Tick(now Time) {
	c.advance(now)
	before := c.nextSeq
	if c.cfg.ActiveTimeout > 0 {
		c.checkActivity()
	}
	c.fireTimers()
	c.tickFlow()
	if len(c.asm.index) > 0 && c.mono >= c.asmExpireAt {
		c.expireReassemblies()
	}
	if c.open && (c.nextSeq != before || c.mono-c.openedAt >= int64(c.cfg.FlushDelay)) {
		c.publishOpen()
	}
	if !c.open {
		if c.mono-c.lastSend >= c.hbEvery {
			c.heartbeat()
			c.hbEvery = min(2*c.hbEvery, c.hbMax)
		} else if c.stable != c.stableSent {
			c.heartbeat()
		}
	}
}

// Emit sequences an internal message generated by the sequencer itself
// (FlagInternal|FlagSeqGen, record account/instance/cmdSeq zero) and
// returns its seq. m.Epoch is replaced by the core's epoch. Like Step, it
// leaves the record in the open packet for Flush. A message the State
// cannot apply (a type it does not know, or one naming a new sender while
// the sender table is full) is not emitted: Emit returns 0.
func (c *Core) Emit(now Time, m *wire.Internal) uint64 {
	c.advance(now)
	if !c.state.canApply(m) {
		return 0
	}
	c.in = *m
	return c.emitInternal(wire.FlagInternal|wire.FlagSeqGen, 0, 0, 0)
}

// SetStable records that the sequencer group holds every seq up to seq
// (the cluster's quorum). Stable never moves back nor beyond what was
// published. The next packet carries it; if none is due, the next Tick
// publishes a heartbeat with it.
func (c *Core) SetStable(seq uint64) {
	if seq > c.published {
		seq = c.published
	}
	if seq > c.stable {
		c.stable = seq
		if c.flow.byStable {
			c.updateFlowLimit() // the quorum moved: so may the flow limit
		}
	}
}

// NextSeq is the sequence number the next message will get.
func (c *Core) NextSeq() uint64 { return c.nextSeq }

// LastTime is sequencer time: the stamp the next record gets (see Time).
func (c *Core) LastTime() int64 { return c.now }

// Stable is the stable seq the next header will carry.
func (c *Core) Stable() uint64 { return c.stable }

// Published is the last seq whose every byte has been published.
func (c *Core) Published() uint64 { return c.published }

// State is the stream-derived state, as of the last record emitted (the
// open packet included). It is the Core's own: read it, Snapshot it, but
// do not Apply to it.
func (c *Core) State() *State { return &c.state }

// Stats returns a copy of the counters.
func (c *Core) Stats() Stats {
	st := c.stats
	r := c.repairer.Stats()
	st.Retransmitted, st.RepairsMulticast, st.Throttled, st.Gones = r.Retransmitted, r.RepairsMulticast, r.Throttled, r.Gones
	st.SourceThrottled = r.SourceThrottled
	return st
}
