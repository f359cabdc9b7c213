package multicast

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// Config configures a Server or a Client. Both ends of a session must agree
// on Interface, StreamGroup and CommandGroup.
type Config struct {
	// Interface is the network interface the groups are joined and sent on
	// ("lo" for one host, e.g. "eth0" for a LAN).
	Interface string
	// StreamGroup is the event stream's group, host:port (sequencer -> all).
	StreamGroup string
	// CommandGroup is the group nodes send commands and NAKs to; every
	// sequencer joins it, so a new primary hears them after a failover.
	CommandGroup string
	// TTL is the multicast time-to-live: 1 keeps packets on the local subnet.
	TTL int
	// Loopback delivers this host's multicast to this host's sockets; it
	// must be on when a sequencer and nodes share a host.
	Loopback bool
	// ReadBufferBytes and WriteBufferBytes are the SO_RCVBUF and SO_SNDBUF
	// asked for; the kernel may grant less (see Granted).
	ReadBufferBytes  int
	WriteBufferBytes int
	// BatchSize is the number of datagrams moved per sendmmsg/recvmmsg call.
	BatchSize int
	// MaxDatagramBytes is the largest frame carried; every receive slot is
	// this big, so a receive socket holds BatchSize*MaxDatagramBytes bytes
	// of (lazily paged) buffer.
	MaxDatagramBytes int
	// GSO sends runs of equal-size frames to a group as one message that
	// the kernel (or the NIC) cuts into the same datagrams (UDP_SEGMENT):
	// the wire is unchanged, the sender makes one syscall and one trip
	// down the stack per run instead of one per datagram. Turned off at
	// run time, with nothing lost, if the kernel or device refuses it.
	GSO bool
	// GRO lets the kernel hand a receive socket several datagrams of one
	// sender at once (UDP_GRO); they are split back into frames before the
	// handler sees them. Receive slots grow to 64 KiB to hold a coalesced
	// buffer. Ignored if the kernel refuses it.
	GRO bool
	// Faults injects seeded loss, duplication and reordering into every
	// received datagram when enabled (tests and chaos drills).
	Faults fault.Config
	// FaultStream distinguishes the fault decisions of endpoints that share
	// Faults.Seed (give each node its own, e.g. its instance id).
	FaultStream uint64
	// MaxPeers bounds the server's table of senders it can answer (SendTo);
	// when it is full, the sender heard from least recently is forgotten
	// to make room for a new one. 0 means 4096. Server only.
	MaxPeers int
	// Logger receives the rate-limited warnings of the endpoint (datagrams
	// the kernel refused). nil means slog.Default().
	Logger *slog.Logger
	// Auth, when set, signs every datagram the endpoint sends and
	// verifies every one it receives (issue 16, wire.Auth): a datagram
	// that fails (unsigned, an unknown key, a key that may not sign its
	// kind, a bad tag) is counted in Counters().AuthFailed and by kind in
	// AuthFailures, and dropped before any handler sees it. A signed
	// frame is wire.AuthTrailerBytes longer, so senders build frames of
	// at most MaxDatagramBytes less that. nil: nothing is authenticated.
	Auth *wire.Auth
}

// Limits checked by Validate.
const (
	maxBatchSize     = 1024
	maxDatagramBytes = 65507 // largest IPv4 UDP payload
	minDatagramBytes = 64
	maxTTL           = 255
	maxBufferBytes   = 1 << 30
)

// DefaultConfig is one host over loopback with the default groups.
func DefaultConfig() Config {
	return Config{
		Interface:        "lo",
		StreamGroup:      "239.77.0.1:9100",
		CommandGroup:     "239.77.0.2:9101",
		TTL:              1,
		Loopback:         true,
		ReadBufferBytes:  8 << 20,
		WriteBufferBytes: 8 << 20,
		BatchSize:        64,
		MaxDatagramBytes: maxDatagramBytes,
		GSO:              true,
		GRO:              true,
	}
}

