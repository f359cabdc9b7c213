package main

import (
	"log/slog"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/ops/options"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/open"
	"github.com/seqd/seqd/transport/tcp"
	"github.com/seqd/seqd/wire"
)

// cliReadBufferBytes is the SO_RCVBUF the CLI asks for by default. The
// sequencer's default flow window must stay below it (see
// sequencer.Config.FlowWindowPercent).
const cliReadBufferBytes = 32 << 20

// transportFlags are the keys that choose and shape the transport; the same
// keys serve the sequencer and the nodes, so one file configures both.
// server: the sequencer's flags (it alone accepts hybrid).
func transportFlags(server bool) []cli.Flag {
	mc := multicast.DefaultConfig()
	// A process that is descheduled for a few milliseconds at a million
	// messages a second needs deep socket buffers not to drop.
	mc.ReadBufferBytes = cliReadBufferBytes
	flags := []cli.Flag{
		transportFlag(server),
		options.String("udp.interface", mc.Interface, "network interface for multicast"),
		options.String("udp.stream-group", mc.StreamGroup, "multicast group:port of the event stream"),
		options.String("udp.command-group", mc.CommandGroup, "multicast group:port the sequencer reads commands from"),
		options.Int("udp.ttl", mc.TTL, "multicast TTL (1 = this subnet)"),
		options.Int("udp.read-buffer-bytes", mc.ReadBufferBytes, "SO_RCVBUF to ask the kernel for"),
		options.Int("udp.write-buffer-bytes", mc.WriteBufferBytes, "SO_SNDBUF to ask the kernel for"),
		options.Bool("udp.gso", mc.GSO, "UDP segmentation offload on send (falls back by itself where the kernel refuses)"),
		options.Bool("udp.gro", mc.GRO, "UDP receive offload (falls back by itself where the kernel refuses)"),
		options.String("tcp.addr", tcp.DefaultAddr, "address the sequencer listens on and nodes connect to; a cluster's: every member's stream address, comma-separated (nodes and standbys follow the primary among them)"),
		options.Bool("verbose", false, "debug logging"),
	}
	flags = append(flags, securityFlags()...)
	flags = append(flags, options.LogFlags()...)
	flags = append(flags, tlsFlags()...)
	if server {
		flags = append(flags, options.String("tcp.listen", "", "address the sequencer listens on when --tcp.addr lists a cluster's members (default: the entry of --tcp.addr at this member's place in --peers)"))
	}
	return flags
}

// tcpAddrs is the list --tcp.addr holds (one address, or a cluster's
// members).
func tcpAddrs(c *cli.Context) []string {
	var out []string
	for _, a := range strings.Split(c.String("tcp.addr"), ",") {
		if a = strings.TrimSpace(a); a != "" {
			out = append(out, a)
		}
	}
	if len(out) == 0 {
		return []string{c.String("tcp.addr")}
	}
	return out
}

func transportFlag(server bool) cli.Flag {
	if server {
		return options.String("transport", "udp", "udp (multicast) | tcp | hybrid (udp and tcp at once)")
	}
	return options.String("transport", "udp", "udp (multicast) | tcp")
}

func multicastConfig(c *cli.Context, faults fault.Config) multicast.Config {
	mc := multicast.DefaultConfig()
	mc.Interface = c.String("udp.interface")
	mc.StreamGroup = c.String("udp.stream-group")
	mc.CommandGroup = c.String("udp.command-group")
	mc.TTL = c.Int("udp.ttl")
	mc.ReadBufferBytes = c.Int("udp.read-buffer-bytes")
	mc.WriteBufferBytes = c.Int("udp.write-buffer-bytes")
	mc.GSO = c.Bool("udp.gso")
	mc.GRO = c.Bool("udp.gro")
	mc.Faults = faults
	mc.Auth = processAuth(c)
	return mc
}

