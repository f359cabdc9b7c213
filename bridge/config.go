package bridge

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net/netip"
	"time"

	"github.com/seqd/seqd/internal/config"
	"github.com/seqd/seqd/internal/tlsconf"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// Role is which end of a link a process is.
type Role uint8

const (
	// Send follows its site's stream and sends it over the channels.
	Send Role = iota + 1
	// Receive merges the channels and republishes on its site.
	Receive
)

func (r Role) String() string {
	switch r {
	case Send:
		return "send"
	case Receive:
		return "receive"
	}
	return fmt.Sprintf("role(%d)", uint8(r))
}

// ParseRole reads "send" or "receive".
func ParseRole(s string) (Role, error) {
	switch s {
	case "send":
		return Send, nil
	case "receive":
		return Receive, nil
	}
	return 0, config.New(ErrConfig, "Role", s, "one of: send, receive")
}

// Config configures either end. Start from DefaultConfig (or WANConfig).
type Config struct {
	Role Role
	// Site names this end's site (1..32 bytes); Origin, on a sending end,
	// the site whose sequencer published the followed stream ("": Site;
	// a stream that came by bridge names the site it came from).
	Site, Origin string
	// TCP: on a sending end, the addresses it serves rewinds on (one
	// channel per receiving connection); on a receiving end, the sending
	// end's addresses, one channel each.
	TCP []string
	// UDP: on a sending end, the far addresses its datagrams go to (one
	// flow each); on a receiving end, the local addresses it reads flows
	// on (one channel each).
	UDP []string
	// UDPBind: a sending end's local UDP address ("": any port).
	UDPBind string
	// RewindAddr: a receiving end serves rewinds of its store to its
	// site's nodes here ("": none).
	RewindAddr string
	// Service follows (send) or persists (receive) the stream: its Dir
	// is the end's store.
	Service replayer.ServiceConfig
	// Rewind serves the TCP channels (send) and the site's rewinds.
	Rewind replayer.RewindConfig
	// Upstream follows a TCP channel (receive); Addrs is set per channel.
	Upstream tiered.UpstreamConfig
	// HelloInterval: a sending end sends a hello on every UDP flow this
	// often; a receiving end publishes a heartbeat this often when idle.
	HelloInterval time.Duration
	// GapTimeout: a hole in the merged stream open this long restarts
	// the TCP channels from the merged position (the NAK over TCP).
	GapTimeout time.Duration
	// MaxHeldBytes bounds the packets the merge holds ahead of a hole.
	MaxHeldBytes int
	// MaxPacketBytes is the largest stream packet carried.
	MaxPacketBytes int
	// TLS: mutual TLS 1.3 on the TCP channels, both ways, where the far
	// end must hold a certificate of the CA named bridge-* (BridgeNames),
	// and on a receiving end's RewindAddr, where any certificate of the
	// CA may rewind (the site's nodes). Nil: plain TCP.
	TLS *tlsconf.Identity
	// Standby starts the end as a warm standby of a pair (Activate makes
	// it active): a sending end follows the stream into its store but
	// neither listens on its TCP channels nor sends on its UDP flows; a
	// receiving end merges the channels and persists the stream but
	// neither republishes it, nor answers its site's NAKs, nor carries
	// commands back. Taking over needs no catch-up: its store is current.
	Standby bool
	// Faults are seeded faults on every channel (loss, dup, reorder) at
	// the receiving side of each, for tests and drills.
	Faults fault.Config
	// FaultsOn names the channels Faults apply to: "" or "all" (every
	// one), "udp" or "tcp" (a lossy UDP flow beside a healthy TCP
	// channel: `seqd bench --mode bridge --faults`).
	FaultsOn string
	Logger   *slog.Logger
}

// BridgeNames are the certificate names a bridge end accepts at the far
// end of a TCP channel (Config.TLS).
var BridgeNames = tlsconf.Prefixes("bridge-")

// channelServerTLS is the TLS of a sending end's channel listeners (nil
// without TLS).
func (c Config) channelServerTLS() *tls.Config {
	if c.TLS == nil {
		return nil
	}
	return c.TLS.Server(BridgeNames)
}

// channelClientTLS is the TLS a receiving end dials its channels with.
func (c Config) channelClientTLS() *tls.Config {
	if c.TLS == nil {
		return nil
	}
	return c.TLS.Client(BridgeNames)
}

