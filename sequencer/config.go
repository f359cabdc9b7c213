package sequencer

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/wire"
)

// Config sets up a Core. Start from DefaultConfig and set Session.
type Config struct {
	// Session is the session id stamped on every packet; must be != 0.
	Session uint64
	// Epoch is the epoch this core sequences (>= 1).
	Epoch uint32
	// FirstSeq is the first sequence number to assign: 1 for a fresh
	// session (the core then starts with InternalSessionStart), cut+1 for a
	// new epoch after failover.
	FirstSeq uint64
	// StartTime (ns) is the clock floor: sequencer time starts at the larger
	// of it and the first wall reading, and advances from there,
	// so a new primary carries on from the last timestamp of the old one.
	StartTime int64
	// MaxPacketBytes is the size limit of a stream packet (UDP payload).
	MaxPacketBytes int
	// HeartbeatInterval: when nothing was published for this long, Tick
	// publishes a heartbeat so receivers learn the tail and detect loss.
	HeartbeatInterval time.Duration
	// MaxHeartbeatInterval: while the stream stays idle, each heartbeat
	// waits twice as long as the one before, from HeartbeatInterval up to
	// this; the next published packet starts again from HeartbeatInterval.
	// A receiver still learns the tail one HeartbeatInterval after the
	// last packet (the first heartbeat is not delayed); only the repeats
	// thin out, so an idle sequencer and every receiver wake a fraction as
	// often. The cost: a command lost on an idle stream is resent at the
	// first packet its node hears after its timeout, up to this much later.
	// 0 or equal to HeartbeatInterval: a fixed interval.
	MaxHeartbeatInterval time.Duration
	// FlushDelay bounds how long Tick lets an open (unpublished) packet wait
	// when the shell did not call Flush; 0 makes every Tick flush.
	FlushDelay time.Duration
	// RingBytes is the retransmit ring's size: the newest published
	// packets are kept, back to back, up to this many bytes (less at most
	// one packet of padding per chunk). The memory is allocated in chunks
	// as the ring fills (4 MiB each; one chunk of RingBytes rounded up to a
	// power of two for a ring below 4 MiB), so an idle sequencer holds
	// little; an index of 32 bytes per retained packet comes on top.
	RingBytes int
	// NakAnswerBytes caps the answer to one NAK (at least one packet is
	// sent); the receiver asks again for the rest, which paces repair.
	NakAnswerBytes int
	// RetransmitBytesPerSecond caps the bandwidth of repairs (a token
	// bucket holding up to 50ms of it), so that a NAK storm cannot starve
	// the live stream; a throttled NAK is answered in part and the
	// receiver asks again after its backoff. 0: no cap.
	RetransmitBytesPerSecond int64
	// NakSourceBytesPerSecond and NakSourceBurstBytes cap the repairs
	// answered to one NAK sender (RepairConfig.SourceBytesPerSecond):
	// a fresh source gets at most the burst at once, then the rate. 0:
	// no per-source cap.
	NakSourceBytesPerSecond int64
	NakSourceBurstBytes     int
	// MulticastRepairWindow: when a second receiver asks for the same seq
	// within this window, the answer is published to everyone instead of
	// sent to one (PGM/Aeron-style), and receivers that were about to ask
	// cancel their NAKs. 0: always unicast.
	MulticastRepairWindow time.Duration
	// MaxMessageBytes is the largest command payload accepted (whole or
	// reassembled from fragments).
	MaxMessageBytes int
	// MaxSenders is the capacity of the dedupe table, allocated up front.
	// A new sender in a full table replaces the least recently active one
	// (whose last record is oldest) if that one's last record is at least
	// SenderIdleTimeout old; otherwise its command is rejected
	// (RejectSenderTableFull). Every member of a sequencer group must use
	// the same value: standbys applying the stream forget the same sender.
	MaxSenders int
	// SenderIdleTimeout is how long (sequencer time) a sender must have
	// had no record in the stream before a full table may forget it.
	SenderIdleTimeout time.Duration
	// MaxReassemblyBytes bounds the memory of commands being reassembled
	// from fragments, all senders together, charged as bytes arrive
	// (never by the total a fragment declares). A command whose next
	// fragment does not fit is rejected (RejectReassemblyFull).
	// Buffers above 1 MiB are released once their command is sequenced.
	MaxReassemblyBytes int
	// ReassemblyTimeout: a reassembly that got no fragment for this long is
	// dropped and its budget freed (its sender died mid-command, or moved
	// on); a resend starts it again.
	ReassemblyTimeout time.Duration
	// MaxTimersPerSender caps the centralized timers one (account,
	// instance) may hold; setting one more is rejected (RejectTimerCap).
	MaxTimersPerSender int
	// MinTimerPeriod is the shortest period of a periodic centralized
	// timer; a shorter one is rejected (RejectTimerRequest).
	MinTimerPeriod time.Duration
	// MaxTimerFiresPerSecond bounds how often one (account, instance)'s
	// periodic timers may fire together (the sum of 1/period over them):
	// a timer that would take the sender past it is rejected
	// (RejectTimerRate), so one sender cannot fill the stream with timer
	// records (1024 timers at 1ms were a million a second). The default,
	// 1024, allows MaxTimersPerSender timers at one second, or one at
	// MinTimerPeriod. One-shot timers do not count (MaxTimersPerSender
	// bounds them).
	MaxTimerFiresPerSecond int
	// ActiveTimeout (hot-hot): when the active instance of an account has
	// been silent this long and another instance was heard within it, the
	// other becomes active. 0 never switches.
	ActiveTimeout time.Duration
	// FlowWindowPercent bounds how far the stream may run ahead of the
	// slowest receiver that sends commands (as its periodic status reports
	// tell), in percent of RingBytes: past it, commands wait until that
	// receiver catches up, so it never falls off the retransmit ring under
	// load. Read-only receivers (tails) never slow the stream; standby
	// sequencers slow it only as a quorum (stable), never one by one. The rest of
	// the ring absorbs what is published while reports are in flight.
	// The window should also fit in a receiver's socket buffer: what a
	// descheduled receiver has not read piles up there, and beyond it the
	// kernel drops datagrams, which cost NAKs, repairs and resends of
	// whole windows (at 50%, 128 MiB of the default ring ahead of a node
	// with the CLI's 32 MiB SO_RCVBUF, a loaded 2-core machine's batched
	// bench fell from 1.5-1.9M to 0.75-0.9M msg/s in one run of two).
	// The default, 10% of the 256 MiB ring, is 25.6 MiB.
	// 0: no flow control.
	FlowWindowPercent int
	// FlowReceiverTimeout: a receiver whose report is older than this no
	// longer holds the stream back (it died, or it is cut off and will
	// repair or rewind when it returns).
	FlowReceiverTimeout time.Duration
	// MaxReceivers bounds the receivers whose positions are tracked; the
	// least recently heard is forgotten first.
	MaxReceivers int
	// Standalone: no standbys, so stable is the last seq published. When
	// false, stable moves only through SetStable (the cluster's quorum).
	Standalone bool
}

