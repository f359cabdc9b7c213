package bridge

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/tiered"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/wire"
)

// ReceiveStats are a receiving end's counters.
type ReceiveStats struct {
	Service    replayer.ServiceStats
	Channels   []ChannelStats // TCP channels first, then UDP, in Config order
	Names      []string       // "tcp ADDR" / "udp ADDR", as Channels
	Delivered  uint64         // packets the merge let through (each once)
	NextSeq    uint64         // the first seq not yet held whole
	MaxSeq     uint64         // the highest seq any channel brought
	Published  uint64         // packets republished on the site
	Heartbeats uint64
	Commands   uint64 // site commands sent back over the link (a copy per far end)
	// CommandsTCP: of Commands, those sent over TCP control connections
	// (no UDP channel heard lately).
	CommandsTCP uint64
	// Unheld counts the site's NAKs left unanswered because the end held
	// nothing yet (origin unknown or store empty): never a Gone for them.
	Unheld  uint64
	Rewinds replayer.RewindStats
}

// ReceiveEnd is a link's receiving end (see the package comment).
type ReceiveEnd struct {
	cfg     Config
	log     *slog.Logger
	standby atomic.Bool // a Standby not yet activated: persists only (the zero value is active)
	svc     *replayer.Service
	site    transport.Server
	pipe    *pipe
	udps    []*udpChannel
	ctls    []*control   // one per TCP channel
	core    *ReceiveCore // the Service's goroutine
	merge   *Merge       // core's
	names   []string
	from    uint64 // where the TCP channels start

	// identified: a hello named the stream's origin (not this site), or
	// the store's origin file did; until then nothing is republished
	// (the hellos ride on the UDP flows and the TCP channels' control
	// connections).
	identified atomic.Bool
	idMu       sync.Mutex    // one writer of the origin file
	next       atomic.Uint64 // merge's next seq, for channel restarts
	restart    atomic.Uint64 // bumped when a hole outlived GapTimeout
	fatal      atomic.Pointer[error]
	start      time.Time

	// The Service's goroutine (mergeClient.Poll, siteServer.Poll):
	handler  transport.Handler
	onPacket func(ch int, pkt []byte)
	nakH     transport.Handler
	onSite   transport.Handler
	emitF    func([]byte)
	cmd      []byte
	far      []netip.AddrPort // forward's scratch

	published, heartbeats, commands atomic.Uint64
	unheld                          atomic.Uint64 // site NAKs not answered: nothing held yet
	commandsTCP                     atomic.Uint64
	repairs                         []atomic.Uint64

	rewind atomic.Pointer[replayer.RewindServer]
	mu     sync.Mutex // guards snap
	snap   []ChannelStats
	snapD  [3]uint64 // delivered, next, max
}

// maxFar bounds the sending ends one UDP channel hears (redundant
// sending ends send to the same address).
const maxFar = 4

// udpChannel is one UDP flow's socket and the sending ends its hellos
// came from (commands go back to each heard lately).
type udpChannel struct {
	conn *net.UDPConn
	mu   sync.Mutex // guards far
	far  [maxFar]farEnd
}

type farEnd struct {
	addr netip.AddrPort
	at   time.Time // its last hello
}

// heard notes a hello from addr (the oldest is forgotten when full).
func (u *udpChannel) heard(addr netip.AddrPort, now time.Time) {
	u.mu.Lock()
	defer u.mu.Unlock()
	old := 0
	for i := range u.far {
		if u.far[i].addr == addr {
			u.far[i].at = now
			return
		}
		if u.far[i].at.Before(u.far[old].at) {
			old = i
		}
	}
	u.far[old] = farEnd{addr: addr, at: now}
}

// peers copies into out the sending ends heard within maxAge.
func (u *udpChannel) peers(out []netip.AddrPort, now time.Time, maxAge time.Duration) []netip.AddrPort {
	u.mu.Lock()
	defer u.mu.Unlock()
	for _, f := range u.far {
		if f.addr.IsValid() && now.Sub(f.at) <= maxAge {
			out = append(out, f.addr)
		}
	}
	return out
}

