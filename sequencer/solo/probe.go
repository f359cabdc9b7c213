package solo

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/open"
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
// the TCP address: a sequencer listening there answers with its stream.
// The probe injects no faults: it only listens.
func probeLiveSession(ctx context.Context, oc open.Config, log *slog.Logger, d time.Duration) (*liveSession, error) {
	if d <= 0 {
		return nil, nil
	}
	kind := oc.Transport
	var clients []transport.Client
	var wheres []string
	defer func() {
		for _, cl := range clients {
			cl.Close()
		}
	}()
	if kind == "udp" || kind == "hybrid" {
		mc := oc.Multicast
		mc.Faults = fault.Config{}
		cl, err := multicast.NewClient(mc)
		if err != nil {
			return nil, err
		}
		clients = append(clients, cl)
		wheres = append(wheres, fmt.Sprintf("udp group %s on interface %s", mc.StreamGroup, mc.Interface))
	}
	if kind == "tcp" || kind == "hybrid" {
		tc := oc.TCP
		tc.Faults, tc.Logger = fault.Config{}, log
		tc.DialTimeout = min(d, time.Second)
		if cl, err := tcp.Dial(tc); err == nil {
			clients = append(clients, cl)
			where := tc.Addr
			if len(tc.Addrs) > 1 {
				where = strings.Join(tc.Addrs, ",")
			}
			wheres = append(wheres, "tcp "+where)
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