// DefaultConfig is a LAN link: hellos every 100 ms, a hole repaired
// after 50 ms, 64 MiB held ahead of a hole.
func DefaultConfig() Config {
	svc := replayer.DefaultServiceConfig()
	up := tiered.DefaultUpstreamConfig()
	up.FailoverWait = 24 * time.Hour // a channel cut for long resumes; never fatal
	// A channel whose far end is down (or a pair's standby, which
	// listens only once it takes over) is dialled again at most this
	// long after: on a LAN a refused dial costs nothing, and the
	// takeover of a sending end waits for the next one.
	up.RetryMax = 50 * time.Millisecond
	up.DialTimeout = time.Second
	return Config{
		Service:        svc,
		Rewind:         replayer.DefaultRewindConfig(),
		Upstream:       up,
		HelloInterval:  100 * time.Millisecond,
		GapTimeout:     50 * time.Millisecond,
		MaxHeldBytes:   64 << 20,
		MaxPacketBytes: svc.Store.MaxPacketBytes,
	}
}

// WANConfig is a long-distance link: a hole waits longer before the TCP
// channels restart (the TCP channel is a round trip behind), and more is
// held ahead of it.
func WANConfig() Config {
	c := DefaultConfig()
	c.GapTimeout = 500 * time.Millisecond
	c.MaxHeldBytes = 256 << 20
	c.Upstream.DialTimeout = 5 * time.Second
	c.Upstream.RetryMax = time.Second
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	bad := func(field string, v any, allowed string) error { return config.New(ErrConfig, field, v, allowed) }
	site := func(s string) bool { return len(s) >= 1 && len(s) <= wire.MaxSiteBytes }
	switch {
	case c.Role != Send && c.Role != Receive:
		return bad("Role", c.Role, "send or receive")
	case !site(c.Site):
		return bad("Site", c.Site, fmt.Sprintf("a name of 1..%d bytes", wire.MaxSiteBytes))
	case c.Origin != "" && !site(c.Origin):
		return bad("Origin", c.Origin, fmt.Sprintf("empty or a name of 1..%d bytes", wire.MaxSiteBytes))
	case c.Role == Receive && c.Origin != "":
		return bad("Origin", c.Origin, "empty on a receiving end (the hellos name the origin)")
	case len(c.TCP)+len(c.UDP) == 0:
		return bad("TCP", c.TCP, "at least one TCP or UDP channel")
	case c.Role == Receive && len(c.TCP) == 0:
		return bad("TCP", c.TCP, "at least one TCP channel on a receiving end (holes are asked again over TCP)")
	case len(c.TCP) > 16 || len(c.UDP) > 16:
		return bad("UDP", len(c.TCP)+len(c.UDP), "at most 16 channels of each kind")
	case c.Service.Dir == "":
		return bad("Service.Dir", `""`, "the store's directory")
	case c.HelloInterval <= 0 || c.HelloInterval > time.Minute:
		return bad("HelloInterval", c.HelloInterval, "1ns..1m")
	case c.GapTimeout <= 0 || c.GapTimeout > time.Minute:
		return bad("GapTimeout", c.GapTimeout, "1ns..1m")
	case c.FaultsOn != "" && c.FaultsOn != "all" && c.FaultsOn != "udp" && c.FaultsOn != "tcp":
		return bad("FaultsOn", c.FaultsOn, "all, udp or tcp")
	case c.MaxHeldBytes < c.MaxPacketBytes:
		return bad("MaxHeldBytes", c.MaxHeldBytes, fmt.Sprintf(">= MaxPacketBytes (%d)", c.MaxPacketBytes))
	case c.MaxPacketBytes < wire.PacketHeaderBytes || c.MaxPacketBytes > 1<<20:
		// A packet too large for one datagram goes by TCP only.
		return bad("MaxPacketBytes", c.MaxPacketBytes, fmt.Sprintf("%d..%d", wire.PacketHeaderBytes, 1<<20))
	}
	for _, a := range c.UDP {
		if _, err := netip.ParseAddrPort(a); err != nil {
			return bad("UDP", a, "ip:port")
		}
	}
	if err := c.Faults.Validate(); err != nil {
		return err
	}
	if err := c.Rewind.Validate(); err != nil {
		return err
	}
	return c.Service.Validate()
}

// origin is the name hellos carry.
func (c Config) origin() string {
	if c.Origin != "" {
		return c.Origin
	}
	return c.Site
}

func (c Config) logger() *slog.Logger {
	if c.Logger != nil {
		return c.Logger
	}
	return slog.Default()
}
