package replayer

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/agent"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// ServiceConfig configures a Service. Start from DefaultServiceConfig.
type ServiceConfig struct {
	// Dir is the store's directory (one session per directory).
	Dir   string
	Store Config
	// Receiver follows the stream. The service sets Persist, Replayer and
	// Safe mode (it stores only stable records), the session (the store's,
	// once it holds one) and where to start: after the newest seq held,
	// or, for an empty store, seq 1 (FromLive: the live tail). ReadOnly is
	// left to the caller: off (the default) makes the sequencer's flow
	// control wait for the replayer, so that it never falls off the ring.
	Receiver receiver.Config
	// FromLive makes an empty store start at the live tail instead of
	// repairing the session from seq 1.
	FromLive bool
	// Upstream: the follow client is another replayer's stored stream
	// (a tier-2 replayer's tiered.Upstream), not the sequencer's. It
	// serves only records its store took as stable, with the headers the
	// stream carried then (a stable that may lag the packet's records),
	// so the receiver runs in fast mode: it stores each record on
	// arrival, as the upstream's store holds it.
	Upstream bool
	// Sources are the addresses of other repair sources (replayers) the
	// follow client can NAK when the sequencer's ring says Gone; the
	// client must then be a transport.Sourcer.
	Sources []string
	// Repair is the NAK answering policy (the sequencer's).
	Repair sequencer.RepairConfig
	// MaxPendingBytes bounds the frames held back while a hole before them
	// is repaired (see Persister); beyond it the service stops with
	// ErrPendingFull.
	MaxPendingBytes int
	// PollWait is the longest the service blocks reading the stream
	// before it looks at its NAK endpoint again: the worst added latency
	// of a NAK answer.
	PollWait time.Duration
	// Logger gets the recovery report and the stop. nil: slog.Default().
	Logger *slog.Logger
	// Clock is the monotonic clock in ns (NAK pacing, receiver timers);
	// nil: the process's. The simulator drives a Service on its own.
	Clock func() int64
}

// DefaultServiceConfig is the store's defaults with the fsync interval
// policy run by the shell (SyncInShell), the receiver's defaults and the
// sequencer's repair policy.
func DefaultServiceConfig() ServiceConfig {
	sc := DefaultConfig()
	sc.SyncInShell = true
	d := sequencer.DefaultConfig()
	rc := d.RepairConfig()
	rc.MaxPacketBytes = sc.MaxPacketBytes
	rc.RetransmitBytesPerSecond = 256 << 20
	return ServiceConfig{
		Store:           sc,
		Receiver:        receiver.DefaultConfig(),
		Repair:          rc,
		MaxPendingBytes: 256 << 20,
		PollWait:        time.Millisecond,
	}
}

// Validate names the first bad field.
func (c ServiceConfig) Validate() error {
	switch {
	case c.Dir == "":
		return fmt.Errorf("%w: Dir is empty, want the store's directory", ErrConfig)
	case c.MaxPendingBytes < c.Store.MaxPacketBytes:
		return fmt.Errorf("%w: MaxPendingBytes = %d, want >= Store.MaxPacketBytes (%d)", ErrConfig, c.MaxPendingBytes, c.Store.MaxPacketBytes)
	case c.PollWait <= 0 || c.PollWait > time.Second:
		return fmt.Errorf("%w: PollWait = %v, want 1ns..1s", ErrConfig, c.PollWait)
	case c.Repair.NakAnswerBytes < 1:
		return fmt.Errorf("%w: Repair.NakAnswerBytes = %d, want >= 1", ErrConfig, c.Repair.NakAnswerBytes)
	case c.Repair.RetransmitBytesPerSecond < 0:
		return fmt.Errorf("%w: Repair.RetransmitBytesPerSecond = %d, want >= 0 (0: no cap)", ErrConfig, c.Repair.RetransmitBytesPerSecond)
	case len(c.Sources) > 254:
		return fmt.Errorf("%w: %d Sources, want at most 254", ErrConfig, len(c.Sources))
	}
	return c.Store.Validate()
}