// NewReceiveEnd opens the store (cfg.Service.Dir) and binds the UDP
// channels. site is the site's server: it publishes the stream on the
// site's stream group (or TCP fan-out) and hears the site's NAKs and
// commands; the caller closes it after Run returns.
func NewReceiveEnd(cfg Config, site transport.Server) (*ReceiveEnd, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Role != Receive {
		return nil, fmt.Errorf("%w: Role = %v, want receive", ErrConfig, cfg.Role)
	}
	r := &ReceiveEnd{cfg: cfg, log: cfg.logger(), site: site, pipe: newPipe(cfg.MaxPacketBytes), start: time.Now(),
		cmd: make([]byte, 0, 65536)}
	r.standby.Store(cfg.Standby)
	for _, a := range cfg.TCP {
		r.names = append(r.names, "tcp "+a)
	}
	fail := func(err error) (*ReceiveEnd, error) {
		for _, u := range r.udps {
			u.conn.Close()
		}
		return nil, err
	}
	for _, a := range cfg.UDP {
		la, err := net.ResolveUDPAddr("udp", a)
		if err != nil {
			return fail(fmt.Errorf("bridge: udp channel %s: %w", a, err))
		}
		c, err := net.ListenUDP("udp", la)
		if err != nil {
			return fail(fmt.Errorf("bridge: udp channel %s: %w", a, err))
		}
		_ = c.SetReadBuffer(8 << 20)
		r.udps = append(r.udps, &udpChannel{conn: c})
		r.names = append(r.names, "udp "+a)
	}
	sc := cfg.Service
	sc.Logger = r.log
	// The channels carry what the sending end's store took as stable,
	// with the headers it had then: stored as it comes (Upstream), and an
	// empty store starts where the channels do.
	sc.Upstream, sc.FromLive = true, true
	svc, err := replayer.NewService(sc, &mergeClient{r}, &siteServer{r})
	if err != nil {
		return fail(err)
	}
	r.svc = svc
	if c := svc.Store().Contiguous(); c > 0 {
		r.from = c + 1
	}
	r.core = NewReceiveCore(cfg, len(r.names), len(cfg.TCP), r.from)
	r.core.Resume(svc.Store())
	r.merge = r.core.Merge()
	r.emitF = r.emit
	r.next.Store(max(r.from, 1))
	r.snap = make([]ChannelStats, len(r.names))
	r.repairs = make([]atomic.Uint64, len(r.names))
	r.onPacket = r.packet
	r.onSite = r.siteFrame
	for range cfg.TCP {
		r.ctls = append(r.ctls, newControl())
	}
	if b, err := os.ReadFile(filepath.Join(cfg.Service.Dir, originFile)); err == nil && len(b) > 0 {
		if strings.TrimSpace(string(b)) == cfg.Site {
			return fail(fmt.Errorf("%w: the store in %s holds a stream of site %s, this end's own site", ErrLoop, cfg.Service.Dir, cfg.Site))
		}
		r.identified.Store(true)
	}
	return r, nil
}

// originFile, in a receiving end's store directory, names the origin
// site its hellos named, so that a restart during a UDP cut republishes
// at once.
const originFile = "bridge-origin"

// UDPAddrs are the local addresses of the UDP channels.
func (r *ReceiveEnd) UDPAddrs() []string {
	var out []string
	for _, u := range r.udps {
		out = append(out, u.conn.LocalAddr().String())
	}
	return out
}

// Service is the replayer.Service that persists the merged stream.
func (r *ReceiveEnd) Service() *replayer.Service { return r.svc }

func (r *ReceiveEnd) mono() int64 { return int64(time.Since(r.start)) }

// Stats returns the counters as of a recent poll; safe from any
// goroutine.
func (r *ReceiveEnd) Stats() ReceiveStats {
	st := ReceiveStats{Service: r.svc.Stats(), Names: r.names, Published: r.published.Load(),
		Heartbeats: r.heartbeats.Load(), Commands: r.commands.Load(), CommandsTCP: r.commandsTCP.Load(), Unheld: r.unheld.Load()}
	r.mu.Lock()
	st.Channels = append([]ChannelStats(nil), r.snap...)
	st.Delivered, st.NextSeq, st.MaxSeq = r.snapD[0], r.snapD[1], r.snapD[2]
	r.mu.Unlock()
	if rs := r.rewind.Load(); rs != nil {
		st.Rewinds = rs.Stats()
	}
	return st
}

