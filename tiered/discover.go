package tiered

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/replayer"
)

// ReplayerMeta is the MetaFunc of a replayer's Agent: svc's addresses
// (nak, rewind) and tier, the session and the seqs its store holds (read
// on the service's goroutine; ctx bounds those reads), and as load the
// NAKs it answered per second since the last refresh.
func ReplayerMeta(ctx context.Context, svc *replayer.Service, nak, rewind string, tier uint8) MetaFunc {
	rm := &replayerAnnounce{svc: svc, nak: nak, rewind: rewind, tier: tier, ctx: ctx}
	return rm.meta
}

// replayerAnnounce is what a replayer announces (`seqd replayer --gossip`): its addresses
// and tier, the session and the seqs its store holds (read on the
// service's goroutine through Do), and as load the NAKs it answered per
// second since the last refresh.
type replayerAnnounce struct {
	svc        *replayer.Service
	nak        string
	rewind     string
	tier       uint8
	ctx        context.Context
	mu         sync.Mutex
	session    uint64
	lowest     uint64
	lastNaks   uint64
	lastAt     time.Time
	lastLoadPS uint32
}

func (r *replayerAnnounce) meta() Meta {
	r.mu.Lock()
	defer r.mu.Unlock()
	ctx, cancel := context.WithTimeout(r.ctx, 200*time.Millisecond)
	defer cancel()
	// On timeout (the service busy) the last values are announced.
	_ = r.svc.Do(ctx, func(s *replayer.Store) {
		r.session = s.Session()
		if o, ok := s.Oldest(); ok {
			r.lowest = o.FirstSeq
			if o.Fragment && o.FragFrom > 0 {
				r.lowest++
			}
		}
	})
	naks, now := r.svc.Stats().Naks.Naks, time.Now()
	if !r.lastAt.IsZero() {
		if el := now.Sub(r.lastAt).Seconds(); el > 0 {
			r.lastLoadPS = uint32(min(float64(naks-r.lastNaks)/el, 1<<32-1))
		}
	}
	r.lastNaks, r.lastAt = naks, now
	hi := r.svc.Contiguous()
	lo := r.lowest
	if hi == 0 || lo > hi {
		lo, hi = 0, 0
	}
	return Meta{Role: RoleReplayer, NAKAddr: r.nak, RewindAddr: r.rewind, Tier: r.tier,
		Session: r.session, Lowest: lo, Highest: hi, Load: r.lastLoadPS}
}

// WaitReplayer waits (wait at most, or until ctx ends) for gossip to
// show a replayer that answers q, and logs the one it selected or, when
// none, the members it saw (a node then does without, as when none is
// named).
func WaitReplayer(ctx context.Context, agent *Agent, q Query, wait time.Duration, log *slog.Logger) (Meta, bool) {
	deadline := time.Now().Add(wait)
	for {
		if m, ok := agent.Select(q); ok {
			log.Info("gossip: replayer selected", "name", m.Name, "tier", m.Tier, "load", m.Load,
				"seqs", fmt.Sprintf("%d..%d", m.Lowest, m.Highest), "nak", m.NAKAddr, "rewind", m.RewindAddr)
			return m, true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			var seen []string
			for _, m := range agent.Members() {
				seen = append(seen, fmt.Sprintf("%s(%s %d..%d)", m.Name, m.Meta.Role, m.Meta.Lowest, m.Meta.Highest))
			}
			slices.Sort(seen)
			log.Warn("gossip: no replayer holds the seqs wanted; going on without one", "from", q.From, "members", seen)
			return Meta{}, false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// SetRewind makes n rewind from addrs[0] and, when a replayer dies
// mid-rewind, resume from one gossip selects (agent non-nil: the highest
// tier holding the resume seq, not the one that failed) or else the next
// of addrs.
func SetRewind(n *node.Node, log *slog.Logger, addrs []string, agent *Agent, session uint64) {
	if len(addrs) == 0 {
		return
	}
	n.SetRewindAddr(addrs...)
	if agent == nil {
		return
	}
	gossip := agent.RewindSource(Query{Session: session, HighTierFirst: true})
	n.SetRewindSource(func(from uint64, failed string) string {
		a := gossip(from, failed)
		log.Warn("rewind: the replayer failed before the rewind caught up; resuming from another", "failed", failed, "from", from, "gossip", a)
		return a
	})
}