// Validate reports the first bad field, naming it and the allowed values.
func (c Config) Validate() error {
	if c.Interface == "" {
		return config.New(ErrConfig, "Interface", c.Interface, `an interface name such as "lo" or "eth0"`)
	}
	s, err := parseGroup("StreamGroup", c.StreamGroup)
	if err != nil {
		return err
	}
	cmd, err := parseGroup("CommandGroup", c.CommandGroup)
	if err != nil {
		return err
	}
	if s == cmd {
		return config.New(ErrConfig, "CommandGroup", c.CommandGroup, "a group distinct from StreamGroup")
	}
	if c.TTL < 0 || c.TTL > maxTTL {
		return config.New(ErrConfig, "TTL", c.TTL, fmt.Sprintf("0..%d", maxTTL))
	}
	if c.ReadBufferBytes < 0 || c.ReadBufferBytes > maxBufferBytes {
		return config.New(ErrConfig, "ReadBufferBytes", c.ReadBufferBytes, fmt.Sprintf("0..%d (0 keeps the kernel default)", maxBufferBytes))
	}
	if c.WriteBufferBytes < 0 || c.WriteBufferBytes > maxBufferBytes {
		return config.New(ErrConfig, "WriteBufferBytes", c.WriteBufferBytes, fmt.Sprintf("0..%d (0 keeps the kernel default)", maxBufferBytes))
	}
	if c.BatchSize < 1 || c.BatchSize > maxBatchSize {
		return config.New(ErrConfig, "BatchSize", c.BatchSize, fmt.Sprintf("1..%d", maxBatchSize))
	}
	if c.MaxDatagramBytes < minDatagramBytes || c.MaxDatagramBytes > maxDatagramBytes {
		return config.New(ErrConfig, "MaxDatagramBytes", c.MaxDatagramBytes, fmt.Sprintf("%d..%d", minDatagramBytes, maxDatagramBytes))
	}
	if c.MaxPeers < 0 || c.MaxPeers > maxMaxPeers {
		return fmt.Errorf("%w: MaxPeers %d out of range (want 0..%d; 0 means %d)", ErrConfig, c.MaxPeers, maxMaxPeers, defaultMaxPeers)
	}
	if err := c.Faults.Validate(); err != nil {
		return &config.Error{Field: "Faults", Value: c.Faults.String(), Allowed: err.Error(), Err: ErrConfig}
	}
	return nil
}

func parseGroup(key, s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, config.New(ErrConfig, key, s, `an IPv4 multicast host:port (e.g. "239.77.0.1:9100")`)
	}
	if !ap.Addr().Is4() || !ap.Addr().IsMulticast() {
		return ap, config.New(ErrConfig, key, s, "a multicast address (224.0.0.0/4) and a port")
	}
	if ap.Port() == 0 {
		return ap, config.New(ErrConfig, key, s, "a fixed port 1..65535 (every member binds the same one), not 0")
	}
	return ap, nil
}

// resolved is a validated Config with its names looked up.
type resolved struct {
	Config
	ifi         *net.Interface
	stream, cmd netip.AddrPort
	streamUDP   *net.UDPAddr
	cmdUDP      *net.UDPAddr
}

func (c Config) resolve() (*resolved, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	ifi, err := net.InterfaceByName(c.Interface)
	if err != nil {
		return nil, fmt.Errorf("%w: Interface %q: %v", ErrConfig, c.Interface, err)
	}
	r := &resolved{Config: c, ifi: ifi}
	r.stream, _ = netip.ParseAddrPort(c.StreamGroup)
	r.cmd, _ = netip.ParseAddrPort(c.CommandGroup)
	r.streamUDP = net.UDPAddrFromAddrPort(r.stream)
	r.cmdUDP = net.UDPAddrFromAddrPort(r.cmd)
	return r, nil
}
