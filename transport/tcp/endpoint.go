package tcp

import (
	"encoding/binary"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/internal/epoll"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// endpoint is the receive half shared by Server and Client: the poller
// whose sockets Poll reads, the inbox of connections read by goroutines
// instead (no file descriptor), the fault injector and the counters. Its
// poll runs on the endpoint's goroutine only.
type endpoint struct {
	// poller holds the endpoint's connections; a Client's sources share
	// their owner's (shared: the owner closes it). Poll waits in it on the
	// endpoint's goroutine and then reads the ready sockets itself, so a
	// frame reaches the handler with no goroutine hand-off (a reader
	// goroutine per connection cost most of TCP's round trip over UDP's).
	// A connection's key is a Server's slot and generation or a Client's
	// source index, so an event of a closed connection is stale, never
	// misrouted (see epoll.Set).
	poller *epoll.Set
	shared bool
	// notifier, if set (Server.NotifyOnReceive), is an edge-triggered set
	// of the same sockets watched by a goroutine that signals also.
	notifier atomic.Pointer[epoll.Set]
	also     atomic.Pointer[chan<- struct{}]
	// connOf finds the live connection of an event's key (nil if it is
	// gone); endpoint goroutine only.
	connOf func(lo, hi int32) *conn
	// pollMu is held by poll, so that close never releases the poller
	// under a wait.
	pollMu sync.Mutex

	// inbox receives the frames of connections read by reader goroutines
	// (made on the first such connection; a source uses its owner's).
	inbox      atomic.Pointer[inbox]
	inboxOnce  sync.Once
	inboxBytes int
	home       *endpoint // a source's owner, whose inbox and poller it uses

	// closing is closed by Close.
	closing chan struct{}

	faults    *fault.Injector // nil when no fault is configured
	passFrame func([]byte)    // e.deliverFaulted, built once
	h         transport.Handler
	delivered int

	// Counters. The first group is written by the endpoint goroutine, the
	// second by reader and writer goroutines; the padding keeps them on
	// separate cache lines.
	framesSent, bytesSent, framesReceived, bytesReceived atomic.Uint64
	dropped, faultDropped                                atomic.Uint64
	_                                                    [64]byte
	oversized, slow, writeFailed, refusedConns           atomic.Uint64

	// closes logs connections closed for cause or refused, rate-limited.
	closes transport.RateLog

	// auth verifies every frame received (Config.Auth), nil: none.
	// authFailed counts those that failed, by the kind their prefix
	// claims (written by Poll and by reader goroutines).
	auth       *wire.Auth
	authFailed wire.AuthFailureCounts
}

// maxReadsPerConn bounds the reads of one connection in one Poll (each
// up to ReadBufferBytes), so that one busy peer does not hold the poll;
// the rest is read by the next.
const maxReadsPerConn = 4

func (e *endpoint) init(cfg Config, faultStream uint64, role string, p *epoll.Set) {
	e.closes = transport.RateLog{
		Logger: cfg.logger(), Msg: "tcp: connections closed for cause or refused (reason of the last in last_err)",
		Attrs: []any{"role", role, "addr", cfg.Addr},
	}
	e.poller = p
	e.auth = cfg.Auth
	e.inboxBytes = cfg.InboxBytes
	e.closing = make(chan struct{})
	if cfg.Faults.Enabled() {
		e.faults = fault.New(cfg.Faults, faultStream)
		e.passFrame = e.deliverFaulted
	}
}

// readerInbox is the inbox a reader goroutine fills, made on first use.
func (e *endpoint) readerInbox() *inbox {
	h := e
	if e.home != nil {
		h = e.home
	}
	h.inboxOnce.Do(func() {
		q := newInbox(h.inboxBytes)
		q.signal = h.signal
		h.inbox.Store(q)
	})
	return h.inbox.Load()
}

// signal wakes the endpoint's Poll and the notified channel, if any: a
// reader goroutine pushed frames.
func (e *endpoint) signal() {
	e.poller.Wake()
	if also := e.also.Load(); also != nil {
		select {
		case *also <- struct{}{}:
		default:
		}
	}
}

func (e *endpoint) isClosing() bool {
	select {
	case <-e.closing:
		return true
	default:
		return false
	}
}

// poll hands h every frame that has arrived, waiting up to wait for the
// first; a wake (Client.Wake) returns at once. The caller has flushed.
func (e *endpoint) poll(h transport.Handler, wait time.Duration) (int, error) {
	e.pollMu.Lock()
	defer e.pollMu.Unlock()
	if e.isClosing() {
		return 0, transport.ErrClosed
	}
	// A fault injector may hold a frame back, released when the sockets
	// are found empty: look at once. Otherwise the wait itself returns
	// at once if a socket is ready, and says which.
	if wait <= 0 || e.faults != nil {
		n, woken, err := e.round(h, 0)
		if n > 0 || err != nil || wait <= 0 || woken {
			return n, err
		}
	}
	deadline := time.Now().Add(wait)
	for {
		n, woken, err := e.round(h, wait)
		if n > 0 || err != nil || woken {
			return n, err
		}
		// Nothing (a timeout, a stale event, a frame dropped by faults):
		// wait for the rest of the time.
		if wait = time.Until(deadline); wait <= 0 {
			return 0, nil
		}
	}
}

// round waits up to wait for ready sockets (0: only looks), reads them
// and delivers their frames and the inbox's.
func (e *endpoint) round(h transport.Handler, wait time.Duration) (n int, woken bool, err error) {
	events, woken, _, err := e.poller.Wait(wait)
	if e.isClosing() {
		return 0, false, transport.ErrClosed
	}
	if err != nil {
		return 0, false, fmt.Errorf("tcp: epoll_wait: %w", err)
	}
	e.h, e.delivered = h, 0
	if q := e.inbox.Load(); q != nil {
		if head, tail, ok := q.pending(); ok && head != tail {
			for p := head; p < tail; {
				var rec []byte
				rec, p = q.record(p)
				e.offer(rec)
			}
			q.release(tail)
		}
	}
	for i := range events {
		if c := e.connOf(epoll.Key(&events[i])); c != nil && c.polled {
			e.readConn(c)
		}
	}
	if e.faults != nil {
		if e.delivered == 0 {
			e.faults.Release(e.passFrame)
		}
		e.faultDropped.Store(e.faults.Counters().Dropped)
	}
	n = e.delivered
	e.h, e.delivered = nil, 0
	return n, woken, nil
}

// readConn reads c (up to maxReadsPerConn times while reads fill the
// buffer) and offers its frames, each with c's Peer in place of its
// length prefix.
func (e *endpoint) readConn(c *conn) {
	for range maxReadsPerConn {
		room := len(c.fr.room())
		if !c.readOnceNow() {
			return
		}
		for {
			rec, err := c.fr.nextRecord()
			if err != nil {
				e.oversized.Add(1)
				c.kill(err)
				return
			}
			if rec == nil {
				break
			}
			if e.auth != nil {
				n, ok := e.verify(c, rec[lenPrefixBytes:])
				if !ok {
					return
				}
				rec = rec[:lenPrefixBytes+n]
			}
			binary.LittleEndian.PutUint32(rec, uint32(c.peer))
			e.offer(rec)
		}
		if c.rn < room || c.dead.Load() {
			return
		}
	}
}

// verify checks the signed frame f of c in place (e.auth set) and
// returns the length of the frame without its trailer. A frame that
// fails is counted and c is closed (the reason logged): the rest of its
// byte stream cannot be trusted.
func (e *endpoint) verify(c *conn, f []byte) (int, bool) {
	n, err := e.auth.Verify(f)
	if err != nil {
		k, _ := wire.PeekKind(f)
		e.authFailed.Add(int(k), 1)
		c.kill(fmt.Errorf("%w: %s frame: %w", ErrAuth, k, err))
		return 0, false
	}
	return n, true
}

// offer delivers a record (the sender's Peer, then the frame) through the
// fault injector, if any.
func (e *endpoint) offer(peerAndFrame []byte) {
	if e.faults != nil {
		e.faults.Pass(peerAndFrame, e.passFrame)
		return
	}
	e.deliverFaulted(peerAndFrame)
}

func (e *endpoint) deliverFaulted(peerAndFrame []byte) {
	e.delivered++
	frame := peerAndFrame[4:]
	e.framesReceived.Add(1)
	e.bytesReceived.Add(uint64(len(frame)))
	e.h(frame, transport.Peer(binary.LittleEndian.Uint32(peerAndFrame)))
}

// close releases the poller once no poll is running; a waiting poll
// returns transport.ErrClosed (closing is closed first).
func (e *endpoint) close() {
	if q := e.inbox.Load(); q != nil {
		q.close()
	}
	if e.shared {
		return
	}
	e.poller.ForceWake()
	e.pollMu.Lock()
	e.poller.Close()
	e.pollMu.Unlock()
}

func (e *endpoint) counters() transport.Counters {
	return transport.Counters{
		FramesSent:     e.framesSent.Load(),
		FramesReceived: e.framesReceived.Load(),
		BytesSent:      e.bytesSent.Load(),
		BytesReceived:  e.bytesReceived.Load(),
		Dropped:        e.dropped.Load() + e.faultDropped.Load(),
		Refused:        e.writeFailed.Load(),
		AuthFailed:     e.authFailed.Total(),
	}
}

// pollEvents is the most sockets one wait reports; level-triggered, the
// others are reported by the next.
const pollEvents = 64

// newPoller makes an endpoint's epoll set: level-triggered for Poll, or
// edge-triggered for a Server's notifier (package hybrid), where each
// arrival is reported once so a goroutine can wait on it and signal
// without spinning while the data waits for Poll.
func newPoller(edgeTriggered bool) (*epoll.Set, error) {
	p, err := epoll.New(epoll.Config{MaxEvents: pollEvents, EdgeTriggered: edgeTriggered, HangUp: true})
	if err != nil {
		return nil, fmt.Errorf("tcp: %w", err)
	}
	return p, nil
}
