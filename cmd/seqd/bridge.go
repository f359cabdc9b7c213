package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"github.com/urfave/cli/v2/altsrc"

	"github.com/seqd/seqd/bridge"
	"github.com/seqd/seqd/cmd/seqd/internal/stopsignal"
	"github.com/seqd/seqd/ops"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/test/drill"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport/fault"
)

// `seqd bridge`: flags into a bridge.Config; package bridge does the work.

func bridgeCommand() *cli.Command {
	d := bridge.DefaultConfig()
	flags, before := options.WithConfig(append(append(append(transportFlags(false), adminServeFlags(true)...),
		options.String("role", "", "send (follow this site's stream and send it over the channels) | receive (merge the channels and republish on this site)"),
		options.String("site", "", "this end's site name (1..32 bytes)"),
		options.String("origin", "", "send: the site whose sequencer published the followed stream (default: --site; set it when the stream came by bridge)"),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "bridge.tcp", Aliases: []string{"tcp"}, EnvVars: []string{options.EnvName("tcp"), options.EnvName("bridge.tcp")},
			Usage: "a TCP channel (repeat for several): send: an address to serve it on; receive: the sending end's address"}),
		altsrc.NewStringSliceFlag(&cli.StringSliceFlag{Name: "bridge.udp", Aliases: []string{"udp"}, EnvVars: []string{options.EnvName("udp"), options.EnvName("bridge.udp")},
			Usage: "a UDP channel (repeat for several): send: the receiving end's ip:port to send to; receive: the local ip:port to read it on"}),
		options.String("udp-bind", "", "send: the local address of the UDP flows (default: any port)"),
		options.String("dir", "", "the end's store directory (one session)"),
		options.String("nak-addr", "127.0.0.1:0", "send: where this end answers its site's NAKs from its store, as a replayer"),
		options.String("rewind-addr", "", "receive: TCP address to serve rewinds of the store to this site's nodes (empty: none)"),
		replayerFlag(),
		options.Bool("from-live", false, "send: an empty store starts at the live tail instead of seq 1"),
		options.String("profile", "lan", "lan | wan: the link's timing (hole repair after "+d.GapTimeout.String()+" on lan, "+bridge.WANConfig().GapTimeout.String()+" on wan)"),
		options.String("faults", "", "seeded faults on every channel's receiving side, e.g. loss=0.05,seed=7 (tests, drills)"),
		options.String("faults-on", "all", "the channels --faults apply to: all | udp | tcp"),
		options.Duration("stats-interval", 0, "print a stats line per channel this often (0: only at the end)"),
		options.String("pair", "", "run as one of a pair of ends (same --role and --site) that stand in for each other, found by gossip (--gossip or --gossip.bind): the first is active, the other a warm standby (its store current, its channels off) that takes over when gossip loses the active one"),
		options.Duration("pair.probe-interval", 30*time.Millisecond, "with --pair: gossip's failure-detection probe interval (30 ms and dead-after 90 ms: the far site resumes within 240 ms of a bridge end's death in seqd drill bridge --pair)"),
		options.Duration("pair.dead-after", 90*time.Millisecond, "with --pair: how long the active end stays suspect after it stopped answering probes before the standby takes over (takeover = a probe interval or two + this; too short on a loaded host makes both ends active, which the far end tolerates: it drops copies by seq)"),
	), memberGossipFlags()...))
	return &cli.Command{
		Name:  "bridge",
		Usage: "one end of a link carrying a stream to another site (and its commands back) over redundant TCP and UDP channels",
		Description: `A link is two processes, one per site (docs/bridge.md). The sending end
follows its site's stream into its store (--dir) and sends it on every
channel: --tcp addresses serve it as a rewind with follow, --udp addresses
get one datagram per packet. The receiving end reads every channel, takes
the first arrival of each packet, persists the stream and republishes it on
its site's stream group (--udp.stream-group, or --transport tcp) with the
origin's session, epochs, seqs, timestamps and stable; its site's nodes NAK
it and send commands on the site's command group as to a sequencer, and
those commands go back over the UDP channels (or, with none heard lately,
the TCP channels) to the origin's command group.

Prints "bridge: ready ..." once serving and "bridge: stopped ..." when it
stops. Exit status: 0 on SIGTERM or SIGINT; 1 on any error (a stream that
would go back to its origin site is refused).`,
		Flags:  flags,
		Before: before,
		Action: runBridge,
	}
}

