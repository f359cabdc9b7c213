package main

import (
	"fmt"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/ops/adminnode"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/tiered"
)

func adminNodeCommand() *cli.Command {
	def := adminnode.DefaultConfig()
	flags, before := options.WithConfig(append([]cli.Flag{
		options.String("http-addr", def.HTTPAddr, "host:port of the status page (/ui/), GET /v1/deployment and POST /v1/command (keep it on loopback or a trusted network)"),
		options.String("console-addr", def.ConsoleAddr, "host:port of the line console (telnet, nc); \"\" for none"),
		options.String("members", "", "admin addresses (host:port, comma-separated) of sequencer members to ask besides those gossip shows (members started without --gossip)"),
		options.Duration("refresh", def.Page.RefreshInterval, "how often the page is brought up to date"),
		options.Bool("verbose", false, "debug logging"),
		options.String("token", "", "the members' admin token (needed for members off loopback)"),
	}, append(memberGossipFlags(), tlsFlags()...)...))
	return &cli.Command{
		Name:  "admin-node",
		Usage: "serve the console and the status page for a whole deployment, found by gossip",
		Description: `Joins gossip (--gossip SEEDS, or --gossip.bind to be the seed the others
name), finds the sequencer members (started with --gossip: they announce
their admin endpoints), the replayers and every other process that
gossips, and serves:
  http://HTTP-ADDR/ui/            the live status page of the deployment
  GET  http://HTTP-ADDR/v1/deployment   the same as JSON
  POST http://HTTP-ADDR/v1/command      a console line as the body
  CONSOLE-ADDR                    the line console: help, list, status,
                                  members, replayers, pairs, elections,
                                  transfer-primary [ID]

Example:
  seqd admin-node --gossip.bind 127.0.0.1:7946
  seqd sequencer --cluster --id 1 ... --gossip 127.0.0.1:7946
  nc 127.0.0.1 7402     (then: status)

Prints "admin-node: ready http=... console=... gossip=..." once serving.
Exit status: 0 when SIGTERM or SIGINT stopped it; 1 on any error.`,
		Flags:  flags,
		Before: before,
		Action: runAdminNode,
	}
}

func runAdminNode(c *cli.Context) error {
	log := options.NewLogger(c)
	cfg := adminnode.DefaultConfig()
	cfg.HTTPAddr, cfg.ConsoleAddr, cfg.Logger = c.String("http-addr"), c.String("console-addr"), log
	cfg.Page.RefreshInterval = c.Duration("refresh")
	cfg.Page.GatherTimeout = min(cfg.Page.GatherTimeout, cfg.Page.RefreshInterval)
	if err := cfg.Validate(); err != nil {
		return options.Keyed(err, map[string]string{"HTTPAddr": "http-addr", "RefreshInterval": "refresh"})
	}
	var static []string
	for _, a := range strings.Split(c.String("members"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			static = append(static, a)
		}
	}
	var dir adminnode.Directory
	gossip := ""
	if gossipOn(c) {
		agent, err := startGossip(c, log, func() tiered.Meta { return tiered.Meta{Role: tiered.RoleNode} })
		if err != nil {
			return err
		}
		defer agent.Close()
		dir, gossip = agent, agent.Addr()
	} else if len(static) == 0 {
		return options.KeyError("gossip", `""`, "gossip seeds (or --gossip.bind), or --members: the admin node needs one way to find the deployment")
	}
	// The members are asked with --token and, with the security.tls-*
	// keys, over TLS with that certificate (admin-*: an operator's, for
	// transfer-primary).
	cl, err := adminClient(c)
	if err != nil {
		return err
	}
	srv, err := adminnode.NewServer(cfg, adminnode.NewDeployment(dir, static).WithClient(cl))
	if err != nil {
		return options.Keyed(err, map[string]string{"HTTPAddr": "http-addr"})
	}
	fmt.Printf("admin-node: ready http=%s console=%s gossip=%s\n", srv.HTTPAddr(), srv.ConsoleAddr(), gossip)
	return srv.Serve(c.Context)
}
