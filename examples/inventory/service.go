package inventory

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/node"
)

// Config configures a Service. Start from DefaultConfig.
type Config struct {
	// Keys sizes the tables (they grow beyond it).
	Keys int
	// BatchTxns: after this many transactions since the last hand-off the
	// handler offers a batch to the Flusher (if one is free).
	BatchTxns int
	// FlushInterval: a local timer offers a batch this often, so the last
	// changes reach the database when the stream goes quiet.
	FlushInterval time.Duration
	// Replies makes the service send a reply command for every
	// transaction (what a front answers its buyers from).
	Replies bool
	// RepliesWhileRewinding also sends the replies of transactions met
	// while rewinding. Off by default: a node that numbers its commands
	// per incarnation would send them again as new commands. A hot-hot
	// pair whose numbering comes from the stream turns it on (the
	// sequencer drops the copies the stream already holds).
	RepliesWhileRewinding bool
	// CheckpointEvery: the digest is noted at every seq boundary that is
	// a multiple of it (Checkpoints), for comparing instances.
	CheckpointEvery uint64
}

// DefaultConfig returns the defaults: replies on, a batch every 4096
// transactions or 20ms.
func DefaultConfig() Config {
	return Config{Keys: 1024, BatchTxns: 4096, FlushInterval: 20 * time.Millisecond, Replies: true, CheckpointEvery: 1024}
}

// Validate reports the first bad field.
func (c Config) Validate() error {
	switch {
	case c.Keys < 0:
		return config.New(ErrConfig, "Keys", c.Keys, ">= 0")
	case c.BatchTxns < 1:
		return config.New(ErrConfig, "BatchTxns", c.BatchTxns, ">= 1")
	case c.FlushInterval <= 0:
		return config.New(ErrConfig, "FlushInterval", c.FlushInterval, "> 0")
	case c.CheckpointEvery < 1:
		return config.New(ErrConfig, "CheckpointEvery", c.CheckpointEvery, ">= 1")
	}
	return nil
}

// Node is what the Service needs of its node (*node.Node has it).
type Node interface {
	TrySend(p []byte) (uint64, error)
	Rewinding() bool
	SetLocalTimer(id uint64, after time.Duration)
}

// Service is the inventory service: a node.Handler that applies every
// transaction of the stream to its State, in order, on the node's
// goroutine; sends a reply for each; and flushes the state to its Store
// in batches through a Flusher. Start it from what the Store holds
// (NewService loads it) and rewind the node from Resume() + 1.
type Service struct {
	cfg     Config
	state   *State
	flusher *Flusher
	n       Node

	sinceHandOff int
	nextCheck    uint64
	reply        Reply
	out          []byte

	replyErrors atomic.Uint64
	active      atomic.Bool

	mu     sync.Mutex // guards status and checks
	status Status
	checks []Checkpoint
}

// Status is what the Service reports to other goroutines (refreshed at
// each checkpoint and flush timer).
type Status struct {
	Applied uint64 `json:"applied"` // the last seq applied
	Digest  uint64 `json:"digest"`  // the digest at Applied
	Txns    uint64 `json:"txns"`
	Refused uint64 `json:"refused"`
	Flushed uint64 `json:"flushed"` // the seq the database holds
	Keys    int    `json:"keys"`
}

// Checkpoint is the digest after every transaction up to Seq (a
// multiple of Config.CheckpointEvery); two instances agree at every Seq
// both noted.
type Checkpoint struct {
	Seq    uint64 `json:"seq"`
	Digest uint64 `json:"digest"`
}

const maxCheckpoints = 4096

// NewService loads the Store and starts the Flusher on it.
func NewService(ctx context.Context, cfg Config, store Store) (*Service, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	snap, err := store.Load(ctx)
	if err != nil {
		return nil, err
	}
	st := NewState(max(cfg.Keys, len(snap.Keys)))
	st.Restore(snap)
	s := &Service{cfg: cfg, state: st, flusher: NewFlusher(store, snap.Seq), out: make([]byte, 0, ReplyBytes)}
	s.nextCheck = (snap.Seq/cfg.CheckpointEvery + 1) * cfg.CheckpointEvery
	s.publish()
	return s, nil
}

// Resume is the seq the database held at NewService: the node rewinds
// from the one after (node.Config.Commit(Resume())).
func (s *Service) Resume() uint64 { return s.flusher.Flushed() }

// Attach gives the Service its node (after node.New, before Run) and
// starts the flush timer.
func (s *Service) Attach(n Node) {
	s.n = n
	n.SetLocalTimer(flushTimer, s.cfg.FlushInterval)
}

const flushTimer = 0xf105