func bridgeConfig(c *cli.Context, log *slog.Logger) (bridge.Config, error) {
	cfg := bridge.DefaultConfig()
	switch p := c.String("profile"); p {
	case "lan":
	case "wan":
		cfg = bridge.WANConfig()
	default:
		return cfg, options.OneOf("profile", p, "lan", "wan")
	}
	role, err := bridge.ParseRole(c.String("role"))
	if err != nil {
		return cfg, options.OneOf("role", c.String("role"), "send", "receive")
	}
	cfg.Role, cfg.Site, cfg.Origin = role, c.String("site"), c.String("origin")
	cfg.TCP, cfg.UDP, cfg.UDPBind = splitList(c.StringSlice("tcp")), splitList(c.StringSlice("udp")), c.String("udp-bind")
	cfg.RewindAddr = c.String("rewind-addr")
	cfg.Service.Dir = c.String("dir")
	cfg.Service.FromLive = c.Bool("from-live")
	cfg.Service.Sources = c.StringSlice("replayer")
	cfg.Logger = log
	if cfg.Faults, err = fault.Parse(c.String("faults")); err != nil {
		return cfg, options.KeyError("faults", fmt.Sprintf("%q", c.String("faults")), err.Error())
	}
	cfg.FaultsOn = c.String("faults-on")
	if cfg.Standby = c.String("pair") != ""; cfg.Standby && !gossipOn(c) {
		return cfg, options.KeyError("pair", fmt.Sprintf("%q", c.String("pair")), "with --gossip SEEDS or --gossip.bind: the pair's ends find each other by gossip")
	}
	// The security.tls-* identity (bridge-SITE): mutual TLS on the TCP
	// channels and the receiving end's rewind port as well as on the
	// site's TCP stream.
	if cfg.TLS, err = tlsIdentity(c); err != nil {
		return cfg, err
	}
	return cfg, options.Keyed(cfg.Validate(), map[string]string{
		"FaultsOn": "faults-on", "Role": "role", "Site": "site", "Origin": "origin", "TCP": "tcp", "UDP": "udp", "Service.Dir": "dir",
	})
}

