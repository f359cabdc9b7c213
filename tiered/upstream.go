package tiered

import (
	"crypto/tls"
	"errors"
	"fmt"
	"github.com/seqd/seqd/internal/tlsconf"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/wire"
)

// UpstreamConfig configures an Upstream. Start from
// DefaultUpstreamConfig.
type UpstreamConfig struct {
	// Addrs are rewind addresses of tier-1 replayers, tried in turn.
	Addrs []string
	// Source names the replayer to follow from seq from after the one at
	// failed stopped ("" on the first pick): Agent.RewindSource with
	// MaxTier 1. Asked first when set; "" falls back to Addrs.
	Source func(from uint64, failed string) string
	// Session: only this session (0: the first one served).
	Session uint64
	// FromOldest: when the first seq asked is gone from the upstream
	// (an empty tier-2 store that starts from the upstream's oldest
	// seq, replayer.ServiceConfig.FromLive), start at its oldest.
	FromOldest bool
	// FailoverWait: the upstream is given up (Poll returns ErrUpstream)
	// once no replayer served the next seq for this long.
	FailoverWait time.Duration
	// RetryMax is the longest pause between two tries.
	RetryMax time.Duration
	// DialTimeout bounds a connection attempt and the wait for the
	// upstream's reply to the request.
	DialTimeout time.Duration
	// Logger gets each switch of upstream. nil: slog.Default().
	Logger *slog.Logger
	// TLS, when set, dials the upstream's rewind port over TLS with it.
	TLS *tls.Config
}

// DefaultUpstreamConfig: 30 s without progress before giving up, pauses
// of up to 1 s between tries, 5 s to connect and be answered.
func DefaultUpstreamConfig() UpstreamConfig {
	return UpstreamConfig{FailoverWait: 30 * time.Second, RetryMax: time.Second, DialTimeout: 5 * time.Second}
}

// Validate names the first field out of range.
func (c UpstreamConfig) Validate() error {
	switch {
	case len(c.Addrs) == 0 && c.Source == nil:
		return fmt.Errorf("%w: an Upstream needs Addrs or a Source", ErrConfig)
	case c.FailoverWait <= 0:
		return fmt.Errorf("%w: FailoverWait = %v, want > 0", ErrConfig, c.FailoverWait)
	case c.RetryMax <= 0:
		return fmt.Errorf("%w: RetryMax = %v, want > 0", ErrConfig, c.RetryMax)
	case c.DialTimeout <= 0:
		return fmt.Errorf("%w: DialTimeout = %v, want > 0", ErrConfig, c.DialTimeout)
	}
	return nil
}

// UpstreamStats are an Upstream's counters.
type UpstreamStats struct {
	Addr      string // the replayer followed now ("" between two)
	Connects  uint64 // rewinds the upstreams accepted
	Failovers uint64 // connections lost or refused, each followed by another try
	Packets   uint64 // stream packets read
	Next      uint64 // the seq a new connection would ask for
}

// upstreamChunks and upstreamChunkBytes: the read-ahead (TCP
// backpressure holds the upstream beyond it).
const (
	upstreamChunks     = 4
	upstreamChunkBytes = 1<<20 + wire.RewindFrameHeaderBytes
)

type upstreamChunk struct {
	b []byte
	n int // whole, checked frames in b[:n]
}

