package replayer

import (
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/wire"
)

// RewindConfig tunes a RewindServer. Start from DefaultRewindConfig.
type RewindConfig struct {
	// MaxRewinds bounds the rewinds served at once; one more is answered
	// RewindUnavailable (the client tries another replayer).
	MaxRewinds int
	// RequestTimeout: a client that has not sent its request this long
	// after connecting is dropped.
	RequestTimeout time.Duration
	// WriteTimeout: a client that takes nothing for this long (TCP
	// backpressure at a standstill) is dropped, so a stuck client never
	// holds a rewind forever.
	WriteTimeout time.Duration
	// TipPoll: how soon a rewind that reached the store's tip looks for
	// new frames; the wait doubles while nothing comes, up to
	// TipPollMax, so that followers of an idle store (tier-2 replayers
	// follow forever) cost little, and resets when frames come.
	TipPoll    time.Duration
	TipPollMax time.Duration
	// PastTipTimeout: a follow rewind asked from beyond the store's next
	// seq ends (RewindEndTip) when the store has not reached it within
	// this long. A follower of this store asks at most its next seq (it
	// got everything else from here), and a node that learned a seq from
	// the live stream finds this store caught up within moments; a
	// rewind from far past the tip would otherwise hold a rewind slot
	// forever (64 of them held every slot).
	PastTipTimeout time.Duration
	// BufferBytes is each rewind's read buffer (one write per buffer).
	BufferBytes int
}

// DefaultRewindConfig: 64 rewinds, 5 s to ask, 30 s of standstill, the
// tip looked at again after 200 µs, backing off to 5 ms while idle, 1 MiB
// reads.
func DefaultRewindConfig() RewindConfig {
	return RewindConfig{MaxRewinds: 64, RequestTimeout: 5 * time.Second, WriteTimeout: 30 * time.Second,
		TipPoll: 200 * time.Microsecond, TipPollMax: 5 * time.Millisecond, PastTipTimeout: 10 * time.Second, BufferBytes: ReaderBufferBytes}
}

// Validate names the first field out of range.
func (c RewindConfig) Validate() error {
	switch {
	case c.MaxRewinds < 1 || c.MaxRewinds > 1<<16:
		return fmt.Errorf("%w: MaxRewinds = %d, want 1..65536", ErrConfig, c.MaxRewinds)
	case c.RequestTimeout <= 0:
		return fmt.Errorf("%w: RequestTimeout = %v, want > 0", ErrConfig, c.RequestTimeout)
	case c.WriteTimeout <= 0:
		return fmt.Errorf("%w: WriteTimeout = %v, want > 0", ErrConfig, c.WriteTimeout)
	case c.TipPoll <= 0 || c.TipPoll > time.Second:
		return fmt.Errorf("%w: TipPoll = %v, want (0, 1s]", ErrConfig, c.TipPoll)
	case c.TipPollMax < c.TipPoll || c.TipPollMax > time.Second:
		return fmt.Errorf("%w: TipPollMax = %v, want TipPoll (%v) .. 1s", ErrConfig, c.TipPollMax, c.TipPoll)
	case c.PastTipTimeout <= 0:
		return fmt.Errorf("%w: PastTipTimeout = %v, want > 0", ErrConfig, c.PastTipTimeout)
	case c.BufferBytes < 64<<10 || c.BufferBytes > 1<<30:
		return fmt.Errorf("%w: BufferBytes = %d, want 64 KiB..1 GiB", ErrConfig, c.BufferBytes)
	}
	return nil
}

// RewindStats are a RewindServer's counters.
type RewindStats struct {
	Accepted uint64 // rewinds started
	Active   int64  // rewinds streaming now
	Refused  uint64 // requests answered with an error status
	Bytes    uint64 // stream bytes sent
}

// RewindServer serves rewinds (docs/protocol.md, "Rewind") from a Store
// that another goroutine may be appending to: each connection gets its
// own Reader of the store's Tip and its own goroutine, streams the stored
// frames from the seq asked, and, with wire.RewindFollow, follows the
// store's tip until the client closes. Flow control is TCP's: a slow
// client slows its own rewind only.
type RewindServer struct {
	tip *Tip
	cfg RewindConfig

	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	ls     []net.Listener
	closed bool
	wg     sync.WaitGroup
	quit   chan struct{}

	accepted, refused, bytes atomic.Uint64
	active                   atomic.Int64
}

// NewRewindServer serves the store behind tip (Store.Tip).
func NewRewindServer(tip *Tip, cfg RewindConfig) (*RewindServer, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return &RewindServer{tip: tip, cfg: cfg, conns: make(map[net.Conn]struct{}), quit: make(chan struct{})}, nil
}

// Serve accepts rewind connections on l until Close (then it returns
// nil) or an accept error (returned).
func (s *RewindServer) Serve(l net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		l.Close()
		return nil
	}
	s.ls = append(s.ls, l)
	s.mu.Unlock()
	for {
		c, err := l.Accept()
		if err != nil {
			s.mu.Lock()
			closed := s.closed
			s.mu.Unlock()
			if closed {
				return nil
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				continue
			}
			return fmt.Errorf("replayer: rewind accept: %w", err)
		}
		s.mu.Lock()
		if s.closed {
			s.mu.Unlock()
			c.Close()
			return nil
		}
		if len(s.conns) >= 2*s.cfg.MaxRewinds {
			// Connections that have not asked yet are bounded too (each
			// waits at most RequestTimeout): beyond twice the rewinds
			// allowed, a new one is closed at once, and counted.
			s.mu.Unlock()
			c.Close()
			s.refused.Add(1)
			continue
		}
		s.conns[c] = struct{}{}
		s.wg.Add(1)
		s.mu.Unlock()
		go s.serve(c)
	}
}