func (r *ReceiveEnd) setFatal(err error) {
	r.fatal.CompareAndSwap(nil, &err)
}

// Run reads the channels, merges, persists and republishes until ctx
// ends (it returns ctx's error) or a fatal error (ErrLoop, ErrSession,
// the store).
func (r *ReceiveEnd) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for i, a := range r.cfg.TCP {
		wg.Add(1)
		go func() { defer wg.Done(); r.tcpChannel(ctx, i, a) }()
	}
	for i, a := range r.cfg.TCP {
		wg.Add(1)
		go func() { defer wg.Done(); r.controlChannel(ctx, i, a, r.ctls[i]) }()
	}
	for i, u := range r.udps {
		wg.Add(1)
		go func() { defer wg.Done(); r.udpChannel(len(r.cfg.TCP)+i, u) }()
	}
	svcErr := make(chan error, 1)
	go func() { svcErr <- r.svc.Run(ctx) }()
	if r.cfg.RewindAddr != "" {
		if rs, err := r.serveRewinds(ctx); err != nil {
			r.setFatal(fmt.Errorf("bridge: rewind-addr %s: %w", r.cfg.RewindAddr, err))
		} else if rs != nil {
			defer rs.Close()
		}
	}
	r.log.Info("bridge: receiving", "site", r.cfg.Site, "channels", r.names, "from", r.from)
	err := <-svcErr
	cancel()
	close(r.pipe.stop)
	for _, u := range r.udps {
		u.conn.Close()
	}
	wg.Wait()
	return err
}

// serveRewinds serves the store's rewinds to the site on RewindAddr
// (nil, nil when the Service ended first).
func (r *ReceiveEnd) serveRewinds(ctx context.Context) (*replayer.RewindServer, error) {
	var tip *replayer.Tip
	if err := r.svc.Do(ctx, func(s *replayer.Store) { tip = s.Tip() }); err != nil {
		return nil, nil
	}
	rs, err := replayer.NewRewindServer(tip, r.cfg.Rewind)
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", r.cfg.RewindAddr)
	if err != nil {
		return nil, err
	}
	if r.cfg.TLS != nil {
		// The site's nodes: any certificate of the CA.
		l = tls.NewListener(l, r.cfg.TLS.Server(nil))
	}
	r.rewind.Store(rs)
	go func() {
		// Rewinds are served once the end holds part of the stream (as
		// its NAKs are, see holds): a rewind to an empty store would be
		// refused Gone. Until then a node's connection waits in the
		// listen backlog, its request unread.
		t := time.NewTicker(5 * time.Millisecond)
		defer t.Stop()
		for !r.identified.Load() || r.svc.Contiguous() == 0 {
			select {
			case <-ctx.Done():
				l.Close()
				return
			case <-t.C:
			}
		}
		_ = rs.Serve(l)
	}()
	return rs, nil
}

// inject returns the channel's fault injector, or nil.
func (r *ReceiveEnd) inject(ch int) *fault.Injector {
	udp := ch >= len(r.cfg.TCP)
	switch on := r.cfg.FaultsOn; {
	case !r.cfg.Faults.Enabled(), on == "udp" && !udp, on == "tcp" && udp:
		return nil
	}
	return fault.New(r.cfg.Faults, uint64(ch)+1)
}

// feed copies packets into chunks for the Service's goroutine.
type feed struct {
	r   *ReceiveEnd
	ch  int
	c   *chunk
	inj *fault.Injector
	put func([]byte)
}

func (f *feed) add(pkt []byte) {
	if f.inj != nil {
		f.inj.Pass(pkt, f.put)
		return
	}
	f.copyIn(pkt)
}

func (f *feed) copyIn(pkt []byte) {
	if f.c != nil && !f.c.room(len(pkt)) {
		f.flush()
	}
	if f.c == nil {
		if f.c = f.r.pipe.get(f.ch); f.c == nil {
			return
		}
		f.c.at = f.r.mono()
	}
	f.c.put(pkt)
}