// Service is a replayer: the thin shell that follows the stream with the
// pure receiver over a transport.Client, persists what it delivers to a
// Store (see Persister), and answers NAKs from the Store on a
// transport.Server of its own (see naks). One goroutine (Run) does all of
// it; an fsync runs on a helper goroutine (Config.SyncInShell) so appends
// never wait for the disk.
//
// Concurrency: Run owns the Store, the receiver and both transports.
// Other goroutines read Stats, Contiguous and Durable, or run code on the
// Run goroutine with Do (how a rewind server reads the Store).
type Service struct {
	cfg ServiceConfig
	// dropped logs, rate-limited, packets the receiver dropped as
	// another session's or of an epoch no failover could have made.
	dropped transport.RateLog
	log     *slog.Logger
	store   *Store
	rec     *Recovery
	r       *receiver.Receiver
	follow  transport.Client
	srv     transport.Server
	sourcer transport.Sourcer
	peers   []transport.Peer // repair source i+1's Peer
	pend    Persister
	naks    naks
	start   time.Time
	err     error // fatal, sticky
	checked bool  // the stream's session was checked against the store's
	// rc is the receiver's config, kept to start it again; foreignAt is
	// the mono time a receiver first started on another session than the
	// store's (foreign: since the last check).
	rc        receiver.Config
	foreignAt int64
	foreign   bool

	lastSnap int64         // mono time of the last stats snapshot
	run      *agent.Runner // Run's
	frames   int           // what the last Poll handled

	onStream transport.Handler
	onNak    transport.Handler

	syncer *Syncer // nil without SyncInShell

	dos     chan doReq
	stopped chan struct{}

	contiguous atomic.Uint64
	durable    atomic.Uint64
	snaps      uint64     // snapshots taken (the Run goroutine's)
	mu         sync.Mutex // guards stats
	stats      ServiceStats
}

type doReq struct {
	f    func(*Store)
	done chan struct{}
}

// ServiceStats are a Service's counters, as of a recent loop iteration.
type ServiceStats struct {
	First      uint64 // lowest seq held (0: none)
	Contiguous uint64 // highest seq stored whole
	Durable    uint64 // highest seq fsynced
	Stable     uint64 // highest stable seq seen in the stream (ops: readiness, lag)
	Session    uint64 // the session followed (0: none yet)
	Snapshots  uint64 // snapshots taken (one per loop turn at most, every 10 ms while it turns): liveness
	Store      Stats
	Persist    PersistStats
	Naks       NakStats
	Receiver   receiver.Stats
}

// NewService opens the store in cfg.Dir (logging what recovery found: the
// torn tail it cut, a corruption), and builds the receiver that follows
// the stream from after the newest seq held. follow reads the stream;
// srv is the NAK endpoint (multicast.NewRepairServer, or a tcp.Server).
// The caller keeps both and closes them after Run returns. A corrupt
// store is an error: it takes no appends (move the directory away, or
// read it as an archive).
func NewService(cfg ServiceConfig, follow transport.Client, srv transport.Server) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	store, rec, err := Open(cfg.Dir, cfg.Store)
	if err != nil {
		return nil, err
	}
	log.Info("replayer: store opened", "dir", cfg.Dir, "recovery", rec.String())
	if !cfg.Store.ReadOnly {
		if err := markStable(cfg.Store.fs(), cfg.Dir); err != nil {
			store.Close()
			return nil, err
		}
	}
	for _, c := range rec.Cuts {
		log.Warn("replayer: cut a torn tail (a write cut short by a crash)", "file", c.File, "offset", c.Offset, "bytes", c.Bytes, "after_seq", c.AfterSeq, "reason", c.Reason)
	}
	if rec.Corrupt != nil {
		store.Close()
		return nil, fmt.Errorf("replayer: %s: %w", cfg.Dir, rec.Corrupt)
	}
	s := &Service{cfg: cfg, log: log, store: store, rec: rec, follow: follow, srv: srv, start: time.Now(),
		dos: make(chan doReq, 16), stopped: make(chan struct{})}
	rc := cfg.Receiver
	// The receiver follows whatever session is live (rc.Session stays as
	// configured, 0 by default): a store of another session then fails
	// its first append loudly (ErrSession) instead of fencing the live
	// stream in silence.
	rc.Persist, rc.Replayer, rc.Mode = true, true, receiver.Safe
	if cfg.Upstream {
		rc.Mode = receiver.Fast
	}
	switch {
	case store.Contiguous() > 0:
		rc.Rewind, rc.RewindFrom = true, store.Contiguous()+1
		rc.RewindEpoch, _ = store.EpochOf(store.Contiguous())
	case cfg.FromLive:
		rc.Rewind = false
	default:
		rc.Rewind, rc.RewindFrom = true, 1
	}
	rc.RepairSources = len(cfg.Sources)
	if len(cfg.Sources) > 0 {
		src, ok := follow.(transport.Sourcer)
		if !ok {
			store.Close()
			return nil, fmt.Errorf("%w: Sources need a follow transport that can address repair sources (transport.Sourcer)", ErrConfig)
		}
		s.sourcer = src
		for _, a := range cfg.Sources {
			p, err := src.AddSource(a)
			if err != nil {
				store.Close()
				return nil, fmt.Errorf("replayer: repair source %s: %w", a, err)
			}
			s.peers = append(s.peers, p)
		}
	}
	if s.r, err = receiver.New(rc); err != nil {
		store.Close()
		return nil, err
	}
	s.rc = rc
	s.pend.Init(PersistConfig{MaxHeldBytes: cfg.MaxPendingBytes, MaxPacketBytes: cfg.Store.MaxPacketBytes})
	s.naks.init(cfg.Repair, sequencer.ServerSink{Server: srv})
	s.onStream, s.onNak = s.stream, s.nak
	s.contiguous.Store(store.Contiguous())
	s.durable.Store(store.Durable())
	rcfg := agent.DefaultConfig()
	rcfg.MaxWait, rcfg.Clock = cfg.PollWait, s.mono
	if s.run, err = agent.NewRunner(rcfg); err != nil {
		store.Close()
		return nil, err
	}
	if cfg.Store.SyncInShell {
		s.syncer = NewSyncer(nil)
	}
	return s, nil
}

