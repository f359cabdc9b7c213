package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/tiered"
)

// gossipFlags are the discovery keys of `seqd replayer` (tier too) and
// `seqd tail`: members find each other with hashicorp/memberlist.
func gossipFlags(withTier bool) []cli.Flag {
	fl := []cli.Flag{
		altsrc.NewStringFlag(&cli.StringFlag{Name: "gossip", EnvVars: []string{tiered.SeedsEnv, options.EnvName("gossip")},
			Usage: "join replayer discovery by gossip through these seeds (host[:port], comma-separated; port " + strconv.Itoa(tiered.DefaultGossipPort) + " by default); also " + tiered.SeedsEnv}),
		options.String("gossip.bind", "", "host:port gossip listens on (UDP and TCP; default 127.0.0.1:0, a free port on loopback); setting it alone starts gossip with no seed (the member others name as theirs)"),
		options.String("gossip.name", "", "this member's name in gossip (default: hostname-pid)"),
		options.Duration("gossip.wait", 5*time.Second, "seqd tail and node: how long to wait for gossip to show a replayer that holds --from (seq 1 for a node)"),
	}
	if withTier {
		fl = append(fl, altsrc.NewIntFlag(&cli.IntFlag{Name: "gossip.tier", Aliases: []string{"tier"}, Value: 1, EnvVars: []string{options.EnvName("gossip.tier")},
			Usage: "this replayer's tier: 1 follows the stream itself; 2 (or more) follows a lower-tier replayer's store over TCP (--upstream, or one gossip selects) and serves late joiners' rewinds so they leave tier 1 alone"}),
			options.String("upstream", "", "with --tier 2: the rewind addresses (host:port, comma-separated) of tier-1 replayers to follow, in turn when one dies (with --gossip: used when gossip shows none)"),
			options.Duration("upstream.failover-wait", tiered.DefaultUpstreamConfig().FailoverWait, "with --tier 2: stop with an error once no upstream replayer served the next seq for this long"))
	}
	return fl
}

// gossipOn reports whether the gossip keys ask for discovery.
func gossipOn(c *cli.Context) bool { return c.String("gossip") != "" || c.String("gossip.bind") != "" }

// startGossip starts this process's gossip Agent (role and meta from
// meta) from the gossip.* keys.
func startGossip(c *cli.Context, log *slog.Logger, meta tiered.MetaFunc) (*tiered.Agent, error) {
	cfg := tiered.DefaultConfig()
	bind := c.String("gossip.bind")
	if bind == "" {
		bind = "127.0.0.1:0"
	}
	host, port, err := net.SplitHostPort(bind)
	p, perr := strconv.Atoi(port)
	if err != nil || net.ParseIP(host) == nil || perr != nil || p < 0 || p > 65535 {
		return nil, options.KeyError("gossip.bind", fmt.Sprintf("%q", bind), "IP:port (port 0: a free one)")
	}
	cfg.BindAddr, cfg.BindPort = host, p
	if cfg.Seeds, err = tiered.ParseSeeds(c.String("gossip")); err != nil {
		return nil, options.KeyError("gossip", fmt.Sprintf("%q", c.String("gossip")), "host[:port],... ("+err.Error()+")")
	}
	cfg.Name = c.String("gossip.name")
	cfg.Logger = log
	a, err := tiered.NewAgent(cfg, meta)
	if err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	log.Info("gossip started", "name", a.Name(), "addr", a.Addr(), "seeds", cfg.Seeds, "joined", a.Joined())
	return a, nil
}

// replayerMeta is what `seqd replayer --gossip` announces: its addresses
// and tier, the session and the seqs its store holds (read on the
// service's goroutine through Do), and as load the NAKs it answered per
// second since the last refresh.
type replayerMeta struct {
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

func (r *replayerMeta) meta() tiered.Meta {
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
	return tiered.Meta{Role: tiered.RoleReplayer, NAKAddr: r.nak, RewindAddr: r.rewind, Tier: r.tier,
		Session: r.session, Lowest: lo, Highest: hi, Load: r.lastLoadPS}
}

// startReplayerGossip is `seqd replayer --gossip`: nil when gossip is off.
func startReplayerGossip(c *cli.Context, ctx context.Context, log *slog.Logger, svc *replayer.Service, nak, rewind string) (*tiered.Agent, error) {
	if !gossipOn(c) {
		return nil, nil
	}
	tier := c.Int("gossip.tier")
	rm := &replayerMeta{svc: svc, nak: nak, rewind: rewind, tier: uint8(tier), ctx: ctx}
	return startGossip(c, log, rm.meta)
}

// tailGossip is `seqd tail --gossip`: it waits (gossip.wait at most) for
// a replayer that holds from (and serves rewinds when the tail rewinds),
// and returns its NAK and rewind addresses to use; "" when gossip is off
// or shows none (the tail then does without, as when none is named).
func tailGossip(c *cli.Context, log *slog.Logger, from uint64) (agent *tiered.Agent, nak, rewind string, err error) {
	if !gossipOn(c) {
		return nil, "", "", nil
	}
	agent, err = startGossip(c, log, func() tiered.Meta { return tiered.Meta{Role: tiered.RoleNode} })
	if err != nil {
		return nil, "", "", err
	}
	// A rewind goes to the highest tier that holds it: tier-2 replayers
	// serve late joiners so that tier 1 is left alone.
	q := tiered.Query{From: max(from, 1), NeedNAK: true, NeedRewind: from > 0, HighTierFirst: from > 0}
	deadline := time.Now().Add(c.Duration("gossip.wait"))
	for {
		if m, ok := agent.Select(q); ok {
			log.Info("gossip: replayer selected", "name", m.Name, "tier", m.Tier, "load", m.Load,
				"seqs", fmt.Sprintf("%d..%d", m.Lowest, m.Highest), "nak", m.NAKAddr, "rewind", m.RewindAddr)
			return agent, m.NAKAddr, m.RewindAddr, nil
		}
		if time.Now().After(deadline) || c.Context.Err() != nil {
			var seen []string
			for _, m := range agent.Members() {
				seen = append(seen, fmt.Sprintf("%s(%s %d..%d)", m.Name, m.Meta.Role, m.Meta.Lowest, m.Meta.Highest))
			}
			slices.Sort(seen)
			log.Warn("gossip: no replayer holds the seqs wanted; going on without one", "from", q.From, "members", seen)
			return agent, "", "", nil
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// gossipField is the ready line's gossip=ADDR (empty when gossip is off).
func gossipField(a *tiered.Agent) string {
	if a == nil {
		return ""
	}
	return " gossip=" + a.Addr()
}
