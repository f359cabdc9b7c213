package multicast

import (
	"fmt"
	"log/slog"
	"net"
	"net/netip"

	"github.com/seqd/seqd/transport/fault"
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
		return fmt.Errorf("%w: Interface is empty (want an interface name such as \"lo\" or \"eth0\")", ErrConfig)
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
		return fmt.Errorf("%w: StreamGroup and CommandGroup are both %q (want distinct groups)", ErrConfig, c.StreamGroup)
	}
	if c.TTL < 0 || c.TTL > maxTTL {
		return fmt.Errorf("%w: TTL %d out of range (want 0..%d)", ErrConfig, c.TTL, maxTTL)
	}
	if c.ReadBufferBytes < 0 || c.ReadBufferBytes > maxBufferBytes {
		return fmt.Errorf("%w: ReadBufferBytes %d out of range (want 0..%d; 0 keeps the kernel default)", ErrConfig, c.ReadBufferBytes, maxBufferBytes)
	}
	if c.WriteBufferBytes < 0 || c.WriteBufferBytes > maxBufferBytes {
		return fmt.Errorf("%w: WriteBufferBytes %d out of range (want 0..%d; 0 keeps the kernel default)", ErrConfig, c.WriteBufferBytes, maxBufferBytes)
	}
	if c.BatchSize < 1 || c.BatchSize > maxBatchSize {
		return fmt.Errorf("%w: BatchSize %d out of range (want 1..%d)", ErrConfig, c.BatchSize, maxBatchSize)
	}
	if c.MaxDatagramBytes < minDatagramBytes || c.MaxDatagramBytes > maxDatagramBytes {
		return fmt.Errorf("%w: MaxDatagramBytes %d out of range (want %d..%d)", ErrConfig, c.MaxDatagramBytes, minDatagramBytes, maxDatagramBytes)
	}
	if c.MaxPeers < 0 || c.MaxPeers > maxMaxPeers {
		return fmt.Errorf("%w: MaxPeers %d out of range (want 0..%d; 0 means %d)", ErrConfig, c.MaxPeers, maxMaxPeers, defaultMaxPeers)
	}
	if err := c.Faults.Validate(); err != nil {
		return fmt.Errorf("%w: Faults: %w", ErrConfig, err)
	}
	return nil
}

func parseGroup(key, s string) (netip.AddrPort, error) {
	ap, err := netip.ParseAddrPort(s)
	if err != nil {
		return ap, fmt.Errorf("%w: %s %q is not an IPv4 host:port (e.g. \"239.77.0.1:9100\")", ErrConfig, key, s)
	}
	if !ap.Addr().Is4() || !ap.Addr().IsMulticast() {
		return ap, fmt.Errorf("%w: %s %q is not a multicast address (want 224.0.0.0/4)", ErrConfig, key, s)
	}
	if ap.Port() == 0 {
		return ap, fmt.Errorf("%w: %s %q has port 0 (want a fixed port 1..65535: every member must bind the same one)", ErrConfig, key, s)
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
