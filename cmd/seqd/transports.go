package main

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/hybrid"
	"github.com/seqd/seqd/transport/tcp"
)

// Transports each role accepts: only the sequencer serves both at once.
var (
	serverTransports = []string{"udp", "tcp", "hybrid"}
	clientTransports = []string{"udp", "tcp"}
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
		strFlag("udp.interface", mc.Interface, "network interface for multicast"),
		strFlag("udp.stream-group", mc.StreamGroup, "multicast group:port of the event stream"),
		strFlag("udp.command-group", mc.CommandGroup, "multicast group:port the sequencer reads commands from"),
		intFlag("udp.ttl", mc.TTL, "multicast TTL (1 = this subnet)"),
		intFlag("udp.read-buffer-bytes", mc.ReadBufferBytes, "SO_RCVBUF to ask the kernel for"),
		intFlag("udp.write-buffer-bytes", mc.WriteBufferBytes, "SO_SNDBUF to ask the kernel for"),
		boolFlag("udp.gso", mc.GSO, "UDP segmentation offload on send (falls back by itself where the kernel refuses)"),
		boolFlag("udp.gro", mc.GRO, "UDP receive offload (falls back by itself where the kernel refuses)"),
		strFlag("tcp.addr", tcp.DefaultAddr, "address the sequencer listens on and nodes connect to; a cluster's: every member's stream address, comma-separated (nodes and standbys follow the primary among them)"),
		boolFlag("verbose", false, "debug logging"),
	}
	if server {
		flags = append(flags, strFlag("tcp.listen", "", "address the sequencer listens on when --tcp.addr lists a cluster's members (default: the entry of --tcp.addr at this member's place in --peers)"))
	}
	return flags
}

// clusterReconnectMax is the longest wait between two rounds of dials of a
// client given several sequencer addresses.
const clusterReconnectMax = 20 * time.Millisecond

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
		return strFlag("transport", "udp", "udp (multicast) | tcp | hybrid (udp and tcp at once)")
	}
	return strFlag("transport", "udp", "udp (multicast) | tcp")
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
	return mc
}

func tcpConfig(c *cli.Context, faults fault.Config, log *slog.Logger) tcp.Config {
	tc := tcp.DefaultConfig()
	tc.Addr = c.String("tcp.addr")
	if addrs := tcpAddrs(c); len(addrs) > 1 {
		// A cluster's members: a client tries them in turn, and the
		// sequencer listens on its own (--tcp.listen, clusterTCPListen).
		tc.Addr, tc.Addrs = addrs[0], addrs
		// Only the primary accepts, and a refused dial on a LAN costs a
		// round trip: look for the new one often, so that a failover
		// is not followed by a long backoff.
		tc.ReconnectMax = clusterReconnectMax
	}
	if a := c.String("tcp.listen"); a != "" && c.IsSet("tcp.listen") {
		tc.Addr = a
	}
	tc.Faults = faults
	tc.Logger = log
	return tc
}

// autoPacketBytes is the largest datagram the configured path carries
// without IP fragmentation: the interface MTU less the IPv4 and UDP
// headers (1472 on Ethernet, 65507 on loopback), or the largest wire frame
// over TCP. DESIGN.md: messages are batched up to the path MTU.
func autoPacketBytes(c *cli.Context) (int, error) {
	const maxUDPPayload = 65507
	if c.String("transport") == "tcp" {
		return maxUDPPayload, nil
	}
	name := c.String("udp.interface")
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, keyError("udp.interface", fmt.Sprintf("%q", name), fmt.Sprintf("a network interface of this host (%v)", err))
	}
	n := ifi.MTU - 28
	if n > maxUDPPayload || ifi.MTU <= 0 {
		n = maxUDPPayload
	}
	if n < 576-28 {
		return 0, keyError("udp.interface", fmt.Sprintf("%q", name), fmt.Sprintf("an interface with an MTU of at least 576 (it has %d)", ifi.MTU))
	}
	return n, nil
}

// packetBytes resolves a max-packet-bytes key: 0 means the path MTU.
func packetBytes(c *cli.Context, key string) (int, error) {
	if n := c.Int(key); n != 0 {
		return n, nil
	}
	return autoPacketBytes(c)
}