// Upstream is how a tier-2 replayer follows a tier-1 replayer: a
// transport.Client whose stream is a rewind with follow (docs/protocol.md,
// "Rewind") from a tier-1 replayer's store instead of the sequencer's
// multicast, handed to a replayer.Service as its follow client. It asks
// for the stream from Start's seq (the tier-2 store's Contiguous+1) and,
// when the upstream dies, refuses or ends the stream, picks another one
// (Source, then Addrs) and resumes where it stopped: from the seq after
// the last whole record it read (the seq of a message whose fragments it
// read only in part), so the store gets no gap and the receiver drops
// the few records it gets twice.
//
// What it sends (NAKs, status) goes nowhere: the upstream's TCP stream
// has no gaps to repair, and its flow control is TCP's.
//
// Concurrency: one goroutine reads the connection into a few large
// chunks, checking every frame's CRC; Poll (one goroutine, the
// Service's) takes whole chunks, so the hand-off costs two channel
// operations per chunk and Poll allocates nothing per packet. Stats is
// safe from any goroutine.
type Upstream struct {
	cfg UpstreamConfig
	log *slog.Logger

	full  chan upstreamChunk
	free  chan []byte
	errc  chan error // the reader's fatal end (cap 1)
	stop  chan struct{}
	timer *time.Timer // Poll's wait (Poll goroutine)
	fatal error       // Poll goroutine

	startOnce sync.Once
	closeOnce sync.Once
	done      chan struct{} // closed when the reader goroutine ended

	mu    sync.Mutex // guards conn and stats
	conn  net.Conn
	stats UpstreamStats
}

// NewUpstream validates cfg; nothing is read before Start.
func NewUpstream(cfg UpstreamConfig) (*Upstream, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	u := &Upstream{cfg: cfg, log: log, full: make(chan upstreamChunk, upstreamChunks),
		free: make(chan []byte, upstreamChunks), errc: make(chan error, 1), stop: make(chan struct{}),
		timer: time.NewTimer(time.Hour), done: make(chan struct{})}
	u.timer.Stop()
	for i := 0; i < upstreamChunks; i++ {
		u.free <- make([]byte, upstreamChunkBytes)
	}
	return u, nil
}

// SetSource sets cfg.Source before Start (a gossip Agent that starts
// after the Service that owns this Upstream).
func (u *Upstream) SetSource(src func(from uint64, failed string) string) { u.cfg.Source = src }

// Start begins following from seq from (0 is 1): the tier-2 store's
// Contiguous+1. Later calls do nothing.
func (u *Upstream) Start(from uint64) {
	u.startOnce.Do(func() {
		u.mu.Lock()
		u.stats.Next = max(from, 1)
		u.mu.Unlock()
		go u.run(max(from, 1))
	})
}

// Stats returns the counters.
func (u *Upstream) Stats() UpstreamStats {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.stats
}

// Send drops frame: a NAK or status has no one to go to (see Upstream).
func (u *Upstream) Send([]byte) error { return u.open() }

// Flush does nothing but report a closed Upstream.
func (u *Upstream) Flush() error { return u.open() }

func (u *Upstream) open() error {
	select {
	case <-u.stop:
		return transport.ErrClosed
	default:
		return nil
	}
}

// Poll hands h the packets of one chunk read from the upstream, waiting
// up to wait for one. It returns ErrUpstream (wrapped, naming the last
// replayer and seq) once the reader gave up.
func (u *Upstream) Poll(h transport.Handler, wait time.Duration) (int, error) {
	if u.fatal != nil {
		return 0, u.fatal
	}
	var ch upstreamChunk
	select {
	case ch = <-u.full:
	case <-u.stop:
		return 0, transport.ErrClosed
	default:
		if wait <= 0 {
			return 0, u.failed()
		}
		u.timer.Reset(wait)
		select {
		case ch = <-u.full:
			u.timer.Stop()
		case err := <-u.errc:
			u.timer.Stop()
			u.fatal = err
			return 0, err
		case <-u.stop:
			u.timer.Stop()
			return 0, transport.ErrClosed
		case <-u.timer.C:
			return 0, nil
		}
	}
	n := 0
	b := ch.b[:ch.n]
	for len(b) > 0 {
		k := int(le32(b[4:])) + wire.RewindFrameHeaderBytes
		pkt := b[wire.RewindFrameHeaderBytes:k]
		// A stored packet keeps the retransmit flag of the repair that
		// brought it to the upstream; here it is the stream itself (a
		// receiver starts only on a packet that is not a repair).
		wire.SetPacketFlags(pkt, le16(pkt[6:])&^wire.PacketRetransmit)
		h(pkt, transport.NoPeer)
		b = b[k:]
		n++
	}
	u.free <- ch.b
	return n, nil
}