// DefaultConfig returns the defaults; Session is left 0 and must be set.
func DefaultConfig() Config {
	return Config{
		Epoch:                1,
		FirstSeq:             1,
		MaxPacketBytes:       wire.DefaultMaxPacketBytes,
		HeartbeatInterval:    10 * time.Millisecond,
		MaxHeartbeatInterval: 50 * time.Millisecond,
		FlushDelay:           time.Millisecond,
		RingBytes:            256 << 20,
		NakAnswerBytes:       1 << 20,
		// 128 KiB at once and 64 MiB/s per source: a receiver repairs a
		// loss burst of a hundred packets in one answer and a long gap at
		// a LAN's pace, while a 48-byte NAK buys at most 128 KiB.
		NakSourceBytesPerSecond: 64 << 20,
		NakSourceBurstBytes:     128 << 10,
		MulticastRepairWindow:   2 * time.Millisecond,
		MaxMessageBytes:         16 << 20,
		MaxSenders:              4096,
		MaxReassemblyBytes:      256 << 20,
		FlowWindowPercent:       10,
		FlowReceiverTimeout:     2 * time.Second,
		MaxReceivers:            1024,
		ReassemblyTimeout:       30 * time.Second,
		SenderIdleTimeout:       10 * time.Minute,
		MaxTimersPerSender:      1024,
		MinTimerPeriod:          time.Millisecond,
		MaxTimerFiresPerSecond:  1024,
		Standalone:              true,
	}
}

// Limits checked by Validate.
const (
	minPacketBytes = 256
	maxPacketBytes = 65507 // largest UDP payload over IPv4
	maxRingBytes   = 1 << 40
	maxSenders     = 1 << 20
	// maxTimersPerSender keeps timer counts in an int32.
	maxTimersPerSender = 1 << 20
	// maxTimerFiresPerSecond: a sender's timer rate is kept in fires per
	// second times timerRateScale in a uint64.
	maxTimerFiresPerSecond = 1 << 30
)