// flush hands the chunk over (false once stopped).
func (f *feed) flush() bool {
	if f.c == nil || len(f.c.b) == 0 {
		return true
	}
	c := f.c
	f.c = nil
	return f.r.pipe.send(c)
}

func (r *ReceiveEnd) newFeed(ch int) *feed {
	f := &feed{r: r, ch: ch, inj: r.inject(ch)}
	f.put = f.copyIn
	return f
}

// tcpChannel follows the sending end's store at addr (a rewind with
// follow, tiered.Upstream), from the merged position when it starts and
// whenever a hole outlives GapTimeout.
func (r *ReceiveEnd) tcpChannel(ctx context.Context, ch int, addr string) {
	f := r.newFeed(ch)
	h := func(pkt []byte, _ transport.Peer) { f.add(pkt) }
	from := max(r.from, 1)
	idle := 0
	for ctx.Err() == nil {
		uc := r.cfg.Upstream
		uc.Addrs = []string{addr}
		uc.Logger = r.log
		uc.TLS = r.cfg.channelClientTLS()
		uc.Session = r.svc.Store().Tip().Session()
		uc.FromOldest = r.from == 0
		up, err := tiered.NewUpstream(uc)
		if err != nil {
			r.setFatal(err)
			return
		}
		up.Start(from)
		// A restart asked before this connection began, or while it is
		// younger than GapTimeout, does not end it: the merge asks again
		// every GapTimeout while its hole is open, and honouring those
		// at the first poll ended every new connection before its first
		// bytes while the machine was slow to bring them (the channel
		// reconnected in a loop and the hole stayed open).
		gen, started := r.restart.Load(), time.Now()
		var failovers uint64
		for ctx.Err() == nil {
			_, err := up.Poll(h, 20*time.Millisecond)
			// A reconnection of the channel after a cut is a repair too.
			if fo := up.Stats().Failovers; fo > failovers {
				r.repairs[ch].Add(fo - failovers)
				failovers = fo
			}
			if !f.flush() {
				break
			}
			if err != nil {
				r.log.Warn("bridge: tcp channel gave up; starting it again", "addr", addr, "err", err)
				break
			}
			if r.restart.Load() != gen && time.Since(started) >= r.cfg.GapTimeout {
				// A hole outlived GapTimeout: this channel lost it too
				// (or lags): ask the sending end's store from the hole.
				break
			}
		}
		up.Close()
		// Restarts that bring nothing (the sending end down or cut off)
		// back off, up to RetryMax, so a long cut is not a reconnect loop.
		if n := r.next.Load(); n > from {
			idle = 0
		} else {
			idle++
		}
		r.countRepair(ch)
		if ctx.Err() == nil {
			time.Sleep(min(r.cfg.Upstream.RetryMax, 20*time.Millisecond<<min(idle, 6)))
		}
		from = r.next.Load()
	}
}

// repairs are counted by the channel goroutine into an atomic, folded
// into the merge's stats on the Service's goroutine.
func (r *ReceiveEnd) countRepair(ch int) { r.repairs[ch].Add(1) }

// udpChannel reads one flow: data packets into chunks, hellos checked.
func (r *ReceiveEnd) udpChannel(ch int, u *udpChannel) {
	f := r.newFeed(ch)
	buf := make([]byte, 65536)
	var hello wire.BridgeHelloFrame
	for {
		n, from, err := u.conn.ReadFromUDPAddrPort(buf)
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			continue
		}
		k, body, err := wire.DecodeBridge(buf[:n])
		if err != nil {
			continue // counted as malformed by nobody: not a bridge frame
		}
		switch k {
		case wire.BridgeData:
			if !r.identified.Load() {
				continue // see mergeClient.Poll
			}
			f.add(body)
			if !f.flush() {
				return
			}
		case wire.BridgeHello:
			if wire.DecodeBridgeHello(body, &hello) != nil {
				continue
			}
			if !r.hello(ch, &hello) {
				return
			}
			u.heard(from, time.Now())
		}
	}
}

