package tiered

import (
	"fmt"
	"io"
	"log"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/seqd/seqd/internal/logging"
)

// SeedsEnv is the environment variable that lists gossip seeds when the
// configuration names none, as consul's and serf's retry-join do:
// host:port pairs separated by commas (or spaces).
const SeedsEnv = "SEQD_GOSSIP_SEEDS"

// DefaultGossipPort is the port a seed without one is contacted on.
const DefaultGossipPort = 7946

// Config configures an Agent. Start from DefaultConfig (a LAN) or
// TestConfig (loopback, fast failure detection).
type Config struct {
	// Name is this member's unique name in the cluster (default:
	// hostname-pid). It is also Meta.Name.
	Name string
	// BindAddr and BindPort: where gossip listens (UDP and TCP). The
	// default is loopback, so a member reaches beyond its host only when
	// told to; BindPort 0 picks a free port (Agent.Addr tells which).
	BindAddr string
	BindPort int
	// AdvertiseAddr is the address announced to the others when it is
	// not BindAddr (behind NAT, or when bound to 0.0.0.0); "" = BindAddr.
	AdvertiseAddr string
	// Seeds are members to join at start, host[:port]; empty takes
	// SEQD_GOSSIP_SEEDS (SeedsFromEnv). With none the agent starts a
	// cluster of its own that others join.
	Seeds []string
	// RejoinInterval: while no seed could be joined, try again this
	// often (in the background; NewAgent does not wait).
	RejoinInterval time.Duration
	// MetaInterval: how often the Meta is refreshed from the MetaFunc
	// and, when it changed, gossiped (memberlist UpdateNode).
	MetaInterval time.Duration
	// LeaveTimeout bounds the goodbye broadcast of Close.
	LeaveTimeout time.Duration
	// LAN selects memberlist's LAN timings; false its loopback ones
	// (faster failure detection, for tests and single-host clusters).
	LAN bool
	// ProbeInterval, when non-zero, overrides the profile's failure
	// detection period (a dead member is noticed within a few of them).
	ProbeInterval time.Duration
	// DeadAfter, when non-zero, is how long a member that stopped
	// answering probes stays suspect before it is declared dead
	// (memberlist's suspicion timeout, which by default grows to 6x when
	// no other member confirms it: with two members, seconds). A bridge
	// pair sets it short: a false death makes both ends active, which
	// the far end tolerates.
	DeadAfter time.Duration
	// Logger receives memberlist's log (warnings and errors); nil: none.
	Logger *slog.Logger
	// Keys, when set, encrypt and authenticate every gossip message
	// (memberlist's keyring, AES-GCM): the first encrypts, every one is
	// tried on what arrives (two during a rotation), and a message that
	// none opens is dropped (GossipVerifyIncoming and Outgoing), so a
	// member without a key is never joined and its meta never used.
	// Each key is 16, 24 or 32 bytes (ReadKeyFile). Empty: plain gossip.
	Keys [][]byte
}

// DefaultConfig is for a LAN: loopback bind on DefaultGossipPort (change
// BindAddr to gossip beyond the host), seeds from SEQD_GOSSIP_SEEDS.
func DefaultConfig() Config {
	return Config{
		BindAddr:       "127.0.0.1",
		BindPort:       DefaultGossipPort,
		RejoinInterval: 5 * time.Second,
		MetaInterval:   time.Second,
		LeaveTimeout:   time.Second,
		LAN:            true,
	}
}

// TestConfig is loopback on a free port with fast failure detection.
func TestConfig() Config {
	c := DefaultConfig()
	c.BindPort = 0
	c.LAN = false
	c.RejoinInterval = 200 * time.Millisecond
	c.MetaInterval = 50 * time.Millisecond
	c.ProbeInterval = 100 * time.Millisecond
	return c
}

