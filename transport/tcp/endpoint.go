package tcp

import (
	"encoding/binary"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
)

// endpoint is the receive half shared by Server and Client: the inbox the
// reader goroutines fill, the fault injector and the counters. Its poll
// runs on the endpoint's goroutine only.
type endpoint struct {
	inbox *inbox
	// closing is closed by Close; it unblocks a waiting Poll.
	closing chan struct{}
	// wake (capacity 1) makes a waiting Poll return early (Client.Wake).
	wake  chan struct{}
	timer *time.Timer // reused by every waiting Poll

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
}

func (e *endpoint) init(cfg Config, faultStream uint64, role string) {
	e.closes = transport.RateLog{
		Logger: cfg.logger(), Msg: "tcp: connections closed for cause or refused (reason of the last in last_err)",
		Attrs: []any{"role", role, "addr", cfg.Addr},
	}
	e.inbox = newInbox(cfg.InboxBytes)
	e.closing = make(chan struct{})
	e.wake = make(chan struct{}, 1)
	e.timer = time.NewTimer(time.Hour)
	e.timer.Stop()
	if cfg.Faults.Enabled() {
		e.faults = fault.New(cfg.Faults, faultStream)
		e.passFrame = e.deliverFaulted
	}
}

// poll hands every frame in the inbox to h, waiting up to wait for the
// first one. The caller has flushed its output.
func (e *endpoint) poll(h transport.Handler, wait time.Duration) (int, error) {
	n, err := e.drain(h)
	if n > 0 || err != nil || wait <= 0 {
		return n, err
	}
	deadline := time.Now().Add(wait)
	for {
		e.timer.Reset(wait)
		select {
		case <-e.inbox.ready:
			e.timer.Stop()
		case <-e.wake:
			e.timer.Stop()
			return e.drain(h)
		case <-e.timer.C:
			return e.drain(h)
		case <-e.closing:
			e.timer.Stop()
			return 0, transport.ErrClosed
		}
		if n, err = e.drain(h); n > 0 || err != nil {
			return n, err
		}
		// A stale wake-up: wait for the rest of the time.
		if wait = time.Until(deadline); wait <= 0 {
			return 0, nil
		}
	}
}

// drain delivers what the inbox holds now. When it holds nothing, a frame
// the fault injector held back for reordering is delivered instead, so a
// reordered frame is late, never lost.
func (e *endpoint) drain(h transport.Handler) (int, error) {
	head, tail, ok := e.inbox.pending()
	if !ok {
		return 0, transport.ErrClosed
	}
	n := 0
	if e.faults != nil {
		e.h, e.delivered = h, 0
		if head == tail {
			e.faults.Release(e.passFrame)
		}
		for p := head; p < tail; {
			var rec []byte
			rec, p = e.inbox.record(p)
			e.faults.Pass(rec, e.passFrame)
		}
		e.faultDropped.Store(e.faults.Counters().Dropped)
		e.h, n = nil, e.delivered
	} else {
		for p := head; p < tail; n++ {
			var rec []byte
			rec, p = e.inbox.record(p)
			e.deliver(h, rec)
		}
	}
	if head != tail {
		e.inbox.release(tail)
	}
	return n, nil
}

func (e *endpoint) deliver(h transport.Handler, peerAndFrame []byte) {
	frame := peerAndFrame[4:]
	e.framesReceived.Add(1)
	e.bytesReceived.Add(uint64(len(frame)))
	h(frame, transport.Peer(binary.LittleEndian.Uint32(peerAndFrame)))
}

func (e *endpoint) deliverFaulted(peerAndFrame []byte) {
	e.delivered++
	e.deliver(e.h, peerAndFrame)
}

func (e *endpoint) counters() transport.Counters {
	return transport.Counters{
		FramesSent:     e.framesSent.Load(),
		FramesReceived: e.framesReceived.Load(),
		BytesSent:      e.bytesSent.Load(),
		BytesReceived:  e.bytesReceived.Load(),
		Dropped:        e.dropped.Load() + e.faultDropped.Load(),
		Refused:        e.writeFailed.Load(),
	}
}
