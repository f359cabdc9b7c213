package open

import (
	"fmt"
	"log/slog"
	"net"
	"os"
	"strings"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/multicast"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/hybrid"
	"github.com/seqd/seqd/transport/tcp"
)

// The transport kinds, by the name a configuration gives them.
const (
	UDP    = "udp"    // reliable UDP multicast (package multicast)
	TCP    = "tcp"    // TCP fan-out (package transport/tcp)
	Hybrid = "hybrid" // a server on udp and tcp at once (package transport/hybrid)
)

// Kinds each side accepts: only a sequencer serves both at once.
var (
	ServerKinds = []string{UDP, TCP, Hybrid}
	ClientKinds = []string{UDP, TCP}
)

// Config says which transport to open and how to shape it. Only the
// settings of the chosen kind are used (both for Hybrid).
type Config struct {
	// Transport is the kind: UDP, TCP or (a server only) Hybrid.
	Transport string
	// Multicast shapes the UDP kind. Its Faults are replaced by Faults;
	// a client's zero FaultStream by the process id, so that processes
	// that share a fault seed do not drop the same frames.
	Multicast multicast.Config
	// TCP shapes the TCP kind. Its Faults and Logger are replaced by
	// Faults and Logger.
	TCP tcp.Config
	// Faults are injected into every endpoint opened (a drill's).
	Faults fault.Config
	// Logger hears what was opened (groups, addresses, the buffers the
	// kernel granted). nil logs nowhere.
	Logger *slog.Logger
	// Standby says that the client is a sequencer cluster member's: it
	// starts before any primary is elected, so over TCP it does not wait
	// for a connection (it follows whichever member becomes primary), and
	// a Hybrid cluster's standbys follow over multicast, as nodes near the
	// sequencers do.
	Standby bool
}

// ValidateServer checks the configuration of a server end without
// opening anything.
func (c Config) ValidateServer() error {
	return c.validate(c.Transport, ServerKinds)
}

// ValidateClient checks the configuration of a client end without
// opening anything.
func (c Config) ValidateClient() error {
	return c.validate(c.clientKind(), ClientKinds)
}

func (c Config) validate(kind string, allowed []string) error {
	if !oneOf(kind, allowed) {
		return config.New(ErrConfig, "Transport", kind, "one of: "+strings.Join(allowed, ", "))
	}
	if kind == UDP || kind == Hybrid {
		if err := c.Multicast.Validate(); err != nil {
			return err
		}
	}
	if kind == TCP || kind == Hybrid {
		if err := c.TCP.Validate(); err != nil {
			return err
		}
	}
	return nil
}

func oneOf(v string, allowed []string) bool {
	for _, a := range allowed {
		if v == a {
			return true
		}
	}
	return false
}

func (c Config) clientKind() string {
	if c.Transport == Hybrid && c.Standby {
		return UDP
	}
	return c.Transport
}

func (c Config) logger() *slog.Logger {
	if c.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return c.Logger
}

func (c Config) multicastConfig() multicast.Config {
	mc := c.Multicast
	mc.Faults = c.Faults
	return mc
}

func (c Config) tcpConfig() tcp.Config {
	tc := c.TCP
	tc.Faults = c.Faults
	tc.Logger = c.Logger
	return tc
}

// Server opens the sequencer's end of the configured transport and logs
// what it got.
func Server(cfg Config) (transport.Server, error) {
	if err := cfg.ValidateServer(); err != nil {
		return nil, err
	}
	log := cfg.logger()
	kind := cfg.Transport
	var servers []transport.Server
	if kind == UDP || kind == Hybrid {
		s, err := multicast.NewServer(cfg.multicastConfig())
		if err != nil {
			return nil, fmt.Errorf("udp: %w", err)
		}
		log.Info("udp multicast", "socket", s.SocketInfo())
		servers = append(servers, s)
	}
	if kind == TCP || kind == Hybrid {
		s, err := tcp.NewServer(cfg.tcpConfig())
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

// Client opens a node's (or, with Standby, a cluster member's) end of the
// configured transport.
func Client(cfg Config) (transport.Client, error) {
	if err := cfg.ValidateClient(); err != nil {
		return nil, err
	}
	if cfg.clientKind() == UDP {
		mc := cfg.multicastConfig()
		if mc.FaultStream == 0 {
			mc.FaultStream = uint64(os.Getpid())
		}
		cl, err := multicast.NewClient(mc)
		if err != nil {
			return nil, fmt.Errorf("udp: %w", err)
		}
		cfg.logger().Info("udp multicast", "socket", cl.SocketInfo())
		return cl, nil
	}
	tc := cfg.tcpConfig()
	if cfg.Standby {
		// A cluster member starts before any primary is elected, and
		// follows whichever member is primary (its own address
		// refuses while it is a standby).
		tc.DialTimeout = time.Second
		return tcp.Open(tc)
	}
	tc.DialTimeout = 5 * time.Second
	cl, err := DialTCP(tc)
	if err != nil {
		return nil, err // "tcp: dial ...": the package names itself
	}
	return cl, nil
}

// ClusterDialWait is how long a node given a cluster's members waits for
// one to accept: none does during an election.
const ClusterDialWait = 5 * time.Second

// ClusterReconnectMax is the longest wait between two rounds of dials of a
// client given several sequencer addresses: only the primary accepts, and
// a refused dial on a LAN costs a round trip, so a client looks for the
// new one often, not after a long backoff.
const ClusterReconnectMax = 20 * time.Millisecond

// DialTCP connects a node: to the one sequencer at once, or, given a
// cluster's members (tc.Addrs), to whichever is primary within
// ClusterDialWait (every address refusing all that time fails with each
// one's error).
func DialTCP(tc tcp.Config) (*tcp.Client, error) {
	deadline := time.Now().Add(ClusterDialWait)
	for {
		cl, err := tcp.Dial(tc)
		if err == nil || len(tc.Addrs) < 2 || time.Now().After(deadline) {
			return cl, err
		}
		time.Sleep(tc.ReconnectMin)
	}
}

// MaxUDPPayload is the largest UDP datagram over IPv4.
const MaxUDPPayload = 65507

// PacketBytes is the largest datagram the configured path carries without
// IP fragmentation: the interface MTU less the IPv4 and UDP headers (1472
// on Ethernet, 65507 on loopback), or the largest wire frame over TCP.
// DESIGN.md: messages are batched up to the path MTU.
func PacketBytes(cfg Config) (int, error) {
	if cfg.Transport == TCP {
		return MaxUDPPayload, nil
	}
	name := cfg.Multicast.Interface
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return 0, &config.Error{Field: "Interface", Value: fmt.Sprintf("%q", name),
			Allowed: fmt.Sprintf("a network interface of this host (%v)", err), Err: ErrConfig}
	}
	n := ifi.MTU - 28
	if n > MaxUDPPayload || ifi.MTU <= 0 {
		n = MaxUDPPayload
	}
	if n < 576-28 {
		return 0, &config.Error{Field: "Interface", Value: fmt.Sprintf("%q", name),
			Allowed: fmt.Sprintf("an interface with an MTU of at least 576 (it has %d)", ifi.MTU), Err: ErrConfig}
	}
	return n, nil
}