func tcpConfig(c *cli.Context, faults fault.Config, log *slog.Logger) tcp.Config {
	tc := tcp.DefaultConfig()
	tc.Addr = c.String("tcp.addr")
	if addrs := tcpAddrs(c); len(addrs) > 1 {
		// A cluster's members: a client tries them in turn, and the
		// sequencer listens on its own (--tcp.listen, clusterTCPListen).
		tc.Addr, tc.Addrs = addrs[0], addrs
		tc.ReconnectMax = open.ClusterReconnectMax
	}
	if a := c.String("tcp.listen"); a != "" && c.IsSet("tcp.listen") {
		tc.Addr = a
	}
	tc.Faults = faults
	tc.Logger = log
	tc.Auth = processAuth(c)
	// An identity that fails to load is reported by validateTransport,
	// openServer and openClient (tlsIdentity), before anything opens.
	tc.TLS, _ = tlsIdentity(c)
	return tc
}

// transportConfig is the transport the flags configure; faults and the
// logger are the caller's.
func transportConfig(c *cli.Context, faults fault.Config, log *slog.Logger) open.Config {
	return open.Config{
		Transport: c.String("transport"),
		Multicast: multicastConfig(c, faults),
		TCP:       tcpConfig(c, faults, log),
		Faults:    faults,
		Logger:    log,
	}
}

// autoPacketBytes is the largest datagram the configured path carries
// (open.PacketBytes), reported on the flags.
func autoPacketBytes(c *cli.Context) (int, error) {
	n, err := open.PacketBytes(transportConfig(c, fault.Config{}, nil))
	return n, options.Keyed(err, transportKeys)
}

// packetBytes resolves a max-packet-bytes key: 0 means the path MTU.
// With authentication on, the signed frame's trailer comes off it.
func packetBytes(c *cli.Context, key string) (int, error) {
	n := c.Int(key)
	if n == 0 {
		var err error
		if n, err = autoPacketBytes(c); err != nil {
			return 0, err
		}
	}
	if processAuth(c) != nil {
		n -= wire.AuthTrailerBytes
	}
	return n, nil
}

var transportKeys = map[string]string{
	"Transport":        "transport",
	"StreamGroup":      "udp.stream-group",
	"CommandGroup":     "udp.command-group",
	"Interface":        "udp.interface",
	"TTL":              "udp.ttl",
	"ReadBufferBytes":  "udp.read-buffer-bytes",
	"WriteBufferBytes": "udp.write-buffer-bytes",
	"Addr":             "tcp.addr",
}

// validateTransport checks the transport keys without opening anything:
// a server's (the sequencer's) or a client's.
func validateTransport(c *cli.Context, server bool) error {
	if _, err := tlsIdentity(c); err != nil {
		return err
	}
	cfg := transportConfig(c, fault.Config{}, nil)
	if server {
		return options.Keyed(cfg.ValidateServer(), transportKeys)
	}
	return options.Keyed(cfg.ValidateClient(), transportKeys)
}

// openServer opens the sequencer's end of the configured transport.
func openServer(c *cli.Context, log *slog.Logger) (transport.Server, error) {
	if _, err := tlsIdentity(c); err != nil {
		return nil, err
	}
	cfg := transportConfig(c, fault.Config{}, log)
	if err := cfg.ValidateServer(); err != nil {
		return nil, options.Keyed(err, transportKeys)
	}
	faults, err := options.FaultsFromEnv(log, "sequencer")
	if err != nil {
		return nil, err
	}
	return open.Server(transportConfig(c, faults, log))
}

// openClient opens a node's end of the configured transport (a cluster
// member's for role "standby").
func openClient(c *cli.Context, log *slog.Logger, role string) (transport.Client, error) {
	if _, err := tlsIdentity(c); err != nil {
		return nil, err
	}
	cfg := transportConfig(c, fault.Config{}, log)
	cfg.Standby = role == "standby"
	if err := cfg.ValidateClient(); err != nil {
		return nil, options.Keyed(err, transportKeys)
	}
	faults, err := options.FaultsFromEnv(log, role)
	if err != nil {
		return nil, err
	}
	cfg = transportConfig(c, faults, log)
	cfg.Standby = role == "standby"
	return open.Client(cfg)
}
