package receiver

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/wire"
)

// Mode selects when a received message is delivered.
type Mode uint8

const (
	// Safe delivers a message only once its seq is stable (held by a quorum
	// of the sequencer group), so a failover can never take it back.
	Safe Mode = iota
	// Fast delivers on arrival, in order. If a failover later cuts a message
	// that was delivered, the receiver stops with ErrDiverged.
	Fast
)

func (m Mode) String() string {
	if m == Fast {
		return "fast"
	}
	return "safe"
}

// Source names where a NAK goes. Sequencer (0) is the sequencer's
// retransmit ring; 1..Config.RepairSources are other sources the shell can
// address (replayers, standbys), in the shell's order.
type Source uint8

// Sequencer is the default repair source.
const Sequencer Source = 0

// Config configures a Receiver. Start from DefaultConfig.
type Config struct {
	Mode    Mode
	Session uint64 // 0: follow the live session (see the package comment)

	// Rewind makes a late joiner repair the stream from RewindFrom (seq 1
	// when 0) instead of starting at the first live seq: it gets only
	// what its repair sources still hold, and a Gone for the rest stops it
	// with ErrUnrecoverable naming the range. Off by default until
	// replayers exist.
	Rewind     bool
	RewindFrom uint64
	// RewindEpoch is the epoch of seq RewindFrom-1 when the shell already
	// holds it (a replayer or standby reopened on its store; 0: unknown).
	// A new epoch that starts at or below RewindFrom-1 cut those seqs
	// only if it is newer than RewindEpoch: without it, such an epoch
	// stops the receiver with ErrDiverged, which is wrong when the
	// first packet heard after the restart was a deposed primary's,
	// of an epoch older than what the store holds.
	RewindEpoch uint32

	// Identity, reported in Status frames. ReadOnly receivers (tails) are
	// never waited for by flow control; Replayer marks a receiver that
	// persists the stream.
	Account     wire.Account
	Instance    uint8
	Incarnation uint64
	ReadOnly    bool
	Replayer    bool

	// Persist fills Ready.Persist with every stream frame that brought
	// records new to this receiver (replayers, standbys).
	Persist bool

	NakDelay    time.Duration // first NAK after a random delay in [NakDelay/2, 3*NakDelay/2)
	NakMaxDelay time.Duration // exponential backoff cap while a gap stays open
	Seed        uint64        // seeds the NAK jitter so that a simulation replays

	// RepairSources is how many sources besides the sequencer the shell
	// can send NAKs to (Source 1..RepairSources). NAKs go to
	// PreferredSource first; a Gone from the source asked moves to the
	// next one that has not said Gone for the gap (cyclically); only a
	// Gone from every distinct source is fatal, so a source that is
	// silent for a while (a replayer restarting) is asked again.
	RepairSources   int
	PreferredSource Source
	// RepairSourceTimeout: a repair source asked for a gap that brings
	// neither repair nor Gone for this long is left for the next one
	// (counted in SourceTimeouts), so a dead or cut-off replayer is not
	// asked forever. Any progress on the gap restarts it.
	RepairSourceTimeout time.Duration

	// PendingRecords bounds the receive ring: records ahead of the next one
	// to deliver (out of order, or not yet stable) are copied into it.
	// Power of two.
	PendingRecords int
	// HoldBytes: in safe mode, records that arrive in order and wait only
	// for stable (every record, behind a sequencer group) are held in the
	// packet that carried them, copied whole into an arena of this many
	// bytes (allocated on first use), instead of record by record into the
	// ring; past it they go to the ring. It should hold what a group
	// publishes in a standby round trip under load: in `seqd bench
	// --sequencers 3` about 12k records of 256 bytes, 3.5 MiB, in 64 KiB
	// packets. 0: the ring only.
	HoldBytes int
	// MaxReceiveMessageBytes is the largest message this receiver can
	// deliver; a larger one in the stream stops it with ErrTooLarge. It is
	// independent of what the node may send.
	MaxReceiveMessageBytes int
	// MaxReassemblyBytes bounds the memory of buffered records beyond the
	// ring's fixed arena (fragments being reassembled, large records held
	// ahead of delivery), across all messages. Buffers grow as bytes
	// arrive, never to a size a packet declares.
	MaxReassemblyBytes int

	// StatusInterval: a Status frame (position report for the sequencer's
	// flow control) goes out at most this often when the position moved,
	// and every statusKeepalive intervals when it did not. 0: none.
	StatusInterval time.Duration

	// StableLeadSeqs: a header whose stable is more than this beyond the
	// highest seq this receiver has seen is not believed (counted as
	// WildStable, its stable ignored).
	StableLeadSeqs uint64

	// SessionTimeout: the followed session is gone once it has been
	// silent this long; then, when another session publishes, a receiver
	// that delivered nothing switches to it, one that did stops with
	// ErrNewSession. While the followed one publishes, another session's
	// packets are dropped (ErrOtherSession), however long they come.
	SessionTimeout time.Duration

	// MaxEpochJump: a header of an epoch more than this beyond the current
	// one is not followed while the current epoch publishes (counted as
	// EpochJumpHeld, dropped, ErrEpochJump); it is followed once it has
	// been heard for SessionTimeout while the current epoch was silent as
	// long. See Receiver.farEpoch for why the bound is sound.
	MaxEpochJump uint32
}

