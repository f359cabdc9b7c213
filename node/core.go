package node

import (
	"fmt"
	"time"

	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/wire"
)

// Core is the node's pure state machine: it turns stream frames into
// in-order deliveries, asks for repairs, and numbers, batches, fragments
// and resends this node's commands. It has no goroutines, locks or clock:
// the caller passes now (local monotonic ns) to every method and must not
// call it from two goroutines at once. Handler callbacks run inside Step
// and Tick; they may call Send, SendTimer, CancelTimer, SetLocalTimer and
// Flush, but not Step or Tick.
type Core struct {
	cfg     Config
	account wire.Account
	h       Handler
	act     ActivationHandler // nil unless h implements it
	tim     TimerHandler
	ltim    LocalTimerHandler
	sil     SilenceHandler
	out     Output
	srcOut  SourceOutput // out, when it reaches repair sources
	err     error        // sticky fatal error
	stats   Stats

	// r is the receiving half: gaps, repairs, epochs, reassembly, status.
	r    *receiver.Receiver
	next uint64 // next seq to deliver; during OnMessage, the one being delivered
	now  int64  // sequencer time
	// timeKnown: the stream told sequencer time (a message delivered, or
	// a heartbeat's time), so a timer relative to it can be computed.
	timeKnown bool

	send
	hh  hotHot
	oob oob

	localTimers []localTimer
	quiet       silence

	// Decode scratch, kept here so that the hot path allocates nothing.
	msg  Message
	ix   wire.Internal
	head receiver.Message
}

type localTimer struct {
	id uint64
	at int64
}

// NewCore validates cfg and builds a Core that delivers to h and sends
// frames to out. Every buffer of the hot path is allocated here.
func NewCore(cfg Config, h Handler, out Output) (*Core, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Incarnation == 0 && !cfg.ReadOnly {
		return nil, fmt.Errorf("%w: Incarnation = 0, want > 0 (New picks one from the wall clock)", ErrConfig)
	}
	if h == nil || out == nil {
		return nil, fmt.Errorf("%w: Handler and Output must not be nil", ErrConfig)
	}
	c := &Core{cfg: cfg, h: h, out: out, next: 1}
	if cfg.Account != "" {
		c.account = wire.MustAccount(cfg.Account)
	}
	r, err := receiver.New(cfg.receiverConfig(c.account))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrConfig, err)
	}
	c.r = r
	c.srcOut, _ = out.(SourceOutput)
	if len(cfg.Replayers) > 0 && c.srcOut == nil {
		return nil, fmt.Errorf("%w: Replayers need an Output that is a SourceOutput", ErrConfig)
	}
	c.act, _ = h.(ActivationHandler)
	c.tim, _ = h.(TimerHandler)
	c.ltim, _ = h.(LocalTimerHandler)
	c.sil, _ = h.(SilenceHandler)
	c.rejected, _ = h.(RejectionHandler)
	if !cfg.ReadOnly {
		c.initSend()
	}
	c.initHotHot()
	c.initOOB(h)
	return c, nil
}

// Step feeds one frame received from the transport: a stream packet (data
// or heartbeat) or a Gone reply. A malformed frame is counted and its
// decoder's sentinel error returned, with no other change. After a fatal
// error Step does nothing and returns Err().
func (c *Core) Step(now int64, frame []byte) error {
	return c.StepFrom(now, frame, receiver.Sequencer)
}

// StepFrom is Step for a frame that came from repair source src (a
// replayer of Config.Replayers: src i+1 is Replayers[i]), so that a Gone
// is taken from the source asked only.
func (c *Core) StepFrom(now int64, frame []byte, src receiver.Source) error {
	if c.err != nil {
		return c.err
	}
	c.clock = now
	if c.oob.h != nil && src == receiver.Sequencer {
		c.earlyOOB(frame)
		if c.err != nil {
			return c.err
		}
	}
	err := c.r.Step(now, frame, src)
	if err == nil && c.r.Stepped() {
		c.heard(now)
	}
	c.handleReady()
	if c.err != nil {
		return c.err
	}
	return err
}

// Tick runs what is due at now: NAKs of open gaps, resends of unacked
// commands, local timers, and the flush of a partly filled command frame.
func (c *Core) Tick(now int64) {
	if c.err != nil {
		return
	}
	c.clock = now
	c.r.Tick(now)
	c.handleReady()
	if c.err != nil {
		return
	}
	if !c.cfg.ReadOnly {
		c.resend(now)
	}
	if c.hh.on {
		c.drainBacklog(now)
		c.heartbeatHot(now)
	}
	if len(c.localTimers) > 0 {
		c.fireLocalTimers(now)
	}
	if c.sil != nil && c.cfg.SilenceTimeout > 0 {
		c.checkSilence(now)
	}
	if c.frameOpen && (c.cfg.FlushDelay == 0 || now-c.frameSince >= int64(c.cfg.FlushDelay)) {
		c.flushFrame()
	}
}