func (u *Upstream) failed() error {
	select {
	case err := <-u.errc:
		u.fatal = err
		return err
	default:
		return nil
	}
}

// Close stops the reader and closes the connection; Poll returns
// transport.ErrClosed after it.
func (u *Upstream) Close() error {
	u.closeOnce.Do(func() {
		close(u.stop)
		u.mu.Lock()
		if u.conn != nil {
			u.conn.Close()
		}
		u.mu.Unlock()
	})
	return nil
}

// run is the reader goroutine: follow an upstream, and on its failure the
// next one, from the seq after what was read, until stopped or no
// upstream served that seq for FailoverWait.
func (u *Upstream) run(from uint64) {
	defer close(u.done)
	failed := ""
	idx := -1
	since, tries := time.Now(), 0
	session := u.cfg.Session
	fromOldest := u.cfg.FromOldest
	for {
		addr := ""
		if u.cfg.Source != nil {
			addr = u.cfg.Source(from, failed)
		}
		if addr == "" && len(u.cfg.Addrs) > 0 {
			idx = (idx + 1) % len(u.cfg.Addrs)
			addr = u.cfg.Addrs[idx]
		}
		var err error
		next := from
		if addr == "" {
			err = errors.New("no tier-1 replayer known that holds it")
		} else {
			next, err = u.follow(addr, from, &session, &fromOldest)
		}
		select {
		case <-u.stop:
			return
		default:
		}
		if next > from {
			from, since, tries = next, time.Now(), 0
		}
		u.mu.Lock()
		u.stats.Addr, u.stats.Next = "", from
		u.stats.Failovers++
		u.mu.Unlock()
		if time.Since(since) > u.cfg.FailoverWait {
			u.errc <- fmt.Errorf("%w: no replayer served seq %d for %v; the last, %s: %w", ErrUpstream, from, u.cfg.FailoverWait, addr, err)
			return
		}
		u.log.Warn("tier 2: upstream replayer failed; following another", "upstream", addr, "from", from, "err", err)
		failed = addr
		tries++
		pause := time.Duration(0)
		if tries > 1 || addr == "" {
			pause = min(u.cfg.RetryMax, 25*time.Millisecond<<min(tries, 6))
		}
		if pause > 0 {
			t := time.NewTimer(pause)
			select {
			case <-t.C:
			case <-u.stop:
				t.Stop()
				return
			}
		}
	}
}