// Validate names the first bad field.
func (c Config) Validate() error {
	switch {
	case len(c.Name) > MaxNameBytes:
		return fmt.Errorf("%w: Name of %d bytes, at most %d", ErrConfig, len(c.Name), MaxNameBytes)
	case net.ParseIP(c.BindAddr) == nil:
		return fmt.Errorf("%w: BindAddr = %q, want an IP address", ErrConfig, c.BindAddr)
	case c.BindPort < 0 || c.BindPort > 65535:
		return fmt.Errorf("%w: BindPort = %d, want 0..65535", ErrConfig, c.BindPort)
	case c.AdvertiseAddr != "" && net.ParseIP(c.AdvertiseAddr) == nil:
		return fmt.Errorf("%w: AdvertiseAddr = %q, want an IP address", ErrConfig, c.AdvertiseAddr)
	case c.RejoinInterval <= 0:
		return fmt.Errorf("%w: RejoinInterval = %v, want > 0", ErrConfig, c.RejoinInterval)
	case c.MetaInterval <= 0:
		return fmt.Errorf("%w: MetaInterval = %v, want > 0", ErrConfig, c.MetaInterval)
	case c.LeaveTimeout <= 0:
		return fmt.Errorf("%w: LeaveTimeout = %v, want > 0", ErrConfig, c.LeaveTimeout)
	case c.ProbeInterval < 0:
		return fmt.Errorf("%w: ProbeInterval = %v, want >= 0", ErrConfig, c.ProbeInterval)
	}
	for i, k := range c.Keys {
		if n := len(k); n != 16 && n != 24 && n != 32 {
			return fmt.Errorf("%w: Keys[%d] of %d bytes, want 16, 24 or 32", ErrConfig, i, n)
		}
	}
	for _, s := range c.Seeds {
		if _, err := seedAddr(s); err != nil {
			return fmt.Errorf("%w: Seeds: %w", ErrConfig, err)
		}
	}
	return nil
}

// ParseSeeds splits a seed list: host[:port] separated by commas or
// spaces (the port defaults to DefaultGossipPort).
func ParseSeeds(s string) ([]string, error) {
	var out []string
	for _, f := range strings.FieldsFunc(s, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\n' }) {
		a, err := seedAddr(f)
		if err != nil {
			return nil, err
		}
		out = append(out, a)
	}
	return out, nil
}

// SeedsFromEnv is the seed list of SEQD_GOSSIP_SEEDS (nil when unset).
func SeedsFromEnv() ([]string, error) {
	s, err := ParseSeeds(os.Getenv(SeedsEnv))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", SeedsEnv, err)
	}
	return s, nil
}

func seedAddr(s string) (string, error) {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		host, port = s, strconv.Itoa(DefaultGossipPort)
	}
	p, perr := strconv.Atoi(port)
	if host == "" || strings.ContainsAny(host, "[]") || perr != nil || p < 1 || p > 65535 {
		return "", fmt.Errorf("seed %q: want host[:port]", s)
	}
	return net.JoinHostPort(host, port), nil
}

// MetaFunc returns this member's current Meta (Name is set by the
// Agent). The Agent calls it every MetaInterval, and on Refresh, from its
// own goroutine.
type MetaFunc func() Meta

// Member is a live member as gossip describes it. Err is set (and Meta
// is zero) when its meta does not decode: it is listed, never selected.
type Member struct {
	Name string
	Addr string // its gossip address
	Meta Meta
	Err  error
}

// Agent is this process's membership in the gossip cluster: it announces
// a Meta (refreshed every MetaInterval), joins the seeds (retrying in the
// background until one answers), and lists the live members. It is a
// thin shell around hashicorp/memberlist; Select is the pure choice.
//
// All methods are safe for concurrent use. Lock order: memberlist's
// locks, then mu. memberlist calls NodeMeta and the event methods with
// its locks held, and they take mu; the Agent never calls memberlist
// while it holds mu.
type Agent struct {
	cfg  Config
	ml   *memberlist.Memberlist
	meta MetaFunc
	log  *slog.Logger

	mu      sync.Mutex
	encoded []byte // the Meta gossiped now
	current Meta
	joined  bool
	closed  bool
	// members is the live membership as memberlist's events tell it,
	// copied in the event callbacks (memberlist's own Node values change
	// under its lock, so they are never read outside those callbacks).
	members map[string]Member

	// nudge asks run for a refresh now (Refresh), one pending at most.
	nudge chan struct{}
	stop  chan struct{}
	done  chan struct{}
}