// DefaultConfig returns the defaults: safe mode, starting live, status every
// 10ms.
//
// StatusInterval is 10ms: the sequencer's flow control forgets a receiver
// after 2s without a report and must react well before a receiver falls off
// a ring that holds a few hundred milliseconds at full rate; a 56-byte frame
// every 10ms is 5.6 kB/s per receiver, and an idle receiver sends one every
// half second only.
func DefaultConfig() Config {
	return Config{
		Mode:                   Safe,
		NakDelay:               time.Millisecond,
		NakMaxDelay:            100 * time.Millisecond,
		RepairSourceTimeout:    time.Second,
		PendingRecords:         1 << 16,
		HoldBytes:              16 << 20,
		MaxReceiveMessageBytes: 64 << 20,
		MaxReassemblyBytes:     128 << 20,
		StatusInterval:         10 * time.Millisecond,
		StableLeadSeqs:         1 << 20,
		SessionTimeout:         time.Second,
		MaxEpochJump:           16,
	}
}

// Limits checked by Validate.
const (
	minPendingRecords = 16
	maxPendingRecords = 1 << 22
	minHoldBytes      = 1 << 16 // the largest packet fits
	maxHoldBytes      = 1 << 30
)

// Validate reports the first bad field and its allowed range.
func (c Config) Validate() error {
	bad := func(field string, v any, allowed string) error {
		return fmt.Errorf("%w: %s = %v, want %s", ErrConfig, field, v, allowed)
	}
	switch {
	case c.Mode != Safe && c.Mode != Fast:
		return bad("Mode", c.Mode, "Safe (0) or Fast (1)")
	case c.NakDelay <= 0:
		return bad("NakDelay", c.NakDelay, "> 0")
	case c.NakMaxDelay < c.NakDelay:
		return bad("NakMaxDelay", c.NakMaxDelay, fmt.Sprintf(">= NakDelay (%v)", c.NakDelay))
	case c.RepairSources < 0 || c.RepairSources > 254:
		return bad("RepairSources", c.RepairSources, "0..254")
	case c.RepairSourceTimeout <= 0:
		return bad("RepairSourceTimeout", c.RepairSourceTimeout, "> 0")
	case int(c.PreferredSource) > c.RepairSources:
		return bad("PreferredSource", c.PreferredSource, fmt.Sprintf("0..RepairSources (%d)", c.RepairSources))
	case c.PendingRecords < minPendingRecords || c.PendingRecords > maxPendingRecords || c.PendingRecords&(c.PendingRecords-1) != 0:
		return bad("PendingRecords", c.PendingRecords, fmt.Sprintf("a power of two in %d..%d", minPendingRecords, maxPendingRecords))
	case c.HoldBytes != 0 && (c.HoldBytes < minHoldBytes || c.HoldBytes > maxHoldBytes):
		return bad("HoldBytes", c.HoldBytes, fmt.Sprintf("0 or %d..%d", minHoldBytes, maxHoldBytes))
	case c.MaxReceiveMessageBytes < 1 || c.MaxReceiveMessageBytes > wire.MaxMessageBytes:
		return bad("MaxReceiveMessageBytes", c.MaxReceiveMessageBytes, fmt.Sprintf("1..%d", wire.MaxMessageBytes))
	case c.MaxReassemblyBytes < c.MaxReceiveMessageBytes:
		return bad("MaxReassemblyBytes", c.MaxReassemblyBytes, fmt.Sprintf(">= MaxReceiveMessageBytes (%d)", c.MaxReceiveMessageBytes))
	case c.StatusInterval < 0:
		return bad("StatusInterval", c.StatusInterval, ">= 0 (0: no status)")
	case c.StableLeadSeqs < 1:
		return bad("StableLeadSeqs", c.StableLeadSeqs, ">= 1")
	case c.SessionTimeout <= 0:
		return bad("SessionTimeout", c.SessionTimeout, "> 0")
	case c.MaxEpochJump < 1:
		return bad("MaxEpochJump", c.MaxEpochJump, ">= 1")
	}
	return nil
}