// hello checks a hello that came on channel ch (a UDP flow, or a TCP
// channel's control connection): the stream's origin must not be this
// site, nor its session another than the store's; false once it has set
// the end's fatal error. The first hello identifies the stream.
func (r *ReceiveEnd) hello(ch int, hello *wire.BridgeHelloFrame) bool {
	if hello.Site() == r.cfg.Site {
		r.setFatal(fmt.Errorf("%w: the %s channel carries a stream of site %s (session %d), this end's own site", ErrLoop, r.names[ch], hello.Site(), hello.Session))
		return false
	}
	if s := r.svc.Store().Tip().Session(); s != 0 && hello.Session != s {
		r.setFatal(fmt.Errorf("%w: the %s channel carries session %d, the store holds %d", ErrSession, r.names[ch], hello.Session, s))
		return false
	}
	if !r.identified.Load() {
		r.idMu.Lock()
		if !r.identified.Load() {
			_ = os.WriteFile(filepath.Join(r.cfg.Service.Dir, originFile), []byte(hello.Site()+"\n"), 0o644)
			r.identified.Store(true)
		}
		r.idMu.Unlock()
	}
	return true
}

// mergeClient is the Service's follow client: the merged channels.
// What the Service's receiver sends (NAKs, status) goes nowhere: the
// merged stream has no holes, and the sending end's flow control is TCP's.
type mergeClient struct{ r *ReceiveEnd }

func (m *mergeClient) Send([]byte) error { return nil }
func (m *mergeClient) Flush() error      { return nil }
func (m *mergeClient) Close() error      { return nil }

// Poll merges the chunks that arrived (waiting up to wait for the
// first), hands each packet let through to h (the Service persists it)
// and then republishes it on the site.
func (m *mergeClient) Poll(h transport.Handler, wait time.Duration) (int, error) {
	r := m.r
	if e := r.fatal.Load(); e != nil {
		return 0, *e
	}
	r.handler = h
	if !r.identified.Load() {
		// No hello yet: the stream may be this site's own, come round.
		// The TCP channels wait (TCP's backpressure); the UDP ones drop
		// their data meanwhile, so that they never block before the
		// hello they carry.
		if wait > 0 {
			time.Sleep(min(wait, time.Millisecond))
		}
		return 0, nil
	}
	n := 0
	for i := 0; i < 16; i++ {
		c, err := r.pipe.take(wait)
		if err != nil {
			return n, err
		}
		if c == nil {
			break
		}
		wait = 0
		c.each(r.onPacket)
		n++
		r.pipe.recycle(c)
	}
	now := r.mono()
	st := r.svc.Store()
	if hb := r.core.Heartbeat(st.Contiguous(), now); hb != nil {
		r.heartbeat(hb)
	}
	r.next.Store(r.merge.NextSeq())
	if r.core.GapRestart(now) {
		r.restart.Add(1)
	}
	r.snapshot()
	return n, nil
}

// packet merges one packet (the Service's goroutine).
func (r *ReceiveEnd) packet(ch int, pkt []byte) {
	r.core.Packet(ch, pkt, r.mono(), r.emitF)
}

// emit persists (through the Service's handler) and republishes pkt
// (a standby only persists).
func (r *ReceiveEnd) emit(pkt []byte) {
	r.handler(pkt, transport.NoPeer)
	if r.standby.Load() {
		return
	}
	_ = r.site.Publish(pkt) // loss on the site is repaired by its NAKs
	r.published.Add(1)
}

// Activate makes a Standby end active: from now on it republishes what
// it merges, answers its site's NAKs (what the site missed between the
// active end's death and now) and carries the site's commands back.
// Safe from any goroutine; idempotent.
func (r *ReceiveEnd) Activate() {
	if r.standby.CompareAndSwap(true, false) {
		r.log.Warn("bridge: standby ACTIVE: republishing on the site", "site", r.cfg.Site, "next_seq", r.Stats().NextSeq)
	}
}

