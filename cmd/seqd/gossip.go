package main

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strconv"
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
		options.SectionString("gossip", "gossip.seeds", "",
			"join replayer discovery by gossip through these seeds (host[:port], comma-separated; port "+strconv.Itoa(tiered.DefaultGossipPort)+" by default); also "+tiered.SeedsEnv, tiered.SeedsEnv),
		options.String("gossip.bind", "", "host:port gossip listens on (UDP and TCP; default 127.0.0.1:0, a free port on loopback); setting it alone starts gossip with no seed (the member others name as theirs)"),
		options.String("gossip.name", "", "this member's name in gossip (default: hostname-pid)"),
		options.String("security.gossip-key-file", "", "gossip keys (one a line, base64 or hex, 16/24/32 bytes; the first encrypts, the others are accepted during a rotation; make one with: openssl rand -base64 32): every gossip message is encrypted and authenticated, a member without the key is never joined"),
		options.Duration("gossip.wait", 5*time.Second, "seqd tail and node: how long to wait for gossip to show a replayer that holds --from (seq 1 for a node)"),
	}
	if withTier {
		fl = append(fl, altsrc.NewIntFlag(&cli.IntFlag{Name: "gossip.tier", Aliases: []string{"tier"}, Value: 1, EnvVars: []string{options.EnvName("gossip.tier")},
			Usage: "this replayer's tier: 1 follows the stream itself; 2 (or more) follows a lower-tier replayer's store over TCP (--upstream, or one gossip selects) and serves late joiners' rewinds so they leave tier 1 alone"}),
			options.SectionString("upstream", "upstream.addrs", "", "with --tier 2: the rewind addresses (host:port, comma-separated) of tier-1 replayers to follow, in turn when one dies (with --gossip: used when gossip shows none)"),
			options.Duration("upstream.failover-wait", tiered.DefaultUpstreamConfig().FailoverWait, "with --tier 2: stop with an error once no upstream replayer served the next seq for this long"))
	}
	return fl
}

// gossipOn reports whether the gossip keys ask for discovery.
func gossipOn(c *cli.Context) bool { return c.String("gossip") != "" || c.String("gossip.bind") != "" }

// startGossip starts this process's gossip Agent (role and meta from
// meta) from the gossip.* keys.
func startGossip(c *cli.Context, log *slog.Logger, meta tiered.MetaFunc) (*tiered.Agent, error) {
	return startGossipProbing(c, log, meta, 0, 0)
}

// startGossipProbing is startGossip with memberlist's failure detection
// probing every probe and declaring a silent member dead after deadAfter
// (0: the profile's): a bridge pair's takeover waits for both.
func startGossipProbing(c *cli.Context, log *slog.Logger, meta tiered.MetaFunc, probe, deadAfter time.Duration) (*tiered.Agent, error) {
	cfg := tiered.DefaultConfig()
	cfg.ProbeInterval, cfg.DeadAfter = probe, deadAfter
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
	if f := c.String("security.gossip-key-file"); f != "" {
		if cfg.Keys, err = tiered.ReadKeyFile(f); err != nil {
			return nil, options.KeyError("security.gossip-key-file", fmt.Sprintf("%q", f), err.Error())
		}
	}
	a, err := tiered.NewAgent(cfg, meta)
	if err != nil {
		return nil, fmt.Errorf("gossip: %w", err)
	}
	log.Info("gossip started", "name", a.Name(), "addr", a.Addr(), "seeds", cfg.Seeds, "joined", a.Joined())
	return a, nil
}

// startReplayerGossip is `seqd replayer --gossip`: nil when gossip is off.
func startReplayerGossip(c *cli.Context, ctx context.Context, log *slog.Logger, svc *replayer.Service, nak, rewind string) (*tiered.Agent, error) {
	if !gossipOn(c) {
		return nil, nil
	}
	tier := c.Int("gossip.tier")
	return startGossip(c, log, tiered.ReplayerMeta(ctx, svc, nak, rewind, uint8(tier)))
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
	if m, ok := tiered.WaitReplayer(c.Context, agent, q, c.Duration("gossip.wait"), log); ok {
		return agent, m.NAKAddr, m.RewindAddr, nil
	}
	return agent, "", "", nil
}