// Validate reports the first field outside its allowed range.
func (c Config) Validate() error {
	bad := func(field string, v any, want string) error {
		return config.New(ErrConfig, field, v, want)
	}
	switch {
	case c.Session == 0:
		return bad("Session", c.Session, "a non-zero session id")
	case c.Epoch == 0:
		return bad("Epoch", c.Epoch, ">= 1")
	case c.FirstSeq == 0:
		return bad("FirstSeq", c.FirstSeq, ">= 1")
	case c.StartTime < 0:
		return bad("StartTime", c.StartTime, ">= 0")
	case c.MaxPacketBytes < minPacketBytes || c.MaxPacketBytes > maxPacketBytes:
		return bad("MaxPacketBytes", c.MaxPacketBytes, fmt.Sprintf("%d..%d", minPacketBytes, maxPacketBytes))
	case c.HeartbeatInterval < time.Microsecond || c.HeartbeatInterval > time.Minute:
		return bad("HeartbeatInterval", c.HeartbeatInterval, "1µs..1m")
	case c.MaxHeartbeatInterval != 0 && (c.MaxHeartbeatInterval < c.HeartbeatInterval || c.MaxHeartbeatInterval > time.Minute):
		return bad("MaxHeartbeatInterval", c.MaxHeartbeatInterval, fmt.Sprintf("0 or HeartbeatInterval (%v)..1m", c.HeartbeatInterval))
	case c.FlushDelay < 0 || c.FlushDelay > time.Second:
		return bad("FlushDelay", c.FlushDelay, "0..1s")
	case c.RingBytes < 2*c.MaxPacketBytes || c.RingBytes > maxRingBytes:
		return bad("RingBytes", c.RingBytes, fmt.Sprintf("2*MaxPacketBytes (%d)..%d", 2*c.MaxPacketBytes, maxRingBytes))
	case c.NakAnswerBytes < 1:
		return bad("NakAnswerBytes", c.NakAnswerBytes, ">= 1 (one packet is always sent)")
	case c.NakSourceBytesPerSecond < 0:
		return bad("NakSourceBytesPerSecond", c.NakSourceBytesPerSecond, ">= 0 (0: no cap)")
	case c.NakSourceBurstBytes < 0:
		return bad("NakSourceBurstBytes", c.NakSourceBurstBytes, ">= 0 (at least one packet is allowed)")
	case c.RetransmitBytesPerSecond < 0:
		return bad("RetransmitBytesPerSecond", c.RetransmitBytesPerSecond, ">= 0 (0: no cap)")
	case c.MulticastRepairWindow < 0 || c.MulticastRepairWindow > time.Second:
		return bad("MulticastRepairWindow", c.MulticastRepairWindow, "0..1s (0: always unicast)")
	case c.MaxMessageBytes < 1 || c.MaxMessageBytes > wire.MaxMessageBytes:
		return bad("MaxMessageBytes", c.MaxMessageBytes, fmt.Sprintf("1..%d", wire.MaxMessageBytes))
	case c.MaxReassemblyBytes < c.MaxMessageBytes:
		return bad("MaxReassemblyBytes", c.MaxReassemblyBytes, fmt.Sprintf(">= MaxMessageBytes (%d)", c.MaxMessageBytes))
	case c.MaxSenders < 1 || c.MaxSenders > maxSenders:
		return bad("MaxSenders", c.MaxSenders, fmt.Sprintf("1..%d", maxSenders))
	case c.SenderIdleTimeout < 0:
		return bad("SenderIdleTimeout", c.SenderIdleTimeout, ">= 0")
	case c.ReassemblyTimeout < time.Millisecond:
		return bad("ReassemblyTimeout", c.ReassemblyTimeout, ">= 1ms")
	case c.MaxTimersPerSender < 1 || c.MaxTimersPerSender > maxTimersPerSender:
		return bad("MaxTimersPerSender", c.MaxTimersPerSender, fmt.Sprintf("1..%d", maxTimersPerSender))
	case c.MinTimerPeriod < 0:
		return bad("MinTimerPeriod", c.MinTimerPeriod, ">= 0")
	case c.MaxTimerFiresPerSecond < 1 || c.MaxTimerFiresPerSecond > maxTimerFiresPerSecond:
		return bad("MaxTimerFiresPerSecond", c.MaxTimerFiresPerSecond, fmt.Sprintf("1..%d", maxTimerFiresPerSecond))
	case c.ActiveTimeout < 0:
		return bad("ActiveTimeout", c.ActiveTimeout, ">= 0 (0 = never switch)")
	case c.FlowWindowPercent < 0 || c.FlowWindowPercent > 90:
		return bad("FlowWindowPercent", c.FlowWindowPercent, "0..90 (0: no flow control)")
	case c.FlowReceiverTimeout < time.Millisecond || c.FlowReceiverTimeout > time.Hour:
		return bad("FlowReceiverTimeout", c.FlowReceiverTimeout, "1ms..1h")
	case c.MaxReceivers < 1 || c.MaxReceivers > 1<<16:
		return bad("MaxReceivers", c.MaxReceivers, "1..65536")
	}
	return nil
}

// RepairConfig is the repair policy's share of c (see Repairer).
func (c Config) RepairConfig() RepairConfig {
	return RepairConfig{
		NakAnswerBytes:           c.NakAnswerBytes,
		RetransmitBytesPerSecond: c.RetransmitBytesPerSecond,
		MulticastRepairWindow:    c.MulticastRepairWindow,
		MaxPacketBytes:           c.MaxPacketBytes,
		SourceBytesPerSecond:     c.NakSourceBytesPerSecond,
		SourceBurstBytes:         c.NakSourceBurstBytes,
	}
}