// Deactivate makes an active end a standby again: it goes on merging and
// persisting, but no longer republishes, heartbeats, answers its site's
// NAKs or carries its commands. For two active ends of a pair (a false
// death: a partition that healed, a paused process), the one that steps
// back (tiered.PairStepBack); Activate makes it active again. Safe from
// any goroutine; idempotent.
func (r *ReceiveEnd) Deactivate() {
	if r.standby.CompareAndSwap(false, true) {
		r.log.Warn("bridge: active end steps back to STANDBY: another end of the pair is active", "site", r.cfg.Site, "next_seq", r.Stats().NextSeq)
	}
}

// Active reports whether the end republishes on its site.
func (r *ReceiveEnd) Active() bool { return !r.standby.Load() }

// heartbeat publishes the tail and stable (ReceiveCore.Heartbeat): the
// site's safe-mode nodes deliver all of it.
func (r *ReceiveEnd) heartbeat(hb []byte) {
	if r.standby.Load() {
		return
	}
	_ = r.site.Publish(hb)
	_ = r.site.Flush()
	r.heartbeats.Add(1)
}

func (r *ReceiveEnd) snapshot() {
	r.mu.Lock()
	for i := range r.snap {
		r.snap[i] = r.merge.Channel(i)
		r.snap[i].Repairs = r.repairs[i].Load()
	}
	r.snapD = [3]uint64{r.merge.Delivered(), r.merge.NextSeq(), r.merge.MaxSeq()}
	r.mu.Unlock()
}

// siteServer is the Service's NAK endpoint: the site's server. NAKs go
// to the Service (answered from the store); commands go back over the
// UDP channels to the origin.
type siteServer struct{ r *ReceiveEnd }

func (s *siteServer) Publish(frame []byte) error { return s.r.site.Publish(frame) }
func (s *siteServer) SendTo(to transport.Peer, frame []byte) error {
	return s.r.site.SendTo(to, frame)
}
func (s *siteServer) Flush() error { return s.r.site.Flush() }
func (s *siteServer) Close() error { return nil }

func (s *siteServer) Poll(h transport.Handler, wait time.Duration) (int, error) {
	s.r.nakH = h
	return s.r.site.Poll(s.r.onSite, wait)
}

func (r *ReceiveEnd) siteFrame(frame []byte, from transport.Peer) {
	if r.standby.Load() {
		return // the active end answers the site and carries its commands
	}
	k, err := wire.PeekKind(frame)
	switch {
	case err != nil:
	case k == wire.KindCommand:
		r.forward(frame)
	case k == wire.KindNak:
		if !r.holds() {
			// Nothing to answer from yet: a Gone from the empty store
			// would stop the node ("no longer retained") for seqs that
			// are on their way, or that belong to its own site's stream
			// come round (refused once a hello names the origin). No
			// answer: the node asks again, as past a sequencer's tail.
			r.unheld.Add(1)
			return
		}
		r.nakH(frame, from)
	}
}

// holds reports whether the end answers its site from its store: the
// origin is known (not this site) and the store holds part of the
// stream. The Service's goroutine.
func (r *ReceiveEnd) holds() bool {
	if !r.identified.Load() {
		return false
	}
	_, ok := r.svc.Store().Oldest()
	return ok
}

// forward sends a site command over every UDP channel whose far end is
// known (a copy per channel: the sequencer drops all but one).
func (r *ReceiveEnd) forward(frame []byte) {
	f, err := wire.AppendBridgeFrame(r.cmd, wire.BridgeCommand, frame)
	if err != nil {
		return
	}
	now := time.Now()
	sent := 0
	for _, u := range r.udps {
		// To every sending end heard lately: one that died stops
		// getting them after three missed hellos.
		r.far = u.peers(r.far[:0], now, 3*r.cfg.HelloInterval)
		for _, p := range r.far {
			if _, err := u.conn.WriteToUDPAddrPort(f, p); err == nil {
				r.commands.Add(1)
				sent++
			}
		}
	}
	if sent > 0 {
		return
	}
	// No UDP channel, or none heard lately: over every TCP channel's
	// control connection that is up.
	for _, c := range r.ctls {
		if c.push(frame) {
			r.commands.Add(1)
			r.commandsTCP.Add(1)
		}
	}
}