// silence is what the Core knows of the stream's silence (SilenceHandler).
type silence struct {
	quietSince int64 // local time of the last stream packet (or of the first Tick)
	quietSet   bool
	told       bool  // OnStreamSilent was called for this silence
	tellAfter  int64 // silence (ns) after which it is told (again); 0: SilenceTimeout
}

// checkSilence tells the SilenceHandler when the stream has been silent
// for SilenceTimeout, then every 10 timeouts while it lasts: without it
// a library node of a group without a quorum hears nothing, with its
// commands waiting, and cannot say why.
func (c *Core) checkSilence(now int64) {
	q := &c.quiet
	if !q.quietSet {
		q.quietSince, q.quietSet = now, true
	}
	timeout := int64(c.cfg.SilenceTimeout)
	after := q.tellAfter
	if after == 0 {
		after = timeout
	}
	if d := now - q.quietSince; d >= after {
		q.told = true
		q.tellAfter = d + 10*timeout
		c.sil.OnStreamSilent(time.Duration(d))
	}
}

// silenceDue is the local time checkSilence will next tell, if any.
func (c *Core) silenceDue() (int64, bool) {
	q := &c.quiet
	if c.sil == nil || c.cfg.SilenceTimeout <= 0 || !q.quietSet {
		return 0, false
	}
	after := q.tellAfter
	if after == 0 {
		after = int64(c.cfg.SilenceTimeout)
	}
	return q.quietSince + after, true
}

// Flush sends the partly filled command frame now.
func (c *Core) Flush(now int64) {
	if c.frameOpen {
		c.flushFrame()
	}
}

// SetLocalTimer arranges OnLocalTimer(id) at the first Tick at or after
// now+after, on the local clock. Setting an id that is pending replaces it.
func (c *Core) SetLocalTimer(now int64, id uint64, after time.Duration) {
	at := now + int64(after)
	for i := range c.localTimers {
		if c.localTimers[i].id == id {
			c.localTimers[i].at = at
			return
		}
	}
	c.localTimers = append(c.localTimers, localTimer{id: id, at: at})
}

// fireLocalTimers fires due timers earliest first, one at a time, because
// a callback may set timers again.
func (c *Core) fireLocalTimers(now int64) {
	for {
		best := -1
		for i := range c.localTimers {
			t := &c.localTimers[i]
			if t.at <= now && (best < 0 || t.at < c.localTimers[best].at) {
				best = i
			}
		}
		if best < 0 {
			return
		}
		id := c.localTimers[best].id
		last := len(c.localTimers) - 1
		c.localTimers[best] = c.localTimers[last]
		c.localTimers = c.localTimers[:last]
		if c.ltim != nil {
			c.ltim.OnLocalTimer(id)
		}
	}
}

// Now is sequencer time: the timestamp of the last delivered message, or
// of a heartbeat once everything it announced was delivered. It never
// reads the local clock, so a replay makes the same decisions.
func (c *Core) Now() int64 { return c.now }

// TimeKnown reports whether the stream told sequencer time yet (Now is 0
// until then): a message was delivered (inside OnMessage, the one being
// delivered counts) or a heartbeat carried it.
func (c *Core) TimeKnown() bool { return c.timeKnown }

// Rewinding reports whether the node is replaying history from before it
// joined: true (with Config.Rewind) until it delivers the first seq it saw
// live. Inside OnMessage it describes the message being delivered.
func (c *Core) Rewinding() bool {
	return c.cfg.Rewind && (!c.r.Started() || c.next < c.r.FirstLive())
}

// Delivered is the last seq fully delivered (during OnMessage, the one
// before the message being delivered).
func (c *Core) Delivered() uint64 { return c.next - 1 }

// Stable is the highest stable seq seen.
func (c *Core) Stable() uint64 { return c.r.Stable() }

// Session is the session the core locked onto (0 before the first packet).
func (c *Core) Session() uint64 { return c.r.Session() }

// Epoch is the newest epoch seen.
func (c *Core) Epoch() uint32 { return c.r.Epoch() }

// InFlight is the number of commands sent but not yet seen in the stream.
func (c *Core) InFlight() int { return int(c.nextCmd - 1 - c.acked) }

// InFlightBytes is the payload bytes of the unacked commands.
func (c *Core) InFlightBytes() int { return c.inflightB }

// Err is the fatal error that stopped the core (ErrUnrecoverable,
// ErrDiverged, ErrTooLarge, ErrNewSession, ErrSuperseded,
// ErrDuplicateSender), or nil. Once set it never changes.
func (c *Core) Err() error { return c.err }

// Stats returns the counters (and the resend timer's gauges).
func (c *Core) Stats() Stats {
	st := c.stats
	st.Stats = c.r.Stats()
	st.SmoothedRTT, st.ResendTimeout = time.Duration(c.srtt), time.Duration(c.rto)
	st.Session, st.Epoch, st.Next, st.StableSeq, st.SeqTimeNS = c.r.Session(), c.r.Epoch(), c.r.Next(), c.r.Stable(), c.r.Now()
	return st
}

func (c *Core) fail(err error) {
	if c.err == nil {
		c.err = err
	}
}