// OnMessage applies a transaction, or notes the seq of any other
// message. It allocates nothing (beyond the first sight of a key).
func (s *Service) OnMessage(m *node.Message) {
	st := s.state
	if m.Seq <= st.seq && st.seq != 0 {
		return // already in the database's state (a rewind overlapping it)
	}
	if m.Seq > s.nextCheck {
		// The last boundary before m: no transaction came since the
		// others crossed, so their digest is the same (a node that starts
		// live far into the stream notes one, not millions).
		k := s.cfg.CheckpointEvery
		s.checkpoint((m.Seq - 1) / k * k)
	}
	if m.Internal() || !IsTxn(m.Payload) {
		st.Observe(m.Seq)
		return
	}
	st.Apply(m.Seq, uint64(m.Account), m.Payload, &s.reply)
	if s.cfg.Replies && s.n != nil && s.reply.Outcome != Malformed && (s.cfg.RepliesWhileRewinding || !s.n.Rewinding()) {
		s.out = AppendReply(s.out[:0], &s.reply)
		if _, err := s.n.TrySend(s.out); err != nil {
			s.replyErrors.Add(1)
		}
	}
	if s.sinceHandOff++; s.sinceHandOff >= s.cfg.BatchTxns && s.flusher.TryHandOff(st) {
		s.sinceHandOff = 0
	}
}

// checkpoint notes the digest at seq boundary c (every transaction up to
// c is applied, none after it).
func (s *Service) checkpoint(c uint64) {
	s.mu.Lock()
	if len(s.checks) == maxCheckpoints {
		s.checks = append(s.checks[:0], s.checks[maxCheckpoints/2:]...)
	}
	s.checks = append(s.checks, Checkpoint{c, s.state.digest})
	s.mu.Unlock()
	s.nextCheck = c + s.cfg.CheckpointEvery
	s.publish()
}

// OnLocalTimer offers a batch to the Flusher and re-arms.
func (s *Service) OnLocalTimer(id uint64) {
	if id != flushTimer {
		return
	}
	if s.flusher.TryHandOff(s.state) {
		s.sinceHandOff = 0
	}
	s.publish()
	s.n.SetLocalTimer(flushTimer, s.cfg.FlushInterval)
}

// OnActivated and OnDeactivated track the hot-hot role (Status only: the
// node library decides what a passive instance's sends become).
func (s *Service) OnActivated()   { s.active.Store(true) }
func (s *Service) OnDeactivated() { s.active.Store(false) }

// Active reports whether the stream last named this instance active.
func (s *Service) Active() bool { return s.active.Load() }

func (s *Service) publish() {
	st := s.state
	s.mu.Lock()
	s.status = Status{Applied: st.seq, Digest: st.digest, Txns: st.txns, Refused: st.failed,
		Flushed: s.flusher.Flushed(), Keys: len(st.keys)}
	s.mu.Unlock()
}

// Status returns the last published status (safe from any goroutine).
func (s *Service) Status() Status {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.status
	st.Flushed = s.flusher.Flushed()
	return st
}

// Checkpoints returns the digests noted so far (safe from any goroutine).
func (s *Service) Checkpoints() []Checkpoint {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Checkpoint(nil), s.checks...)
}

// ReplyErrors counts replies the node refused (a full window).
func (s *Service) ReplyErrors() uint64 { return s.replyErrors.Load() }

// FlushStats are the Flusher's counters.
func (s *Service) FlushStats() FlushStats { return s.flusher.Stats() }

// State is the in-memory state. Only the node's goroutine (or, after
// Run returned, the caller) may touch it.
func (s *Service) State() *State { return s.state }

// Close flushes what is left and waits for the database: call it after
// the node's Run returned. It reports the first database error.
func (s *Service) Close() error {
	err := s.flusher.Close(s.state)
	s.publish()
	if err != nil {
		return fmt.Errorf("inventory: close: %w", err)
	}
	return nil
}

// CompareCheckpoints compares two instances' checkpoints at the seqs both
// noted: it returns how many they share, and an error naming the first
// seq where the digests differ (the instances diverged at or before it).
func CompareCheckpoints(a, b []Checkpoint) (common int, err error) {
	i, j := 0, 0
	for i < len(a) && j < len(b) {
		switch {
		case a[i].Seq < b[j].Seq:
			i++
		case a[i].Seq > b[j].Seq:
			j++
		default:
			if a[i].Digest != b[j].Digest {
				return common, fmt.Errorf("%w: at seq %d: digest %016x and %016x", ErrDiverged, a[i].Seq, a[i].Digest, b[j].Digest)
			}
			common++
			i, j = i+1, j+1
		}
	}
	return common, nil
}
