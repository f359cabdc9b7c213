package ops

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// The admin surfaces of the processes other than a cluster member
// (MemberSurface): a standalone sequencer, a replayer, a node and a tail.
// Each has the common commands (help, list, node, status), its health
// and its metrics; a node adds itself as `node ACCOUNT ...` with its
// program's AdminActions.

// ReadyLagSeqs is how far behind the stable seq it has seen a replayer
// may hold and still be ready.
const ReadyLagSeqs = 1024

// SequencerSurface is a standalone sequencer's surface: its counters
// from snap (per scrape), session, and the stream endpoint's counters
// when srv counts them.
func SequencerSurface(auth Auth, session uint64, snap func() SequencerSnap, srv transport.Server) *Surface {
	started := time.Now().UnixNano()
	st := StatusFunc(func() ProcessStatus {
		sn := snap()
		return ProcessStatus{Process: KindSequencer, Name: "sequencer", PID: os.Getpid(), StartedAt: started,
			Sequencer: &SequencerStatus{Session: session, Epoch: 1, Published: sn.LastSeq, Stable: sn.LastSeq,
				Commands: sn.Stats.Commands, Rejected: sn.Stats.Rejected}}
	})
	live := ProgressLive("the sequencer's loop", func() uint64 { sn := snap(); return sn.Stats.Heartbeats + sn.Stats.Packets }, DefaultStall)
	s := NewSurface(auth, st, HealthFuncs{LiveFunc: live})
	s.Registry.MustRegister(NewSequencerCollector(func() sequencer.Stats { return snap().Stats }),
		NewSnapCollector(snap, Gauge("seqd_published_seq", "the last seq published", func(s *SequencerSnap) float64 { return u(s.LastSeq) })))
	if c, ok := srv.(transport.Stats); ok {
		s.Registry.MustRegister(NewTransportCollector("stream", c.Counters))
	}
	return s
}

// ReplayerSurface is a replayer's surface: ready once it follows a
// session and holds within ReadyLagSeqs of the stable seq it has seen;
// rewind (nil: none yet) is its rewind server's counters.
func ReplayerSurface(auth Auth, svc *replayer.Service, rewind func() replayer.RewindStats, nakAddr, rewindAddr string) *Surface {
	started := time.Now().UnixNano()
	snap := func() ReplayerSnap {
		s := ReplayerSnap{Service: svc.Stats()}
		if rewind != nil {
			s.Rewind = rewind()
		}
		return s
	}
	st := StatusFunc(func() ProcessStatus {
		sn := snap()
		return ProcessStatus{Process: KindReplayer, Name: "replayer", PID: os.Getpid(), StartedAt: started,
			Replayer: &ReplayerStatus{Session: sn.Service.Session, First: sn.Service.First, Contiguous: sn.Service.Contiguous, Durable: sn.Service.Durable,
				Stable: sn.Service.Stable, Rewinds: sn.Rewind.Accepted, Active: sn.Rewind.Active, NakAddr: nakAddr, RewindAddr: rewindAddr}}
	})
	ready := func() error { return replayerReady(svc.Stats()) }
	live := ProgressLive("the replayer's loop", func() uint64 { return svc.Stats().Snapshots }, DefaultStall)
	s := NewSurface(auth, st, HealthFuncs{LiveFunc: live, ReadyFunc: ready})
	s.Registry.MustRegister(NewReplayerCollector(snap))
	return s
}

func replayerReady(s replayer.ServiceStats) error {
	switch {
	case s.Session == 0:
		return fmt.Errorf("%w: no stream heard yet (holds %d)", ErrNotReady, s.Contiguous)
	case s.Stable > s.Contiguous+ReadyLagSeqs:
		return fmt.Errorf("%w: catching up: holds %d, stable is %d (more than %d behind)", ErrNotReady, s.Contiguous, s.Stable, ReadyLagSeqs)
	}
	return nil
}

// NodeSurface is the surface of a process running node n (seqd node,
// seqd tail, or a program on the node library), under its account name
// (`node NAME status`, and n's AdminActions): ready once n has finished
// rewinding. kind is KindNode or KindTail; client, when it counts, adds
// the stream endpoint's counters.
func NodeSurface(auth Auth, kind, name string, n *node.Node, client transport.Client) *Surface {
	started := time.Now().UnixNano()
	nc := &nodeControl{n: n, name: name}
	st := StatusFunc(func() ProcessStatus {
		ns := nc.status()
		return ProcessStatus{Process: kind, Name: name, PID: os.Getpid(), StartedAt: started, Node: &ns}
	})
	ready := func() error {
		if n.Rewinding() {
			return fmt.Errorf("%w: rewinding (%d messages delivered so far)", ErrNotReady, n.Stats().Delivered)
		}
		return nil
	}
	live := ProgressLive("the node's loop", func() uint64 { return n.Stats().Turns }, DefaultStall)
	s := NewSurface(auth, st, HealthFuncs{LiveFunc: live, ReadyFunc: ready})
	if err := s.Table.AddNode(name, nc); err != nil {
		// An account named like a command ("status"): its status is
		// still the process's.
		s.log.Warn("admin: node not added to the command table", "name", name, "err", err)
	}
	s.Registry.MustRegister(NewNodeCollector(func() NodeSnap {
		return NodeSnap{Stats: n.Stats(), Rewinding: n.Rewinding(), InFlight: n.InFlight(), WallNS: time.Now().UnixNano()}
	}))
	if c, ok := client.(transport.Stats); ok {
		s.Registry.MustRegister(NewTransportCollector("stream", c.Counters))
	}
	return s
}

type nodeControl struct {
	n    *node.Node
	name string
}

func (c *nodeControl) status() NodeStatus {
	st := c.n.Stats()
	return NodeStatus{Account: c.name, Incarnation: c.n.Incarnation(), Rewinding: c.n.Rewinding(), InFlight: c.n.InFlight(),
		Session: st.Session, Epoch: uint64(st.Epoch), DeliveredSeq: delivered(&st), Stable: st.StableSeq,
		Delivered: st.Delivered, Gaps: st.Gaps, NaksSent: st.NaksSent, CommandsSent: st.CommandsSent, Acked: st.Acked, Rejected: st.Rejected}
}

func (c *nodeControl) Status() any { return c.status() }

func (c *nodeControl) Open() error {
	return fmt.Errorf("%w yet: %s is open while its process runs (a node that pauses and resumes needs the node library's support)", ErrNotSupported, c.name)
}

func (c *nodeControl) Close() error {
	return fmt.Errorf("%w yet: stop the process to close %s (SIGTERM)", ErrNotSupported, c.name)
}

func (c *nodeControl) Actions() []Command {
	var out []Command
	for _, a := range c.n.AdminActions() {
		run := a.Run
		out = append(out, Command{Name: a.Name, Args: a.Args, Help: a.Help, Mutates: true, Run: func(_ context.Context, args []string) (any, error) {
			return run(args)
		}})
	}
	return out
}