var transportKeys = map[string]string{
	"StreamGroup":      "udp.stream-group",
	"CommandGroup":     "udp.command-group",
	"Interface":        "udp.interface",
	"TTL":              "udp.ttl",
	"ReadBufferBytes":  "udp.read-buffer-bytes",
	"WriteBufferBytes": "udp.write-buffer-bytes",
	"Addr":             "tcp.addr",
}

// validateTransport checks the transport keys without opening anything.
func validateTransport(c *cli.Context, kind string) error {
	if kind == "udp" || kind == "hybrid" {
		if err := multicastConfig(c, fault.Config{}).Validate(); err != nil {
			return configError(err, transportKeys)
		}
	}
	if kind == "tcp" || kind == "hybrid" {
		if err := tcpConfig(c, fault.Config{}, nil).Validate(); err != nil {
			return configError(err, transportKeys)
		}
	}
	return nil
}

// openServer opens the sequencer's end of the configured transport and
// says what it got (groups, addresses, the buffers the kernel granted).
func openServer(c *cli.Context, log *slog.Logger) (transport.Server, error) {
	kind := c.String("transport")
	if err := oneOf("transport", kind, serverTransports...); err != nil {
		return nil, err
	}
	if err := validateTransport(c, kind); err != nil {
		return nil, err
	}
	faults, err := faultsFromEnv(log, "sequencer")
	if err != nil {
		return nil, err
	}
	var servers []transport.Server
	if kind == "udp" || kind == "hybrid" {
		s, err := multicast.NewServer(multicastConfig(c, faults))
		if err != nil {
			return nil, fmt.Errorf("udp: %w", err)
		}
		log.Info("udp multicast", "socket", s.SocketInfo())
		servers = append(servers, s)
	}
	if kind == "tcp" || kind == "hybrid" {
		s, err := tcp.NewServer(tcpConfig(c, faults, log))
		if err != nil {
			for _, o := range servers {
				o.Close()
			}
			return nil, err // "tcp: listen ...": the package names itself
		}
		log.Info("tcp listening", "addr", s.Addr().String())
		servers = append(servers, s)
	}
	if len(servers) == 1 {
		return servers[0], nil
	}
	return hybrid.NewServer(servers...), nil
}

// openClient opens a node's end of the configured transport.
func openClient(c *cli.Context, log *slog.Logger, role string) (transport.Client, error) {
	kind := c.String("transport")
	if kind == "hybrid" && role == "standby" {
		// A hybrid cluster's standbys follow over multicast, as nodes
		// near the sequencers do; remote nodes over TCP.
		kind = "udp"
	}
	if err := oneOf("transport", kind, clientTransports...); err != nil {
		return nil, err
	}
	if err := validateTransport(c, kind); err != nil {
		return nil, err
	}
	faults, err := faultsFromEnv(log, role)
	if err != nil {
		return nil, err
	}
	if kind == "udp" {
		mc := multicastConfig(c, faults)
		// Processes that share a fault seed must not drop the same frames.
		mc.FaultStream = uint64(os.Getpid())
		cl, err := multicast.NewClient(mc)
		if err != nil {
			return nil, fmt.Errorf("udp: %w", err)
		}
		log.Info("udp multicast", "socket", cl.SocketInfo())
		return cl, nil
	}
	tc := tcpConfig(c, faults, log)
	if role == "standby" {
		// A cluster member starts before any primary is elected, and
		// follows whichever member is primary (its own address
		// refuses while it is a standby).
		tc.DialTimeout = time.Second
		return tcp.Open(tc)
	}
	tc.DialTimeout = 5 * time.Second
	cl, err := dialTCP(tc)
	if err != nil {
		return nil, err // "tcp: dial ...": the package names itself
	}
	return cl, nil
}

// clusterDialWait is how long a node given a cluster's members waits for
// one to accept: none does during an election.
const clusterDialWait = 5 * time.Second

// dialTCP connects a node: to the one sequencer at once, or, given a
// cluster's members, to whichever is primary within clusterDialWait
// (every address refusing all that time fails with each one's error).
func dialTCP(tc tcp.Config) (*tcp.Client, error) {
	deadline := time.Now().Add(clusterDialWait)
	for {
		cl, err := tcp.Dial(tc)
		if err == nil || len(tc.Addrs) < 2 || time.Now().After(deadline) {
			return cl, err
		}
		time.Sleep(tc.ReconnectMin)
	}
}