func splitList(v []string) []string {
	var out []string
	for _, s := range v {
		for _, a := range strings.Split(s, ",") {
			if a = strings.TrimSpace(a); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

func runBridge(c *cli.Context) error {
	if c.NArg() > 0 {
		return strayArguments("bridge", c.Args().Slice())
	}
	log := options.NewLogger(c)
	cfg, err := bridgeConfig(c, log)
	if err != nil {
		return err
	}
	ctx := c.Context
	every := c.Duration("stats-interval")
	if cfg.Role == bridge.Send {
		if err := validateTransport(c, false); err != nil {
			return err
		}
		follow, err := openClient(c, log, "bridge")
		if err != nil {
			return err
		}
		defer follow.Close()
		nak, err := openNakServer(c, c.String("nak-addr"))
		if err != nil {
			return err
		}
		defer nak.Close()
		s, err := bridge.NewSendEnd(cfg, follow, nak)
		if err != nil {
			return err
		}
		stopPair, err := joinPair(c, log, "send", s)
		if err != nil {
			return err
		}
		defer stopPair()
		fmt.Printf("bridge: ready role=send site=%s origin=%s tcp=%s udp=%s udp_local=%s\n", cfg.Site, orDefault(cfg.Origin, cfg.Site),
			strings.Join(s.TCPAddrs(), ","), strings.Join(cfg.UDP, ","), s.UDPAddr())
		go printEvery(ctx, every, func() { fmt.Println(bridge.FormatSendStats(s.Stats())) })
		asv, err := serveAdmin(c, ops.BridgeSurface(adminAuth(c, log), "send", cfg.Site, orDefault(cfg.Origin, cfg.Site), nil,
			func() ops.BridgeSnap { st := s.Stats(); return ops.BridgeSnap{Send: &st} }), log)
		if err != nil {
			return err
		}
		if asv != nil {
			defer asv.Close()
		}
		err = s.Run(ctx)
		fmt.Println(bridge.FormatSendStats(s.Stats()))
		return stopped(err)
	}
	if err := validateTransport(c, true); err != nil {
		return err
	}
	site, err := openServer(c, log)
	if err != nil {
		return err
	}
	defer site.Close()
	r, err := bridge.NewReceiveEnd(cfg, site)
	if err != nil {
		return err
	}
	stopPair, err := joinPair(c, log, "receive", r)
	if err != nil {
		return err
	}
	defer stopPair()
	fmt.Printf("bridge: ready role=receive site=%s tcp=%s udp=%s rewind=%s\n", cfg.Site, strings.Join(cfg.TCP, ","), strings.Join(r.UDPAddrs(), ","), cfg.RewindAddr)
	go printEvery(ctx, every, func() { fmt.Println(bridge.FormatReceiveStats(r.Stats())) })
	asv, err := serveAdmin(c, ops.BridgeSurface(adminAuth(c, log), "receive", cfg.Site, "", r.Stats().Names,
		func() ops.BridgeSnap { st := r.Stats(); return ops.BridgeSnap{Receive: &st} }), log)
	if err != nil {
		return err
	}
	if asv != nil {
		defer asv.Close()
	}
	err = r.Run(ctx)
	fmt.Println(bridge.FormatReceiveStats(r.Stats()))
	return stopped(err)
}

// pairEnd is a bridge end of a pair: active, or a standby to activate.
type pairEnd interface {
	Active() bool
	Activate()
}

// stepsBack is a pairEnd that can be made a standby again (a receiving
// end; a sending end cannot yet: it would have to close the listeners
// its far ends dialled and bind them again at a later takeover, and two
// active sending ends cost only bandwidth, the far end dropping copies
// by seq and the sequencer the commands' copies).
type stepsBack interface {
	Deactivate()
}

// joinPair is --pair: gossip announces this end (role bridge, the pair,
// active or not) and a watcher activates it once no live member of the
// pair is active and it is the first standby by name
// (tiered.PairTakeover); an active receiving end that sees another active
// end of the pair first by name steps back to standby
// (tiered.PairStepBack: after a false death both ends are active).
// Without --pair it does nothing. stop ends the watcher and leaves
// gossip.
func joinPair(c *cli.Context, log *slog.Logger, role string, end pairEnd) (stop func(), err error) {
	pair := c.String("pair")
	if pair == "" {
		return func() {}, nil
	}
	probe := c.Duration("pair.probe-interval")
	agent, err := startGossipProbing(c, log, func() tiered.Meta {
		return tiered.Meta{Role: tiered.RoleBridge, Pair: pair, Active: end.Active()}
	}, probe, c.Duration("pair.dead-after"))
	if err != nil {
		return nil, err
	}
	back, canStepBack := end.(stepsBack)
	ctx, cancel := context.WithCancel(c.Context)
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Time to hear of an active end before deciding there is none.
		settle := time.Now().Add(max(5*probe, 300*time.Millisecond))
		t := time.NewTicker(20 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if time.Now().Before(settle) {
				continue
			}
			ms := agent.Members()
			switch {
			case !end.Active() && tiered.PairTakeover(ms, pair, agent.Name()):
				end.Activate()
				log.Warn("bridge: no active end of the pair in gossip: this end takes over", "pair", pair, "role", role, "name", agent.Name())
				fmt.Printf("bridge: active pair=%s role=%s\n", pair, role)
				// Announced once the end serves (a sending end binds its
				// listeners first).
				for !end.Active() && ctx.Err() == nil {
					time.Sleep(time.Millisecond)
				}
				agent.Refresh()
				if !canStepBack {
					return // nothing more to watch for a sending end
				}
			case canStepBack && end.Active() && tiered.PairStepBack(ms, pair, agent.Name()):
				back.Deactivate()
				log.Warn("bridge: another end of the pair is active and first by name: this end steps back", "pair", pair, "role", role, "name", agent.Name())
				fmt.Printf("bridge: standby pair=%s role=%s\n", pair, role)
				agent.Refresh()
			case !canStepBack && end.Active():
				return // a sending end started active
			}
		}
	}()
	log.Info("bridge: pair", "pair", pair, "role", role, "name", agent.Name(), "gossip", agent.Addr())
	return func() { cancel(); <-done; agent.Close() }, nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func printEvery(ctx context.Context, every time.Duration, f func()) {
	if every <= 0 {
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			f()
		}
	}
}

// stopped is the exit of a bridge end: nil when a signal ended it.
func stopped(err error) error {
	if errors.Is(err, context.Canceled) {
		fmt.Printf("bridge: stopped signal=%v\n", stopsignal.Received())
		return nil
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "bridge: stopped err=%q\n", err.Error())
	}
	return err
}

// drillBridgeCommand is `seqd drill bridge`: flags into a
// drill.BridgeConfig (test/drill runs it).
func drillBridgeCommand() *cli.Command {
	d := drill.DefaultBridgeConfig()
	return &cli.Command{
		Name:  "bridge",
		Usage: "two sites joined by a bridge pair; cut its TCP and UDP channels round after round and check the far site's stream",
		Description: `Starts, from this binary, on loopback: site A (a sequencer, or a group of
three with --sequencers 3, a sending and a checking drill node) and site B
(a sending drill node whose commands cross the bridge, and a checking
node), each site on its own multicast groups, joined by seqd bridge
--role send and --role receive over one TCP and one UDP channel, both
through relays of the drill. Each round, in turn, cuts the TCP channel,
the UDP one, both, for --cut; SIGKILLs the receiving end, then the sending
end, and starts it again on its store after --cut; with three sequencers,
SIGKILLs A's primary. It times how long after the heal (the restart, the
kill) B's checker holds what A's held. At the end every node must have delivered the same stream with
each acked command once. Ends with
  drill bridge rounds=N p50_ms=A max_ms=B lost=0 dup=0 diverged=0
exiting 1 on any violation or when a child dies on its own.`,
		Flags: []cli.Flag{
			&cli.IntFlag{Name: "rounds", Value: d.Rounds, Usage: "channel faults"},
			&cli.IntFlag{Name: "rate", Value: d.RatePerSecond, Usage: "commands per second of each of the two sending nodes"},
			&cli.DurationFlag{Name: "cut", Value: d.Cut, Usage: "how long each cut lasts"},
			&cli.DurationFlag{Name: "pause", Value: d.Pause, Usage: "load between two rounds"},
			&cli.IntFlag{Name: "sequencers", Value: d.Sequencers, Usage: "site A's sequencers: 1 or 3 (a group; adds a SIGKILL of its primary to the rounds)"},
			&cli.StringFlag{Name: "faults", Usage: "seeded faults on every channel at the receiving end, e.g. loss=0.05,seed=7"},
			&cli.BoolFlag{Name: "redundant", Usage: "two sending and two receiving ends (each receiving end follows both sending ends); a kill round kills one of a pair"},
			&cli.BoolFlag{Name: "pair", Usage: "two ends per site as a --pair (found by gossip): one active, one warm standby; a kill round SIGKILLs the active end and the standby takes over"},
			&cli.Uint64Flag{Name: "seed", Usage: "seed of the groups and ports (0: from the clock; printed)"},
			&cli.BoolFlag{Name: "keep", Usage: "keep the directories and logs (printed at the end)"},
		},
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return strayArguments("drill bridge", c.Args().Slice())
			}
			cfg := drill.DefaultBridgeConfig()
			cfg.Rounds, cfg.RatePerSecond, cfg.Cut, cfg.Pause = c.Int("rounds"), c.Int("rate"), c.Duration("cut"), c.Duration("pause")
			cfg.Sequencers, cfg.Faults, cfg.Seed, cfg.Keep = c.Int("sequencers"), c.String("faults"), c.Uint64("seed"), c.Bool("keep")
			cfg.Redundant, cfg.Pair = c.Bool("redundant"), c.Bool("pair")
			return drill.RunBridge(c.Context, cfg)
		},
	}
}
