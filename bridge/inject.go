package bridge

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/transport"
)

// maxQueuedCommands bounds the commands waiting for the Service's
// goroutine; beyond it a command is dropped and counted (its node
// resends it).
const maxQueuedCommands = 1024

// injector is a sending end's follow client: the site's client, through
// which the replayer.Service follows the stream, plus the commands that
// came over the link, sent into the site's command group (Send) on the
// Service's goroutine at its next Poll. Other goroutines queue them with
// push, which wakes a blocked Poll.
type injector struct {
	transport.Client
	mu      sync.Mutex // guards q and n
	q       [][]byte
	n       int
	dropped atomic.Uint64
	sent    atomic.Uint64
}

func newInjector(c transport.Client) *injector {
	return &injector{Client: c, q: make([][]byte, maxQueuedCommands)}
}

// push queues a copy of cmd (a command frame) for the site; safe from
// any goroutine.
func (in *injector) push(cmd []byte) {
	in.mu.Lock()
	if in.n == len(in.q) {
		in.mu.Unlock()
		in.dropped.Add(1)
		return
	}
	in.q[in.n] = append(in.q[in.n][:0], cmd...)
	in.n++
	in.mu.Unlock()
	if w, ok := in.Client.(transport.Waker); ok {
		w.Wake()
	}
}

// Poll sends the queued commands, then polls the site's client.
func (in *injector) Poll(h transport.Handler, wait time.Duration) (int, error) {
	in.mu.Lock()
	n := in.n
	for i := 0; i < n; i++ {
		_ = in.Client.Send(in.q[i]) // loss is the transport's to count; the node resends
	}
	in.n = 0
	in.mu.Unlock()
	if n > 0 {
		in.sent.Add(uint64(n))
		if err := in.Client.Flush(); err != nil {
			return 0, err
		}
	}
	return in.Client.Poll(h, wait)
}

// AddSource and SendTo pass the site client's repair sources through
// (replayer.ServiceConfig.Sources).
func (in *injector) AddSource(addr string) (transport.Peer, error) {
	s, ok := in.Client.(transport.Sourcer)
	if !ok {
		return 0, ErrConfig
	}
	return s.AddSource(addr)
}

func (in *injector) SendTo(to transport.Peer, frame []byte) error {
	s, ok := in.Client.(transport.Sourcer)
	if !ok {
		return ErrConfig
	}
	return s.SendTo(to, frame)
}

// Wake passes a wake to the site's client.
func (in *injector) Wake() {
	if w, ok := in.Client.(transport.Waker); ok {
		w.Wake()
	}
}