// Close stops accepting, ends every rewind (their connections close) and
// waits for their goroutines.
func (s *RewindServer) Close() error {
	s.mu.Lock()
	if !s.closed {
		s.closed = true
		close(s.quit)
		for _, l := range s.ls {
			l.Close()
		}
		for c := range s.conns {
			c.Close()
		}
	}
	s.mu.Unlock()
	s.wg.Wait()
	return nil
}

// Stats returns the counters.
func (s *RewindServer) Stats() RewindStats {
	return RewindStats{Accepted: s.accepted.Load(), Active: s.active.Load(), Refused: s.refused.Load(), Bytes: s.bytes.Load()}
}

func (s *RewindServer) serve(c net.Conn) {
	defer func() {
		c.Close()
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		s.wg.Done()
	}()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetNoDelay(true)
		tc.SetWriteBuffer(4 << 20)
	}
	var req [wire.RewindRequestBytes]byte
	c.SetReadDeadline(time.Now().Add(s.cfg.RequestTimeout))
	if _, err := io.ReadFull(c, req[:]); err != nil {
		return
	}
	c.SetReadDeadline(time.Time{})
	var q wire.RewindRequest
	reply := wire.RewindReply{Session: s.tip.Session(), Newest: s.tip.Seq()}
	if err := wire.DecodeRewindRequest(req[:], &q); err != nil {
		s.refuse(c, &reply, wire.RewindBadRequest)
		return
	}
	if q.Session != 0 && reply.Session != 0 && q.Session != reply.Session {
		s.refuse(c, &reply, wire.RewindBadSession)
		return
	}
	if n := s.active.Add(1); n > int64(s.cfg.MaxRewinds) {
		s.active.Add(-1)
		s.refuse(c, &reply, wire.RewindUnavailable)
		return
	}
	defer s.active.Add(-1)
	r := NewReader(s.tip, q.FromSeq, s.cfg.BufferBytes)
	defer r.Close()
	run, err := r.Next()
	reply.Oldest = r.Oldest()
	switch {
	case errors.Is(err, ErrGone):
		s.refuse(c, &reply, wire.RewindGone)
		return
	case err != nil:
		s.refuse(c, &reply, wire.RewindUnavailable)
		return
	}
	s.accepted.Add(1)
	var out [wire.RewindReplyBytes]byte
	if !s.write(c, wire.AppendRewindReply(out[:0], &reply)) {
		return
	}
	// The client sends nothing more: a read returning means it closed.
	gone := make(chan struct{})
	go func() {
		var b [1]byte
		c.Read(b[:])
		close(gone)
	}()
	src := &rewindSource{r: r, tip: s.tip, follow: q.Flags&wire.RewindFollow != 0, run: run, err: err, primed: true,
		pastTipUntil: time.Now().Add(s.cfg.PastTipTimeout)}
	var wake <-chan struct{}
	if src.follow {
		w, stop := s.tip.Wake()
		defer stop()
		wake = w
	}
	_ = SendRange(c, src, RangeSendConfig{
		WriteTimeout: s.cfg.WriteTimeout, TipPoll: s.cfg.TipPoll, TipPollMax: s.cfg.TipPollMax,
		Wake: wake, Gone: gone, Quit: s.quit, Sent: func(n int) { s.bytes.Add(uint64(n)) },
	})
}

// rewindSource is a rewind's stream as SendRange reads it: a Reader's
// runs of stored frames, byte for byte, then the end frame that says why
// the stream stopped (without RewindFollow, at the tip; with it, only when
// the store closes or cannot be read).
type rewindSource struct {
	r      *Reader
	tip    *Tip
	follow bool
	run    []byte // the first run, read before the reply
	err    error
	primed bool // run and err are still to be served
	// pastTipUntil: while the next seq is beyond the store's, a follow
	// ends at this time (RewindConfig.PastTipTimeout).
	pastTipUntil time.Time
	end          [wire.RewindFrameHeaderBytes]byte
}

func (s *rewindSource) Next() ([]byte, bool, error) {
	run, err := s.run, s.err
	if s.primed {
		s.primed, s.run, s.err = false, nil, nil
	} else {
		run, err = s.r.Next()
	}
	if len(run) > 0 {
		return run, false, nil
	}
	var reason uint8
	switch {
	case err != nil && errors.As(err, new(*Corruption)):
		reason = wire.RewindEndCorrupt
	case err != nil:
		reason = wire.RewindEndError
	case !s.follow:
		reason = wire.RewindEndTip
	case s.tip.Closed():
		reason = wire.RewindEndClosed
	case s.r.NextSeq() > s.tip.Seq()+1 && time.Now().After(s.pastTipUntil):
		reason = wire.RewindEndTip // asked from past the tip, which never came
	default:
		return nil, false, nil // at the tip: SendRange waits
	}
	return wire.AppendRewindEnd(s.end[:0], reason, s.r.NextSeq()), true, err
}

// write sends b whole within WriteTimeout.
func (s *RewindServer) write(c net.Conn, b []byte) bool {
	c.SetWriteDeadline(time.Now().Add(s.cfg.WriteTimeout))
	n, err := c.Write(b)
	s.bytes.Add(uint64(n))
	return err == nil
}

func (s *RewindServer) refuse(c net.Conn, reply *wire.RewindReply, status uint16) {
	s.refused.Add(1)
	reply.Status = status
	var out [wire.RewindReplyBytes]byte
	s.write(c, wire.AppendRewindReply(out[:0], reply))
}
