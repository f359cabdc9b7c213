package main

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// liveSession is a session heard on the stream before this sequencer
// started.
type liveSession struct {
	session uint64
	lastSeq uint64
	where   string
}

// sessionProbe remembers the first stream packet of another sequencer.
type sessionProbe struct {
	pkt   wire.Packet
	heard bool
	live  liveSession
}

func (p *sessionProbe) frame(f []byte, _ transport.Peer) {
	if p.heard {
		return
	}
	k, err := wire.PeekKind(f)
	if err != nil || (k != wire.KindData && k != wire.KindHeartbeat) {
		return
	}
	if wire.DecodePacket(f, &p.pkt) == nil {
		p.heard = true
		p.live.session = p.pkt.Session
		p.live.lastSeq = p.pkt.LastSeq()
	}
}

// probeLiveSession listens on the configured stream for d before the
// sequencer starts: a second sequencer on the same groups would take the
// stream over and stop every node of the running session (they see a new
// session). It returns the session heard, if any. Over TCP it connects to
// tcp.addr: a sequencer listening there answers with its stream.
func probeLiveSession(ctx context.Context, c *cli.Context, log *slog.Logger, d time.Duration) (*liveSession, error) {
	if d <= 0 {
		return nil, nil
	}
	kind := c.String("transport")
	var clients []transport.Client
	var wheres []string
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if kind == "udp" || kind == "hybrid" {
		cl, err := multicast.NewClient(multicastConfig(c, fault.Config{}))
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
		wheres = append(wheres, fmt.Sprintf("udp group %s on interface %s", c.String("udp.stream-group"), c.String("udp.interface")))
	}
	if kind == "tcp" || kind == "hybrid" {
		tc := tcpConfig(c, fault.Config{}, log)
		tc.DialTimeout = min(d, time.Second)
		if cl, err := tcp.Dial(tc); err == nil {
			clients = append(clients, cl)
			wheres = append(wheres, "tcp "+c.String("tcp.addr"))
		} // nothing listens there: no sequencer on it
	}
	return listenForSession(ctx, clients, wheres, d)
}

// listenForSession polls clients for up to d and returns the first
// session heard. With no client (over TCP nothing listens on the address:
// no sequencer runs there) it returns at once: there is nothing to hear,
// and waiting out d in a loop of clock reads burned a core while the
// nodes of a bench started.
func listenForSession(ctx context.Context, clients []transport.Client, wheres []string, d time.Duration) (*liveSession, error) {
	if len(clients) == 0 {
		return nil, nil
	}
	probes := make([]sessionProbe, len(clients))
	handlers := make([]transport.Handler, len(clients))
	for i := range probes {
		handlers[i] = probes[i].frame
	}
	end := time.Now().Add(d)
	for time.Now().Before(end) && ctx.Err() == nil {
		for i, cl := range clients {
			if _, err := cl.Poll(handlers[i], 5*time.Millisecond); err != nil {
				return nil, fmt.Errorf("listening for a live session on %s: %w", wheres[i], err)
			}
			if probes[i].heard {
				probes[i].live.where = wheres[i]
				return &probes[i].live, nil
			}
		}
	}
	return nil, nil
}