// NewAgent validates cfg, starts gossip on BindAddr:BindPort, announces
// meta() and joins the seeds (from cfg, else SEQD_GOSSIP_SEEDS). It does
// not wait for a seed: when none answers it logs it and retries every
// RejoinInterval (Joined says when it worked).
func NewAgent(cfg Config, meta MetaFunc) (*Agent, error) {
	if cfg.Name == "" {
		host, _ := os.Hostname()
		cfg.Name = fmt.Sprintf("%s-%d", host, os.Getpid())
	}
	if len(cfg.Seeds) == 0 {
		seeds, err := SeedsFromEnv()
		if err != nil {
			return nil, fmt.Errorf("%w: %w", ErrConfig, err)
		}
		cfg.Seeds = seeds
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if meta == nil {
		return nil, fmt.Errorf("%w: MetaFunc is nil", ErrConfig)
	}
	a := &Agent{cfg: cfg, meta: meta, log: cfg.Logger, stop: make(chan struct{}), done: make(chan struct{}),
		nudge: make(chan struct{}, 1), members: map[string]Member{}}
	if a.log == nil {
		a.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if _, err := a.refresh(); err != nil {
		return nil, err
	}
	mc := memberlist.DefaultLocalConfig()
	if cfg.LAN {
		mc = memberlist.DefaultLANConfig()
	}
	if cfg.ProbeInterval > 0 {
		mc.ProbeInterval = cfg.ProbeInterval
		mc.ProbeTimeout = min(mc.ProbeTimeout, cfg.ProbeInterval/2)
		mc.GossipInterval = min(mc.GossipInterval, cfg.ProbeInterval)
	}
	if cfg.DeadAfter > 0 {
		mc.SuspicionMult = max(1, int((cfg.DeadAfter+mc.ProbeInterval-1)/mc.ProbeInterval))
		mc.SuspicionMaxTimeoutMult = 1
	}
	if len(cfg.Keys) > 0 {
		kr, err := memberlist.NewKeyring(cfg.Keys, cfg.Keys[0])
		if err != nil {
			return nil, fmt.Errorf("%w: Keys: %w", ErrConfig, err)
		}
		mc.Keyring = kr
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = true, true
	}
	mc.Name = cfg.Name
	mc.BindAddr, mc.BindPort = cfg.BindAddr, cfg.BindPort
	mc.AdvertiseAddr, mc.AdvertisePort = cfg.AdvertiseAddr, cfg.BindPort
	mc.Delegate = (*delegate)(a)
	mc.Events = (*delegate)(a)
	if cfg.Logger != nil {
		// memberlist's [DEBUG]/[WARN]/[ERR] prefixes become levels, and
		// its repeats about a dead member are rate-limited.
		mc.Logger = logging.StdLog(cfg.Logger, "memberlist", logging.NewLimiter(logging.DefaultInterval, nil))
	} else {
		mc.Logger = log.New(io.Discard, "", 0)
	}
	ml, err := memberlist.Create(mc)
	if err != nil {
		return nil, fmt.Errorf("tiered: start gossip on %s:%d: %w", cfg.BindAddr, cfg.BindPort, err)
	}
	a.ml = ml
	a.joined = len(cfg.Seeds) == 0
	if !a.joined {
		a.join()
	}
	go a.run()
	return a, nil
}

// join tries the seeds once.
func (a *Agent) join() {
	n, err := a.ml.Join(a.cfg.Seeds)
	a.mu.Lock()
	defer a.mu.Unlock()
	if n > 0 {
		a.joined = true
		return
	}
	a.log.Warn("gossip: no seed answered; retrying", "seeds", strings.Join(a.cfg.Seeds, ","),
		"every", a.cfg.RejoinInterval, "err", fmt.Errorf("%w: %w", ErrNoSeeds, err))
}

// run refreshes the Meta and retries the seeds until Close.
func (a *Agent) run() {
	defer close(a.done)
	meta := time.NewTicker(a.cfg.MetaInterval)
	defer meta.Stop()
	rejoin := time.NewTicker(a.cfg.RejoinInterval)
	defer rejoin.Stop()
	for {
		select {
		case <-a.stop:
			return
		case <-meta.C:
			a.announce()
		case <-a.nudge:
			a.announce()
		case <-rejoin.C:
			if !a.Joined() {
				a.join()
			}
		}
	}
}

// announce refreshes the Meta and, when it changed, gossips it.
func (a *Agent) announce() {
	changed, err := a.refresh()
	if err != nil {
		a.log.Warn("gossip: meta not updated", "err", err)
	} else if changed {
		// UpdateNode gossips the new meta; a failure here is retried at
		// the next tick's change, or healed by the periodic push-pull.
		if err := a.ml.UpdateNode(a.cfg.MetaInterval); err != nil {
			a.log.Debug("gossip: meta update not acknowledged", "err", err)
		}
	}
}

// Refresh asks for the Meta to be read and, if it changed, gossiped now
// rather than at the next MetaInterval: for a change the others should
// learn at once (a hot-hot instance that became active or passive). It
// does not wait; refreshes asked while one is pending are one.
func (a *Agent) Refresh() {
	select {
	case a.nudge <- struct{}{}:
	default:
	}
}

// refresh encodes the MetaFunc's Meta and reports whether it changed.
func (a *Agent) refresh() (bool, error) {
	m := a.meta()
	m.Name = a.cfg.Name
	b, err := AppendMeta(nil, &m)
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if string(b) == string(a.encoded) {
		return false, nil
	}
	a.encoded, a.current = b, m
	return true, nil
}

// Name is this member's name.
func (a *Agent) Name() string { return a.cfg.Name }

// Addr is this member's gossip address (host:port): a seed for others.
func (a *Agent) Addr() string {
	n := a.ml.LocalNode()
	return net.JoinHostPort(n.Addr.String(), strconv.Itoa(int(n.Port)))
}

// Joined reports whether a seed was joined (true when there are none).
func (a *Agent) Joined() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.joined
}

// Meta is the Meta this member announces now.
func (a *Agent) Meta() Meta {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.current
}

// Members lists the members gossip believes alive (this one included),
// with their decoded Meta, by name. A member that stops answering stays
// listed until memberlist's failure detector declares it dead (a few
// probe intervals).
func (a *Agent) Members() []Member {
	a.mu.Lock()
	out := make([]Member, 0, len(a.members))
	for _, m := range a.members {
		out = append(out, m)
	}
	a.mu.Unlock()
	slices.SortFunc(out, func(x, y Member) int { return strings.Compare(x.Name, y.Name) })
	return out
}

// noteMember records n's state (memberlist calls the event methods with
// its locks held: n is read here and nowhere else).
func (a *Agent) noteMember(n *memberlist.Node) {
	m := Member{Name: n.Name, Addr: n.Address()}
	if err := DecodeMeta(n.Meta, &m.Meta); err != nil {
		m.Meta, m.Err = Meta{}, fmt.Errorf("member %s: %w", n.Name, err)
	} else if m.Meta.Name != n.Name {
		m.Meta, m.Err = Meta{}, fmt.Errorf("%w: member %s announces the name %q", ErrMeta, n.Name, m.Meta.Name)
	}
	a.mu.Lock()
	a.members[n.Name] = m
	a.mu.Unlock()
}

// Replayers is the Meta of every live replayer.
func (a *Agent) Replayers() []Meta {
	var out []Meta
	for _, m := range a.Members() {
		if m.Err == nil && m.Meta.Role == RoleReplayer {
			out = append(out, m.Meta)
		}
	}
	return out
}

// Select picks a live replayer for q (see Select); false when none
// qualifies.
func (a *Agent) Select(q Query) (Meta, bool) {
	rs := a.Replayers()
	if i := Select(rs, q); i >= 0 {
		return rs[i], true
	}
	return Meta{}, false
}

// RewindSource returns the function (node.RewindSource's shape) that
// names the rewind address to resume a rewind from seq from after the
// replayer at failed stopped serving it: Select with q's session and tier
// rules, holding from or just reaching it (Follow), avoiding failed
// unless it is the only one; "" when none qualifies.
func (a *Agent) RewindSource(q Query) func(from uint64, failed string) string {
	return func(from uint64, failed string) string {
		q := q
		q.From, q.Avoid, q.NeedRewind, q.Follow = from, failed, true, true
		if m, ok := a.Select(q); ok {
			return m.RewindAddr
		}
		return ""
	}
}

// Close leaves the cluster (the others learn it at once instead of
// suspecting a failure) and stops gossip.
func (a *Agent) Close() error {
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	a.mu.Unlock()
	close(a.stop)
	<-a.done
	err := a.ml.Leave(a.cfg.LeaveTimeout)
	if serr := a.ml.Shutdown(); err == nil {
		err = serr
	}
	return err
}

// kill stops gossip without leaving: to the others the member died
// (tests).
func (a *Agent) kill() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	close(a.stop)
	<-a.done
	return a.ml.Shutdown()
}

// delegate is the Agent seen by memberlist.
type delegate Agent

// NodeMeta is the encoded Meta (memberlist calls it with its locks held).
func (d *delegate) NodeMeta(limit int) []byte {
	a := (*Agent)(d)
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.encoded) > limit {
		return nil
	}
	return append([]byte(nil), a.encoded...)
}

// NotifyJoin, NotifyUpdate and NotifyLeave keep the membership
// (memberlist.EventDelegate); a leave is a graceful leave or a death.
func (d *delegate) NotifyJoin(n *memberlist.Node)   { (*Agent)(d).noteMember(n) }
func (d *delegate) NotifyUpdate(n *memberlist.Node) { (*Agent)(d).noteMember(n) }
func (d *delegate) NotifyLeave(n *memberlist.Node) {
	a := (*Agent)(d)
	a.mu.Lock()
	delete(a.members, n.Name)
	a.mu.Unlock()
}

func (d *delegate) NotifyMsg([]byte)                           {}
func (d *delegate) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (d *delegate) LocalState(join bool) []byte                { return nil }
func (d *delegate) MergeRemoteState(buf []byte, join bool)     {}
