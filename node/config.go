package node

import (
	"crypto/tls"
	"fmt"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// Mode selects when a received message is delivered (receiver.Mode).
type Mode = receiver.Mode

const (
	// Safe delivers a message only once its seq is stable (held by a quorum
	// of the sequencer group), so a failover can never take it back.
	Safe = receiver.Safe
	// Fast delivers on arrival, in order. If a failover later cuts a message
	// that was delivered, the node stops with ErrDiverged.
	Fast = receiver.Fast
)

// Config configures a Core (and the Node shell around it). Start from
// DefaultConfig: most defaults are not the zero value.
type Config struct {
	Account  string // sender name, 1..8 printable ASCII bytes; may be empty when ReadOnly
	Instance uint8  // hot-hot instances share an Account and differ here

	// Incarnation numbers this process's life. The sequencer resets its
	// duplicate table for (Account, Instance) when it sees a larger one, so
	// every start must use a larger value and command numbering restarts
	// at 1. 0 lets New pick the wall clock in ns; NewCore requires > 0.
	Incarnation uint64

	Session uint64 // 0 = lock onto the first session seen

	Mode     Mode
	ReadOnly bool // never sends commands (Send returns ErrReadOnly); still NAKs

	// Rewind makes a late joiner repair the stream from seq 1, or
	// RewindFrom (Rewinding() is true until it delivers the first seq it
	// saw live). With Node.SetRewindAddr it rewinds from a replayer over
	// TCP; without, it gets only what the sequencer's retransmit ring
	// still holds, and stops with ErrUnrecoverable naming the range
	// otherwise. Off by default: a node starts at the first seq seen live.
	Rewind bool
	// RewindFrom, with Rewind, is the first seq to deliver instead of 1
	// (0 and 1 both mean seq 1). Seqs before it are skipped; if it lies
	// beyond the live stream, delivery starts when it is published.
	RewindFrom uint64
	// RewindTLS, when set, makes rewinds (and ReplayRemote with
	// ReplayTLS) dial the replayer over TLS with it (a tlsconf
	// Identity's Client): a replayer whose rewind port serves TLS.
	RewindTLS *tls.Config

	Window int // max unacked commands in flight
	// WindowBytes bounds the payload bytes of unacked commands, so that a
	// few huge commands cannot queue gigabytes in the node and its
	// transport; one command is always allowed, whatever its size.
	WindowBytes int
	// BlockWhenFull makes Node.Send wait for window space, at most
	// SendTimeout, instead of returning ErrWindowFull at once. Callbacks
	// use Node.TrySend, which never waits.
	BlockWhenFull bool
	SendTimeout   time.Duration // longest wait of a blocking Node.Send
	// ResendInterval is the first resend timeout, used until an ack
	// latency was measured. From then on a command not seen in the stream
	// is resent after srtt + 4*rttvar of the measured latency (as TCP
	// does), kept within [MinResendInterval, MaxResendInterval] and
	// doubled while the oldest command keeps timing out. The timer runs
	// only while acks could come: from the last ack, and once the node
	// has read the stream up to where the command can appear. The 20ms
	// floor rides out the scheduling stalls of a loaded host (at 5ms, a
	// 3-node bench on 2 cores still resent 10k-50k commands a run).
	ResendInterval    time.Duration
	MinResendInterval time.Duration
	MaxResendInterval time.Duration

	NakDelay    time.Duration // first NAK after a random delay in [NakDelay/2, 3*NakDelay/2)
	NakMaxDelay time.Duration // exponential backoff cap while a gap stays open
	Seed        uint64        // seeds the NAK jitter so that a simulation replays

	MaxPacketBytes  int // size limit of command frames
	MaxMessageBytes int // largest command payload accepted by Send (the send limit)
	// MaxReceiveMessageBytes is the largest message of any account this
	// node can deliver (the receive limit, independent of the send limit):
	// a larger one stops it with ErrTooLargeReceived.
	MaxReceiveMessageBytes int
	// MaxReassemblyBytes bounds the memory of received messages held
	// ahead of delivery (fragments, large records), node-wide.
	MaxReassemblyBytes int
	// StatusInterval: how often the node reports its position to the
	// sequencer's flow control (wire.Status); 0: never.
	StatusInterval time.Duration // largest command payload accepted by Send

	// FlushDelay lets commands wait for company: a partly filled frame is
	// sent by Tick once its first command is this old. 0: every Tick and
	// Flush send it. A full frame is always sent at once.
	FlushDelay time.Duration

	// PendingRecords bounds the receive ring: records ahead of the next one
	// to deliver (out of order, or not yet stable) are copied into it.
	// Power of two.
	PendingRecords int

	// Replayers are the addresses of repair sources besides the sequencer
	// (replayers' NAK endpoints, host:port in the transport's terms). NAKs
	// go to the sequencer first and move to the next replayer when the
	// source asked says Gone (the ring no longer holds the range); a Gone
	// from every one stops the node with ErrUnrecoverable. The Node needs
	// a client that is a transport.Sourcer; a bare Core, an Output that is
	// a SourceOutput.
	Replayers []string
	// RepairSourceTimeout: a repair source that sends neither repair nor
	// Gone for this long is left for the next one (receiver.Config); 0
	// takes the receiver's default.
	RepairSourceTimeout time.Duration
	// SilenceTimeout: a Handler that is a SilenceHandler is told when no
	// stream packet came for this long (local clock), and again every 10
	// timeouts while the silence lasts. 0: never.
	SilenceTimeout time.Duration

	// HotHot makes this node an instance of a hot-hot account: every
	// instance of Account runs the same handler on the same stream, and
	// each command is numbered by the stream position of the handler call
	// that sent it (the seq being handled and the index of the send in
	// that call), so the instances give it the same id. Only the active
	// instance (decided in the stream) sends; a passive one keeps its
	// sends as shadow entries until the active's copy appears, and sends
	// those not yet seen when it is activated. A send that is not a
	// reaction to a stream message fails with ErrNotFromStream.
	// Centralized timers are refused (ErrHotHotTimer). docs/node.md.
	HotHot bool
	// HotHotHeartbeat: a hot-hot instance sends an empty frame when it
	// sent nothing for this long, so that the sequencer knows it is alive
	// (a passive one can take over, an idle active one is not replaced).
	// Keep it well below the sequencer's active-timeout.
	HotHotHeartbeat time.Duration
	// HotHotBacklog bounds the sends of a hot-hot instance not yet in the
	// stream beyond its window (a passive's shadow entries): past it the
	// node stops with ErrHotHotBacklog, since dropping one could lose a
	// command at the next switch.
	HotHotBacklog int
	// OOBInOrder: an out-of-band message handed to OOBHandler.OnOOB on
	// arrival is handed to OnMessage again in its place in the stream.
	// Off: OnMessage skips it (the send half still sees it).
	OOBInOrder bool
}

// DefaultConfig returns the defaults: safe mode, starting live, window
// 1024; the receiving ones come from receiver.DefaultConfig.
func DefaultConfig() Config {
	rd := receiver.DefaultConfig()
	return Config{
		Mode:              Safe,
		Window:            1024,
		WindowBytes:       32 << 20,
		SendTimeout:       10 * time.Second,
		ResendInterval:    50 * time.Millisecond,
		MinResendInterval: 20 * time.Millisecond,
		MaxResendInterval: 2 * time.Second,
		NakDelay:          rd.NakDelay,
		NakMaxDelay:       rd.NakMaxDelay,
		MaxPacketBytes:    wire.DefaultMaxPacketBytes,
		MaxMessageBytes:   16 << 20,
		PendingRecords:    rd.PendingRecords,

		MaxReceiveMessageBytes: rd.MaxReceiveMessageBytes,
		MaxReassemblyBytes:     rd.MaxReassemblyBytes,
		StatusInterval:         rd.StatusInterval,
		SilenceTimeout:         3 * time.Second,
		HotHotHeartbeat:        50 * time.Millisecond,
		HotHotBacklog:          1 << 16,
	}
}

// receiverConfig is the receiving half's share of c.
func (c Config) receiverConfig(account wire.Account) receiver.Config {
	rc := receiver.DefaultConfig()
	rc.Mode = c.Mode
	rc.Session = c.Session
	rc.Rewind, rc.RewindFrom = c.Rewind, c.RewindFrom
	rc.Account, rc.Instance, rc.Incarnation = account, c.Instance, c.Incarnation
	rc.ReadOnly = c.ReadOnly
	rc.NakDelay, rc.NakMaxDelay, rc.Seed = c.NakDelay, c.NakMaxDelay, c.Seed
	rc.PendingRecords = c.PendingRecords
	rc.MaxReceiveMessageBytes = c.MaxReceiveMessageBytes
	rc.MaxReassemblyBytes = c.MaxReassemblyBytes
	rc.StatusInterval = c.StatusInterval
	rc.RepairSources = len(c.Replayers)
	if c.RepairSourceTimeout > 0 {
		rc.RepairSourceTimeout = c.RepairSourceTimeout
	}
	return rc
}

// Limits checked by Validate.
const (
	maxWindow         = 1 << 20
	minPacketBytes    = wire.CommandHeaderBytes + wire.CommandRecordBytes + wire.FragmentHeaderBytes + 64
	maxPacketBytes    = 1 << 20
	minPendingRecords = 16
	maxPendingRecords = 1 << 22
	maxReplayers      = 64
)

// Validate reports the first bad field and its allowed range.
func (c Config) Validate() error {
	if c.Account == "" {
		if !c.ReadOnly {
			return config.New(ErrConfig, "Account", c.Account, "1..8 printable ASCII bytes (empty only with ReadOnly)")
		}
	} else if _, err := wire.ParseAccount(c.Account); err != nil {
		return config.New(ErrConfig, "Account", c.Account, "1..8 printable ASCII bytes")
	}
	if c.Mode != Safe && c.Mode != Fast {
		return config.New(ErrConfig, "Mode", uint8(c.Mode), "Safe (0) or Fast (1)")
	}
	if c.Window < 1 || c.Window > maxWindow {
		return config.New(ErrConfig, "Window", c.Window, fmt.Sprintf("1..%d", maxWindow))
	}
	if c.WindowBytes < 1 {
		return config.New(ErrConfig, "WindowBytes", c.WindowBytes, ">= 1")
	}
	if c.ResendInterval <= 0 {
		return config.New(ErrConfig, "ResendInterval", c.ResendInterval, "> 0")
	}
	if c.MinResendInterval <= 0 {
		return config.New(ErrConfig, "MinResendInterval", c.MinResendInterval, "> 0")
	}
	if c.MaxResendInterval < c.MinResendInterval {
		return config.New(ErrConfig, "MaxResendInterval", c.MaxResendInterval, fmt.Sprintf(">= MinResendInterval (%v)", c.MinResendInterval))
	}
	if c.ResendInterval > c.MaxResendInterval {
		return fmt.Errorf("%w: ResendInterval = %v, want <= MaxResendInterval (%v)", ErrConfig, c.ResendInterval, c.MaxResendInterval)
	}
	if c.BlockWhenFull && c.SendTimeout <= 0 {
		return config.New(ErrConfig, "SendTimeout", c.SendTimeout, "> 0 with BlockWhenFull")
	}
	if c.NakDelay <= 0 {
		return config.New(ErrConfig, "NakDelay", c.NakDelay, "> 0")
	}
	if c.NakMaxDelay < c.NakDelay {
		return config.New(ErrConfig, "NakMaxDelay", c.NakMaxDelay, fmt.Sprintf(">= NakDelay (%v)", c.NakDelay))
	}
	if c.MaxPacketBytes < minPacketBytes || c.MaxPacketBytes > maxPacketBytes {
		return config.New(ErrConfig, "MaxPacketBytes", c.MaxPacketBytes, fmt.Sprintf("%d..%d", minPacketBytes, maxPacketBytes))
	}
	if c.MaxMessageBytes < 1 || c.MaxMessageBytes > wire.MaxMessageBytes {
		return config.New(ErrConfig, "MaxMessageBytes", c.MaxMessageBytes, fmt.Sprintf("1..%d", wire.MaxMessageBytes))
	}
	if c.MaxReceiveMessageBytes < 1 || c.MaxReceiveMessageBytes > wire.MaxMessageBytes {
		return config.New(ErrConfig, "MaxReceiveMessageBytes", c.MaxReceiveMessageBytes, fmt.Sprintf("1..%d", wire.MaxMessageBytes))
	}
	if c.MaxReassemblyBytes < c.MaxReceiveMessageBytes {
		return config.New(ErrConfig, "MaxReassemblyBytes", c.MaxReassemblyBytes, fmt.Sprintf(">= MaxReceiveMessageBytes (%d)", c.MaxReceiveMessageBytes))
	}
	if c.StatusInterval < 0 {
		return config.New(ErrConfig, "StatusInterval", c.StatusInterval, ">= 0 (0: no status)")
	}
	if c.FlushDelay < 0 {
		return config.New(ErrConfig, "FlushDelay", c.FlushDelay, ">= 0")
	}
	if c.SilenceTimeout < 0 {
		return config.New(ErrConfig, "SilenceTimeout", c.SilenceTimeout, ">= 0 (0: never)")
	}
	if c.RepairSourceTimeout < 0 {
		return config.New(ErrConfig, "RepairSourceTimeout", c.RepairSourceTimeout, ">= 0 (0: the receiver's default)")
	}
	if len(c.Replayers) > maxReplayers {
		return config.New(ErrConfig, "Replayers", len(c.Replayers), fmt.Sprintf("at most %d addresses", maxReplayers))
	}
	if c.HotHot && c.ReadOnly {
		return config.New(ErrConfig, "HotHot", c.HotHot, "false with ReadOnly (a hot-hot instance sends)")
	}
	if c.HotHot && c.HotHotHeartbeat <= 0 {
		return config.New(ErrConfig, "HotHotHeartbeat", c.HotHotHeartbeat, "> 0 with HotHot")
	}
	if c.HotHot && (c.HotHotBacklog < 1 || c.HotHotBacklog > maxWindow) {
		return config.New(ErrConfig, "HotHotBacklog", c.HotHotBacklog, fmt.Sprintf("1..%d with HotHot", maxWindow))
	}
	p := c.PendingRecords
	if p < minPendingRecords || p > maxPendingRecords || p&(p-1) != 0 {
		return config.New(ErrConfig, "PendingRecords", p, fmt.Sprintf("a power of two in %d..%d", minPendingRecords, maxPendingRecords))
	}
	return nil
}