// Recovery is what opening the store found.
func (s *Service) Recovery() *Recovery { return s.rec }

// Store is the service's store. Only the Run goroutine may use it while
// Run runs (use Do from elsewhere); before Run or after it returned (the
// store is closed then), any one goroutine.
func (s *Service) Store() *Store { return s.store }

// Contiguous is the highest seq stored whole; safe from any goroutine.
func (s *Service) Contiguous() uint64 { return s.contiguous.Load() }

// Durable is the highest seq fsynced; safe from any goroutine.
func (s *Service) Durable() uint64 { return s.durable.Load() }

// Stats returns the counters as of a recent loop iteration; safe from any
// goroutine.
func (s *Service) Stats() ServiceStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}

// Do runs f on the Run goroutine, between two polls, with the Store (a
// rewind server reads it so, with no lock on the hot path), and returns
// once f returned, or with ctx's error, or ErrServiceClosed when Run
// ended first. f must be short: the stream waits meanwhile.
func (s *Service) Do(ctx context.Context, f func(*Store)) error {
	d := doReq{f: f, done: make(chan struct{})}
	select {
	case s.dos <- d:
	case <-s.stopped:
		return ErrServiceClosed
	case <-ctx.Done():
		return ctx.Err()
	}
	select {
	case <-d.done:
		return nil
	case <-s.stopped:
		select {
		case <-d.done:
			return nil
		default:
			return ErrServiceClosed
		}
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Service) mono() int64 {
	if s.cfg.Clock != nil {
		return s.cfg.Clock()
	}
	return int64(time.Since(s.start))
}

// Run serves until ctx is done (it returns ctx's error) or a fatal error:
// the receiver stopped (ErrUnrecoverable: the stream lost what no source
// holds; ErrNewSession), the store failed, a transport closed. Either
// way it finishes the fsync under way and closes the store, fsyncing it.
// The agent runner drives it (Poll, DoWork, NextDue): a Poll blocks up to
// PollWait, the worst added latency of a NAK answer.
func (s *Service) Run(ctx context.Context) (err error) {
	defer func() { err = s.shutdown(err) }()
	return s.run.Run(ctx, s)
}

// Work runs one turn of Run's loop without waiting, for a shell that owns
// the clock and the transports (the simulator: ServiceConfig.Clock, mem
// transports, and the Store's fsyncs inline, without SyncInShell). It
// returns the error that stops the service; Close ends it. Work and Run
// must not be mixed.
func (s *Service) Work() error {
	if s.err != nil {
		return s.err
	}
	if _, err := s.Poll(0); err != nil {
		return err
	}
	_, err := s.DoWork(s.mono())
	return err
}

// Close ends a Service driven by Work as Run ends: it finishes the fsync
// under way and closes the store.
func (s *Service) Close() error { return s.shutdown(nil) }

// Poll reads the stream for up to wait (agent.Agent): each frame goes to
// the receiver and what it persists to the store.
func (s *Service) Poll(wait time.Duration) (int, error) {
	n, err := s.follow.Poll(s.onStream, wait)
	if err != nil {
		return 0, fmt.Errorf("replayer: follow the stream: %w", err)
	}
	if s.err != nil {
		return 0, s.err
	}
	s.frames = n
	return n, nil
}

// DoWork is the rest of a turn (agent.Agent): the receiver's timers, the
// NAK endpoint (polled without waiting), the store's fsync policy, the
// flushes, the Do requests, and the stats snapshot every 10 ms. It
// returns the frames handled in the turn.
func (s *Service) DoWork(now int64) (int, error) {
	s.r.Tick(now)
	s.handleReady()
	m, err := s.srv.Poll(s.onNak, 0)
	if err != nil {
		return 0, fmt.Errorf("replayer: nak endpoint: %w", err)
	}
	s.tickStore(now)
	if s.err != nil {
		return 0, s.err
	}
	// Only a closed transport is fatal: anything else a Flush reports
	// is loss, which the transport counts and the protocol repairs.
	if err := s.follow.Flush(); errors.Is(err, transport.ErrClosed) {
		return 0, fmt.Errorf("replayer: follow the stream: %w", err)
	}
	if err := s.srv.Flush(); errors.Is(err, transport.ErrClosed) {
		return 0, fmt.Errorf("replayer: nak endpoint: %w", err)
	}
	s.runDos()
	if now-s.lastSnap >= int64(10*time.Millisecond) {
		s.lastSnap = now
		s.snapshot()
	}
	return s.frames + m, nil
}

// NextDue is the receiver's next timed work (agent.Agent); the runner
// waits at most PollWait, so the NAK endpoint is polled that often.
func (s *Service) NextDue() (int64, bool) { return s.r.NextDue() }

// stream is the follow transport's handler.
func (s *Service) stream(frame []byte, from transport.Peer) {
	if s.err != nil {
		return
	}
	src := receiver.Sequencer
	for i, p := range s.peers {
		if p == from {
			src = receiver.Source(i + 1)
			break
		}
	}
	// A malformed frame is counted by the receiver and dropped; another
	// session's, or a far epoch's, is logged too (rate-limited).
	if err := s.r.Step(s.mono(), frame, src); err != nil && (errors.Is(err, receiver.ErrOtherSession) || errors.Is(err, receiver.ErrEpochJump)) {
		s.dropped.Logger, s.dropped.Msg = s.log, "replayer: stream packets dropped (another session, or an epoch far beyond the current one)"
		s.dropped.Note(1, err)
	}
	if !s.checked && s.r.Started() && !s.checkSession() {
		return
	}
	s.handleReady()
}

// checkSession checks the session the receiver started on against the
// store's, and reports whether the receiver's output may be used. A
// packet of another session is not reason enough to stop (forged
// session heartbeats stopped the replayer): the receiver starts again on
// the next packet, its output dropped, until one of the store's session
// comes. Only when no packet of it came for the receiver's
// SessionTimeout while another session publishes is the store's session
// gone (the sequencer restarted, or this directory is another
// session's): then it stops, loudly, as before.
func (s *Service) checkSession() bool {
	err := s.store.CheckSession(s.r.Session())
	if err == nil {
		s.checked, s.foreign = true, false
		return true
	}
	now := s.mono()
	if !s.foreign {
		s.foreign, s.foreignAt = true, now
	}
	if now-s.foreignAt >= int64(s.rc.SessionTimeout) {
		s.checked = true
		s.fail(err)
		return false
	}
	s.dropped.Logger, s.dropped.Msg = s.log, "replayer: stream packets dropped (another session, or an epoch far beyond the current one)"
	s.dropped.Note(1, err)
	r, nerr := receiver.New(s.rc)
	if nerr != nil {
		panic("replayer: receiver config validated once, refused now: " + nerr.Error())
	}
	s.r = r
	return false
}

// nak is the NAK endpoint's handler.
func (s *Service) nak(frame []byte, from transport.Peer) {
	s.naks.step(s.mono(), frame, from, s.store)
}

// handleReady acts on the receiver's output in its documented order:
// persist (through the Persister), then send; deliveries are not used.
func (s *Service) handleReady() {
	rd := s.r.Ready()
	delivered := s.r.Next() - 1
	for _, f := range rd.Persist {
		if s.err != nil {
			break
		}
		if err := s.pend.Offer(s.store, f, delivered); err != nil {
			s.failStore(err)
		}
	}
	if s.err == nil {
		if err := s.pend.Drain(s.store, delivered); err != nil {
			s.failStore(err)
		}
	}
	for i := range rd.Send {
		f := &rd.Send[i]
		if f.To == receiver.Sequencer || int(f.To) > len(s.peers) {
			_ = s.follow.Send(f.Bytes) // loss is the transport's to count
		} else {
			_ = s.sourcer.SendTo(s.peers[f.To-1], f.Bytes)
		}
	}
	s.r.Advance()
	if err := s.r.Err(); err != nil {
		if errors.Is(err, receiver.ErrUnrecoverable) {
			err = fmt.Errorf("%w: the store holds up to seq %d and no source holds what follows (an empty store may start at the live tail: FromLive, --from-live; a store with a hole needs a new directory)", err, s.store.Contiguous())
		}
		s.fail(fmt.Errorf("replayer: following the stream: %w", err))
	}
}

// tickStore hands appended bytes to the OS and runs the fsync policy:
// with SyncInShell, an fsync due goes to the Syncer's goroutine.
func (s *Service) tickStore(now int64) {
	if err := s.store.Tick(now); err != nil {
		s.fail(err)
		return
	}
	if s.syncer == nil {
		return
	}
	if req, err, ok := s.syncer.Done(); ok {
		if err := s.store.FinishSync(req, err); err != nil {
			s.fail(err)
			return
		}
	}
	if !s.syncer.Out() && s.store.SyncDue() {
		if req, ok := s.store.StartSync(); ok {
			s.syncer.Start(req)
		}
	}
}

func (s *Service) runDos() {
	for {
		select {
		case d := <-s.dos:
			d.f(s.store)
			close(d.done)
		default:
			return
		}
	}
}

// failStore stops the service on a store error, saying which sessions
// when the stream is not the store's.
func (s *Service) failStore(err error) {
	if errors.Is(err, ErrSession) {
		if cerr := s.store.CheckSession(s.r.Session()); cerr != nil {
			err = cerr
		}
	}
	s.fail(err)
}

func (s *Service) fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

func (s *Service) snapshot() {
	var first uint64
	if o, ok := s.store.Oldest(); ok {
		first = o.FirstSeq
	}
	st := ServiceStats{
		First:      first,
		Contiguous: s.store.Contiguous(),
		Durable:    s.store.Durable(),
		Stable:     s.r.Stable(),
		Session:    s.r.Session(),
		Snapshots:  s.snaps + 1,
		Store:      s.store.Stats(),
		Persist:    s.pend.Stats(),
		Naks:       s.naks.Stats(),
		Receiver:   s.r.Stats(),
	}
	s.contiguous.Store(st.Contiguous)
	s.durable.Store(st.Durable)
	s.snaps = st.Snapshots
	s.mu.Lock()
	s.stats = st
	s.mu.Unlock()
}

// shutdown finishes the fsync under way, closes the store (fsyncing it)
// and logs where the store stands.
func (s *Service) shutdown(err error) error {
	if s.syncer != nil {
		if req, serr, ok := s.syncer.Wait(); ok {
			if ferr := s.store.FinishSync(req, serr); ferr != nil && err == nil {
				err = ferr
			}
		}
		s.syncer.Close()
	}
	cerr := s.store.Close()
	if cerr != nil && err == nil {
		err = fmt.Errorf("replayer: close store: %w", cerr)
	}
	s.snapshot() // Close fsynced: Durable is Contiguous unless it failed
	close(s.stopped)
	st := s.Stats()
	attrs := []any{"contiguous", st.Contiguous, "durable", st.Durable, "appended", st.Persist.Appended,
		"naks", st.Naks.Naks, "retransmitted", st.Naks.Retransmitted, "gones", st.Naks.Gones}
	if err != nil && !errors.Is(err, context.Canceled) {
		// A stop asked for (the context ended) is no error to report.
		attrs = append(attrs, "err", err)
	}
	s.log.Info("replayer: stopped", attrs...)
	return err
}
