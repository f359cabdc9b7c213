package bridge

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/transport"
)

// StreamHandler is the application of a cross-connect node: it gets the
// messages of several independent streams (several sequencer groups, each
// its own session and groups), each call told which stream, 0-based in
// the order NewCross was given them.
type StreamHandler interface {
	OnStreamMessage(stream int, m *node.Message)
}

// Cross is a cross-connect node: one node.Node per stream, every one
// delivering to one StreamHandler. Each stream keeps its own total order
// (a stream's messages reach the handler in seq order, each once); there
// is no order between streams: which of two streams' messages comes first
// depends on the network, and a replay may interleave them differently.
// An application that needs one order across streams bridges them into
// one sequencer instead.
//
// The handler is called by one stream's goroutine at a time (a mutex
// serialises the streams), so it needs no lock of its own. It may send
// to any stream with Node(i).TrySend; a blocking Send from inside the
// handler would wait for a window that only delivery frees.
type Cross struct {
	nodes []*node.Node
	mu    sync.Mutex // serialises the handler across the streams
	h     StreamHandler
}

type crossStream struct {
	c      *Cross
	stream int
}

func (s *crossStream) OnMessage(m *node.Message) {
	s.c.mu.Lock()
	s.c.h.OnStreamMessage(s.stream, m)
	s.c.mu.Unlock()
}

// NewCross builds one node per stream: cfgs[i] over clients[i].
func NewCross(cfgs []node.Config, clients []transport.Client, h StreamHandler) (*Cross, error) {
	if len(cfgs) == 0 || len(cfgs) != len(clients) {
		return nil, fmt.Errorf("%w: %d node configs for %d clients, want as many, at least one", ErrConfig, len(cfgs), len(clients))
	}
	c := &Cross{h: h}
	for i := range cfgs {
		n, err := node.New(cfgs[i], &crossStream{c: c, stream: i}, clients[i])
		if err != nil {
			return nil, fmt.Errorf("bridge: cross-connect stream %d: %w", i, err)
		}
		c.nodes = append(c.nodes, n)
	}
	return c, nil
}

// Streams is how many streams the node reads.
func (c *Cross) Streams() int { return len(c.nodes) }

// Node is stream i's node: send to that stream's sequencer with it.
func (c *Cross) Node(i int) *node.Node { return c.nodes[i] }

// Run runs every stream's node until ctx ends or one stops; the first
// error (other than ctx's) ends the others and is returned.
func (c *Cross) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(c.nodes))
	for i, n := range c.nodes {
		go func() {
			err := n.Run(ctx)
			if err != nil && !errors.Is(err, context.Canceled) {
				err = fmt.Errorf("bridge: cross-connect stream %d: %w", i, err)
			}
			errs <- err
		}()
	}
	var first error
	for range c.nodes {
		err := <-errs
		cancel()
		if first == nil && err != nil && !errors.Is(err, context.Canceled) {
			first = err
		}
	}
	if first == nil {
		return ctx.Err()
	}
	return first
}
