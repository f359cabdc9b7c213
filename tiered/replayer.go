package tiered

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
)

// ReplayerRun is what runs beside a replayer.Service in a replayer
// process (`seqd replayer`): its upstream, gossip and rewind server, and
// the lines it prints.
type ReplayerRun struct {
	// Transport, NakAddr and Dir are named on the ready line.
	Transport, NakAddr, Dir string
	// Follow is the service's follow client; silence on it for WarnAfter
	// (0: never) is logged, naming Where it listens.
	Follow    transport.Client
	Where     string
	WarnAfter time.Duration
	// Upstream, for a tier-2 replayer (Tier >= 2), is the follow client:
	// started here from the service's contiguous seq + 1, from the
	// replayers gossip selects when Agent is set. UpstreamName names it
	// on the ready line.
	Upstream     *Upstream
	Tier         int
	UpstreamName string
	// Session is the configured session (0: any), which gossip's
	// upstream must belong to.
	Session uint64
	// Agent is the replayer's gossip (nil: none).
	Agent *Agent
	// RewindAddr, when set, is served by RewindServe (the rewind server)
	// until the run ends; its failure ends the run.
	RewindAddr  string
	RewindServe func(ctx context.Context, svc *replayer.Service, addr string, log *slog.Logger) error
	// Out receives the ready and stopped lines (nil: os.Stdout).
	Out io.Writer
	Log *slog.Logger
}

// RunReplayer runs svc with what r adds, printing
//
//	replayer: ready transport=T nak=ADDR dir=DIR session=S contiguous=N [tier=2 upstream=U] [gossip=ADDR]
//	replayer: stopped contiguous=N durable=N appended=N naks=N retransmitted=N gones=N not_held=N allocs_per_msg=F
//
// and returns the service's error (context.Canceled when ctx ended it) or
// the rewind server's.
func RunReplayer(ctx context.Context, svc *replayer.Service, r ReplayerRun) error {
	out, log := r.Out, r.Log
	if out == nil {
		out = os.Stdout
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	upstreamField, gossipField := "", ""
	if r.Agent != nil {
		gossipField = " gossip=" + r.Agent.Addr()
	}
	if up := r.Upstream; up != nil {
		if r.Agent != nil {
			up.SetSource(r.Agent.RewindSource(Query{Session: r.Session, MaxTier: uint8(r.Tier - 1)}))
		}
		up.Start(svc.Contiguous() + 1)
		upstreamField = fmt.Sprintf(" tier=%d upstream=%s", r.Tier, r.UpstreamName)
	}
	rewindErr := make(chan error, 1)
	if addr := r.RewindAddr; addr != "" && r.RewindServe != nil {
		go func() {
			err := r.RewindServe(runCtx, svc, addr, log)
			if err != nil && runCtx.Err() == nil {
				rewindErr <- fmt.Errorf("rewind server: %w", err)
				cancel()
			}
		}()
	}
	go transport.WarnSilence(runCtx, log, r.Follow, r.Where, r.WarnAfter)
	fmt.Fprintf(out, "replayer: ready transport=%s nak=%s dir=%s session=%d contiguous=%d%s%s\n",
		r.Transport, r.NakAddr, r.Dir, svc.Store().Session(), svc.Contiguous(), upstreamField, gossipField)
	log.Info("replayer serving", "dir", r.Dir, "nak_addr", r.NakAddr, "transport", r.Transport, "pid", os.Getpid())
	from := svc.Contiguous()
	var ms0, ms1 runtime.MemStats
	runtime.ReadMemStats(&ms0)
	err := svc.Run(runCtx)
	runtime.ReadMemStats(&ms1)
	st := svc.Stats()
	allocs := 0.0
	if st.Contiguous > from {
		allocs = float64(ms1.Mallocs-ms0.Mallocs) / float64(st.Contiguous-from)
	}
	if up := r.Upstream; up != nil {
		us := up.Stats()
		log.Info("tier 2: upstream", "connects", us.Connects, "failovers", us.Failovers, "packets", us.Packets, "next", us.Next)
	}
	fmt.Fprintf(out, "replayer: stopped contiguous=%d durable=%d appended=%d naks=%d retransmitted=%d gones=%d not_held=%d allocs_per_msg=%.4f\n",
		st.Contiguous, st.Durable, st.Persist.Appended, st.Naks.Naks, st.Naks.Retransmitted, st.Naks.Gones, st.Naks.NotHeld, allocs)
	select {
	case rerr := <-rewindErr:
		return rerr
	default:
	}
	return err
}