// follow reads one upstream's rewind from seq from, pushing whole frames
// to Poll, and returns the seq to resume from and why it ended.
func (u *Upstream) follow(addr string, from uint64, session *uint64, fromOldest *bool) (uint64, error) {
	c, rep, err := u.ask(addr, from, *session)
	if err == nil && rep.Status == wire.RewindGone && *fromOldest && rep.Oldest > from {
		// An empty store that starts at the upstream's oldest seq.
		c.Close()
		from = rep.Oldest
		c, rep, err = u.ask(addr, from, *session)
	}
	if err != nil {
		return from, err
	}
	defer c.Close()
	switch rep.Status {
	case wire.RewindOK:
	case wire.RewindGone:
		return from, fmt.Errorf("refused: it holds seqs from %d only", rep.Oldest)
	case wire.RewindBadSession:
		return from, fmt.Errorf("refused: it holds session %d, not %d", rep.Session, *session)
	default:
		return from, fmt.Errorf("refused (status %d)", rep.Status)
	}
	*fromOldest = false
	if *session == 0 {
		*session = rep.Session
	}
	u.mu.Lock()
	u.stats.Addr = addr
	u.stats.Connects++
	u.mu.Unlock()
	u.log.Info("tier 2: following upstream replayer", "upstream", addr, "from", from, "its_newest", rep.Newest)
	var buf []byte
	select {
	case buf = <-u.free:
	case <-u.stop:
		return from, nil
	}
	defer func() {
		if buf != nil {
			u.free <- buf
		}
	}()
	var pkt wire.Packet
	var rec wire.Record
	have := 0
	for {
		m, rerr := c.Read(buf[have:])
		have += m
		w, pkts := 0, uint64(0)
		for w+wire.RewindFrameHeaderBytes <= have {
			k, err := wire.RewindFrameLen(buf[w:have], wire.RewindMaxPacketBytes)
			if err != nil {
				u.push(&buf, w, have, pkts)
				return from, err
			}
			if w+k > have {
				break
			}
			p, reason, end, err := wire.DecodeRewindFrame(buf[w : w+k])
			if err == nil && p != nil {
				err = wire.DecodePacket(p, &pkt)
			}
			if err != nil {
				u.push(&buf, w, have, pkts)
				return from, err
			}
			if p == nil {
				u.push(&buf, w, have, pkts)
				return from, fmt.Errorf("the upstream ended the stream before seq %d (reason %d)", end, reason)
			}
			if *session != 0 && pkt.Session != *session {
				u.push(&buf, w, have, pkts)
				return from, fmt.Errorf("the upstream served session %d, not %d", pkt.Session, *session)
			}
			for pkt.Next(&rec) {
			}
			if !rec.Fragment() || rec.Offset+uint32(len(rec.Payload)) == rec.Total {
				from = max(from, rec.Seq+1)
			} else {
				from = max(from, rec.Seq)
			}
			w += k
			pkts++
		}
		if w > 0 {
			if !u.push(&buf, w, have, pkts) {
				return from, nil
			}
			have -= w
		}
		if rerr != nil {
			if errors.Is(rerr, io.EOF) {
				return from, errors.New("the upstream closed the connection")
			}
			return from, rerr
		}
	}
}

// ask connects to addr and asks for the stream from seq from with
// follow; the caller closes the connection.
func (u *Upstream) ask(addr string, from, session uint64) (net.Conn, wire.RewindReply, error) {
	var rep wire.RewindReply
	c, err := tlsconf.Dial(addr, u.cfg.TLS, u.cfg.DialTimeout)
	if err != nil {
		return nil, rep, err
	}
	u.mu.Lock()
	if u.conn = c; u.stopped() {
		c.Close()
	}
	u.mu.Unlock()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetReadBuffer(4 << 20)
	}
	req := wire.RewindRequest{Session: session, FromSeq: from, Flags: wire.RewindFollow}
	var hb [wire.RewindReplyBytes]byte
	c.SetDeadline(time.Now().Add(u.cfg.DialTimeout))
	if _, err := c.Write(wire.AppendRewindRequest(nil, &req)); err != nil {
		c.Close()
		return nil, rep, err
	}
	if _, err := io.ReadFull(c, hb[:]); err != nil {
		c.Close()
		return nil, rep, fmt.Errorf("no answer: %w", err)
	}
	c.SetDeadline(time.Time{})
	if err := wire.DecodeRewindReply(hb[:], &rep); err != nil {
		c.Close()
		return nil, rep, err
	}
	return c, rep, nil
}

func (u *Upstream) stopped() bool {
	select {
	case <-u.stop:
		return true
	default:
		return false
	}
}

// push hands the w bytes of whole frames at the start of *buf to Poll and
// moves the have-w bytes after them to a free buffer that becomes *buf;
// false when stopped.
func (u *Upstream) push(buf *[]byte, w, have int, pkts uint64) bool {
	if w == 0 {
		return true
	}
	var nb []byte
	select {
	case nb = <-u.free:
	case <-u.stop:
		return false
	}
	copy(nb, (*buf)[w:have])
	select {
	case u.full <- upstreamChunk{b: *buf, n: w}:
	case <-u.stop:
		u.free <- nb
		return false
	}
	*buf = nb
	u.mu.Lock()
	u.stats.Packets += pkts
	u.mu.Unlock()
	return true
}

func le16(b []byte) uint16 { return uint16(b[0]) | uint16(b[1])<<8 }

func le32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}
