package sim

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"time"

	"github.com/seqd/seqd/bridge"
	"github.com/seqd/seqd/internal/vfs"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/transport"
	"github.com/seqd/seqd/transport/fault"
	"github.com/seqd/seqd/transport/mem"
	"github.com/seqd/seqd/wire"
)

// The bridge (Config.Bridge): a far site B with its own mem network,
// joined to the origin site (the sequencer group's network) by a link of
// the real bridge ends' cores, driven on the simulator's clock.
//
//   - The sending end is a real replayer.Service (as bridge.SendEnd's)
//     following the origin's stream over its own client into a store on
//     a vfs.MemFS. Its TCP channel is a replayer.Reader of that store
//     from the seq the receiving end asks (the rewind with follow a
//     bridge.SendEnd serves); its UDP flow a Reader at the store's tip,
//     each packet in a bridge.DataFrame, with a hello every
//     HelloInterval. Commands that come back are checked by
//     bridge.CommandOf and sent into the origin's command group through
//     the follow client.
//   - The TCP channel is reliable and ordered, with a delay; it is cut
//     for spells (what is in flight is lost) and reconnects from the
//     merged position, as a ReceiveEnd's TCP channel does, also when a
//     hole outlives GapTimeout (bridge.ReceiveCore.GapRestart). The UDP
//     channels (the stream one way, commands the other) have seeded
//     loss, duplication and reordering (transport/fault, as
//     bridge.Config.Faults), a random delay each, and partitions.
//   - The receiving end is a real replayer.Service in Upstream mode whose
//     follow client is the merged channels through bridge.ReceiveCore
//     (Merge, heartbeat, gap timer): each packet let through is persisted
//     and republished on B's network, and B's NAKs are answered from its
//     store. Nothing is republished before a hello named the origin (as a
//     ReceiveEnd with UDP channels). B's commands go back over the UDP
//     channel to the sending ends heard within three HelloIntervals.
//   - B has a sending node and a read-only node (simNode, far): ordinary
//     node cores whose deliveries are checked against the origin's
//     stream like every node's.
//
// Checked after every step: each packet the receiving end republishes
// carries the origin's records (seq, account, command, time, flags,
// epoch), from the first seq on with no gap, and none of an epoch the
// failovers cut; B's nodes deliver a prefix of the origin's stream with
// no gap, no repeat and nothing cut (simNode.check); each of B's
// commands is sequenced at most once (its commands appear in the
// origin's stream numbered 1, 2, 3, ...). At the end B's nodes delivered
// the whole stream, B's sender's commands were each sequenced exactly
// once, and the receiving end's store holds the origin's stream record
// by record.
type simBridge struct {
	w   *world
	rng *rand.Rand
	cfg bridge.Config

	// The sending end, on the origin site.
	sfs     *vfs.MemFS
	sfollow transport.Client // on w.net: the stream in, commands out
	snak    *mem.Network     // its NAK endpoint's network (no node uses it)
	ssvc    *replayer.Service
	udpRd   *replayer.Reader // the UDP flow, at the tip
	hello   wire.BridgeHelloFrame
	lastHi  int64
	out     []byte

	// The channels.
	tcp  tcpLink
	udp  udpLink // the stream: send -> receive
	back udpLink // commands: receive -> send

	// The receiving end, on site B.
	bnet       *mem.Network
	bsrv       transport.Server
	rfs        *vfs.MemFS
	rsvc       *replayer.Service
	core       *bridge.ReceiveCore
	handler    transport.Handler
	nakH       transport.Handler
	onSite     transport.Handler
	emitF      func([]byte)
	identified bool
	heardAt    int64 // the sending end's last hello (commands go back only then)
	cmd        []byte
	curCh      int

	far []*simNode // B's nodes

	// Checker state.
	next    uint64 // the next place the receiving end must republish: seq,
	nextOff uint32 // and fragment offset
	// tamperDup, for the checker's self-test only, republishes every
	// tamperDup-th packet twice (a Merge that let a copy through).
	tamperDup int
	emitted   int
	scanned   int // w.log entries scanned for B's commands
	cutsSeen  int // len(w.cuts) when they were scanned
	farCmd    map[wire.Account]uint64
	pkt       wire.Packet
	rec       wire.Record

	// Crashes of the ends: down until then (0: up).
	sendDown, recvDown int64
	drop               transport.Handler

	// Counters for Result.
	cuts, udpCuts, gapRestarts, commandsBack, endCrashes int
}

// The bridge's channels: delays of the link (a LAN-like one), and how
// often a channel is cut (per step) and for how long at most.
const (
	bridgeTCPDelay   = 300 * time.Microsecond
	bridgeTCPJitter  = 200 * time.Microsecond
	bridgeUDPDelay   = 100 * time.Microsecond
	bridgeUDPJitter  = 400 * time.Microsecond
	bridgeCutOdds    = 8000
	bridgeMaxCut     = 60 * time.Millisecond
	bridgeTCPWindow  = 256 // packets in flight on the TCP channel (its backpressure)
	bridgeCrashOdds  = 40000
	bridgeMaxDown    = 20 * time.Millisecond
	bridgeReaderBuf  = 256 << 10
	bridgeFarSenders = 1
)

// tcpLink is the reliable ordered channel: stored packets read from the
// sending end's store from a seq, delivered in order after a delay.
type tcpLink struct {
	rd        *replayer.Reader
	q         []timedPkt
	last      int64 // the newest delivery time queued (deliveries are in order)
	downUntil int64 // cut until then (0: up)
}

// udpLink is a lossy datagram channel.
type udpLink struct {
	inj       *fault.Injector
	q         []timedPkt // unordered: each its own delay
	downUntil int64
	put       func([]byte)
	now       int64
	rng       *rand.Rand
}

type timedPkt struct {
	at int64
	b  []byte
}

func newSimBridge(w *world) (*simBridge, error) {
	b := &simBridge{w: w, rng: rand.New(rand.NewPCG(w.cfg.Seed, 0xb71d6e)), farCmd: map[wire.Account]uint64{}, next: 1}
	b.cfg = bridge.DefaultConfig()
	b.out = make([]byte, 0, wire.BridgeHeaderBytes+b.cfg.MaxPacketBytes)
	b.cmd = make([]byte, 0, 1<<16+wire.BridgeHeaderBytes)
	if err := b.hello.SetSite("A"); err != nil {
		return nil, err
	}
	fc := fault.Config{Loss: w.cfg.Loss, Dup: w.cfg.Dup, Reorder: w.cfg.Reorder, Seed: w.cfg.Seed ^ 0xb41d}
	b.udp = udpLink{inj: fault.New(fc, 1), rng: b.rng}
	b.back = udpLink{inj: fault.New(fc, 2), rng: b.rng}
	b.udp.put = b.udp.enqueue
	b.back.put = b.back.enqueue
	var err error
	if b.snak, err = mem.NewNetwork(mem.Config{}); err != nil {
		return nil, err
	}
	if b.bnet, err = mem.NewNetwork(mem.Config{
		Faults:   fault.Config{Loss: w.cfg.Loss, Dup: w.cfg.Dup, Reorder: w.cfg.Reorder, Seed: w.cfg.Seed ^ 0xb5173},
		MaxDelay: w.cfg.MaxDelay,
	}); err != nil {
		return nil, err
	}
	b.bsrv = b.bnet.Server()
	b.sfs, b.rfs = vfs.NewMem(), vfs.NewMem()
	b.emitF = b.emit
	b.onSite = b.siteFrame
	b.drop = func([]byte, transport.Peer) {}
	if err := b.startSend(); err != nil {
		return nil, err
	}
	if err := b.startReceive(); err != nil {
		return nil, err
	}
	for i := 0; i < bridgeFarSenders+1; i++ {
		n, err := newFarNode(w, b, i, i >= bridgeFarSenders)
		if err != nil {
			return nil, err
		}
		b.far = append(b.far, n)
	}
	return b, nil
}

func (b *simBridge) serviceConfig(dir string, fs *vfs.MemFS, seed uint64) replayer.ServiceConfig {
	cfg := replayer.DefaultServiceConfig()
	cfg.Dir = filepath.Join(dir, "store")
	cfg.Store.FS = fs
	cfg.Store.SyncInShell = false
	cfg.Store.Sync = replayer.SyncNone
	cfg.Store.SegmentBytes = 1 << 20
	cfg.Store.WriteBufferBytes = 128 << 10
	cfg.Store.ReadBufferBytes = 128 << 10
	cfg.Store.Session = 1
	cfg.Receiver.Seed = seed
	cfg.Receiver.ReadOnly = true
	cfg.Repair.RetransmitBytesPerSecond = b.w.sc.RetransmitBytesPerSecond * 4
	cfg.Logger = discard
	w := b.w
	cfg.Clock = func() int64 { return w.now }
	return cfg
}

// startSend opens the sending end (a new process on its store).
func (b *simBridge) startSend() error {
	w := b.w
	cfg := b.serviceConfig(fmt.Sprintf("/seqd-sim-bs-%d", w.cfg.Seed), b.sfs, w.cfg.Seed*17)
	b.sfollow = w.net.Client()
	svc, err := replayer.NewService(cfg, b.sfollow, b.snak.Server())
	if err != nil {
		return fmt.Errorf("bridge sending end: %w", err)
	}
	b.ssvc = svc
	tip := svc.Store().Tip()
	b.udpRd = replayer.NewReader(tip, tip.Seq()+1, bridgeReaderBuf)
	return nil
}

// startReceive opens the receiving end (a new process on its store).
func (b *simBridge) startReceive() error {
	w := b.w
	cfg := b.serviceConfig(fmt.Sprintf("/seqd-sim-br-%d", w.cfg.Seed), b.rfs, w.cfg.Seed*19)
	cfg.Upstream, cfg.FromLive = true, true // as NewReceiveEnd
	svc, err := replayer.NewService(cfg, (*simMergeClient)(b), (*simSiteServer)(b))
	if err != nil {
		return fmt.Errorf("bridge receiving end: %w", err)
	}
	b.rsvc = svc
	from := uint64(0)
	if c := svc.Store().Contiguous(); c > 0 {
		from = c + 1
	}
	b.core = bridge.NewReceiveCore(b.cfg, 3, 1, from) // tcp, udp, (the command channel is not merged)
	// The site hears the stored tail until a channel brings more (as
	// NewReceiveEnd): B's nodes resend only while they hear the stream.
	b.core.Resume(svc.Store())
	// A restart republishes from the seq after what the store holds
	// (the site's receivers drop what they had), at once: the origin
	// file names the origin.
	b.next, b.nextOff = max(from, 1), 0
	b.identified = from > 0
	if b.ssvc != nil && b.tcp.downUntil == 0 {
		b.tcp.connect(b, max(from, 1))
	}
	return nil
}

// connect (re)opens the TCP channel: a rewind with follow from seq from.
func (t *tcpLink) connect(b *simBridge, from uint64) {
	t.close()
	t.rd = replayer.NewReader(b.ssvc.Store().Tip(), from, bridgeReaderBuf)
	t.last = 0
}

func (t *tcpLink) close() {
	if t.rd != nil {
		_ = t.rd.Close()
		t.rd = nil
	}
	t.q = t.q[:0]
}

func (u *udpLink) enqueue(f []byte) {
	d := int64(bridgeUDPDelay) + u.rng.Int64N(int64(bridgeUDPJitter))
	u.q = append(u.q, timedPkt{at: u.now + d, b: append([]byte(nil), f...)})
}

// send passes a datagram through the channel's faults.
func (u *udpLink) send(now int64, f []byte) {
	if now < u.downUntil {
		return
	}
	u.now = now
	u.inj.Pass(f, u.put)
}

// due hands the datagrams due at now to h, in arrival order.
func (u *udpLink) due(now int64, h func([]byte)) {
	u.now = now
	u.inj.Release(u.put)
	k := 0
	for _, p := range u.q {
		if p.at <= now {
			h(p.b)
			continue
		}
		u.q[k] = p
		k++
	}
	clear(u.q[k:])
	u.q = u.q[:k]
}

func (u *udpLink) nextAt() (int64, bool) {
	var at int64
	ok := false
	for _, p := range u.q {
		if !ok || p.at < at {
			at, ok = p.at, true
		}
	}
	return at, ok
}

// nextAt lowers next to the bridge's next delivery after now.
func (b *simBridge) nextAt(now, next int64) int64 {
	low := func(at int64, ok bool) {
		if ok && at > now && at < next {
			next = at
		}
	}
	low(b.bnet.NextDelivery())
	if len(b.tcp.q) > 0 {
		low(b.tcp.q[0].at, true)
	}
	low(b.udp.nextAt())
	low(b.back.nextAt())
	return next
}

func (b *simBridge) setNow(now int64) { b.bnet.SetNow(now) }

// faults cuts and heals the channels.
func (b *simBridge) faults() {
	w := b.w
	now := w.now
	if w.now < w.idleUntil {
		return
	}
	if b.tcp.downUntil != 0 && now >= b.tcp.downUntil {
		b.tcp.downUntil = 0
		if b.ssvc != nil && b.rsvc != nil {
			b.tcp.connect(b, b.core.Merge().NextSeq()) // reconnects from what it holds
			b.core.Merge().AddRepair(0)
		}
	}
	if b.tcp.downUntil == 0 && b.rng.IntN(bridgeCutOdds) == 0 {
		b.tcp.downUntil = now + 1 + b.rng.Int64N(int64(bridgeMaxCut))
		b.tcp.close()
		b.cuts++
	}
	switch {
	case b.sendDown == 0 && b.recvDown == 0 && b.rng.IntN(bridgeCrashOdds) == 0:
		// The sending end dies: its follow client and its channels with
		// it; it restarts on its store.
		b.sendDown = now + 1 + b.rng.Int64N(int64(bridgeMaxDown))
		b.endCrashes++
		b.tcp.close()
		_ = b.udpRd.Close()
		if err := b.ssvc.Close(); err != nil {
			w.fail("bridge sending end close: %v", err)
		}
		_ = b.sfollow.Close()
		b.ssvc = nil
	case b.sendDown == 0 && b.recvDown == 0 && b.rng.IntN(bridgeCrashOdds) == 0:
		// The receiving end dies: what reaches it meanwhile is lost.
		b.recvDown = now + 1 + b.rng.Int64N(int64(bridgeMaxDown))
		b.endCrashes++
		b.tcp.close()
		b.udp.q = b.udp.q[:0]
		if err := b.rsvc.Close(); err != nil {
			w.fail("bridge receiving end close: %v", err)
		}
		b.rsvc = nil
	case b.sendDown != 0 && now >= b.sendDown:
		b.sendDown = 0
		if err := b.startSend(); err != nil {
			w.fail("%v", err)
			return
		}
		if b.rsvc != nil && b.tcp.downUntil == 0 {
			b.tcp.connect(b, b.core.Merge().NextSeq())
		}
	case b.recvDown != 0 && now >= b.recvDown:
		b.recvDown = 0
		if err := b.startReceive(); err != nil {
			w.fail("%v", err)
			return
		}
	}
	if now >= b.udp.downUntil && b.rng.IntN(bridgeCutOdds) == 0 {
		d := now + 1 + b.rng.Int64N(int64(bridgeMaxCut))
		b.udp.downUntil, b.back.downUntil = d, d
		b.udpCuts++
	}
}

// work runs one turn of each end and the channels' sending sides.
func (b *simBridge) work() {
	w := b.w
	now := w.now
	defer func() {
		for _, n := range b.far {
			n.work()
		}
	}()
	if b.rsvc == nil {
		_, _ = b.bsrv.Poll(b.drop, 0) // B's frames to the receiving end are lost
	}
	// Commands that came back reach the origin's command group.
	b.back.due(now, func(f []byte) {
		if cmd, ok := bridge.CommandOf(f); ok && b.ssvc != nil {
			_ = b.sfollow.Send(cmd)
			b.commandsBack++
		}
	})
	if b.ssvc == nil {
		if b.rsvc != nil {
			b.receiveTurn()
		}
		return
	}
	if err := b.ssvc.Work(); err != nil {
		w.fail("bridge sending end stopped: %v", err)
		return
	}
	tip := b.ssvc.Store().Tip()
	// The UDP flow: the tip's new packets, and a hello every HelloInterval.
	if now-b.lastHi >= int64(b.cfg.HelloInterval) && tip.Session() != 0 {
		b.lastHi = now
		b.hello.Session, b.hello.Tip = tip.Session(), tip.Seq()
		if f, err := wire.AppendBridgeHello(b.out[:0], &b.hello); err == nil {
			b.udp.send(now, f)
		}
	}
	for {
		run, err := b.udpRd.Next()
		if err != nil {
			w.fail("bridge sending end: udp flow reader: %v", err)
			return
		}
		if len(run) == 0 {
			break
		}
		eachStored(run, func(pkt []byte) {
			if f, err := bridge.DataFrame(b.out, pkt); err == nil {
				b.udp.send(now, f)
			}
		})
	}
	// The TCP channel: what the store holds from the asked seq on, up to
	// a window in flight.
	if b.tcp.rd != nil {
		for len(b.tcp.q) < bridgeTCPWindow {
			run, err := b.tcp.rd.Next()
			if err != nil {
				w.fail("bridge sending end: tcp channel reader: %v", err)
				return
			}
			if len(run) == 0 {
				break
			}
			eachStored(run, func(pkt []byte) {
				c := append([]byte(nil), pkt...)
				wire.SetPacketFlags(c, wire.PacketFlags(c)&^wire.PacketRetransmit)
				at := max(b.tcp.last, now+int64(bridgeTCPDelay)+b.rng.Int64N(int64(bridgeTCPJitter)))
				b.tcp.last = at
				b.tcp.q = append(b.tcp.q, timedPkt{at: at, b: c})
			})
		}
	}
	if b.rsvc != nil {
		b.receiveTurn()
	}
}

// receiveTurn is the receiving end's turn: the merge client's Poll takes
// what is due.
func (b *simBridge) receiveTurn() {
	if err := b.rsvc.Work(); err != nil {
		b.w.fail("bridge receiving end stopped: %v", err)
	}
}

// eachStored calls f with each packet of a run of store frames.
func eachStored(run []byte, f func([]byte)) {
	for len(run) >= replayer.FrameHeaderBytes {
		n := replayer.FrameHeaderBytes + int(binary.LittleEndian.Uint32(run[4:]))
		if n > len(run) {
			return
		}
		f(run[replayer.FrameHeaderBytes:n])
		run = run[n:]
	}
}

func (b *simBridge) receive() {
	for _, n := range b.far {
		n.receive()
	}
	b.checkCommands()
}

// simMergeClient is the receiving end's follow client (bridge's
// mergeClient): the merged channels.
type simMergeClient simBridge

func (m *simMergeClient) Send([]byte) error { return nil }
func (m *simMergeClient) Flush() error      { return nil }
func (m *simMergeClient) Close() error      { return nil }

func (m *simMergeClient) Poll(h transport.Handler, _ time.Duration) (int, error) {
	b := (*simBridge)(m)
	now := b.w.now
	b.handler = h
	n := 0
	b.udp.due(now, func(f []byte) {
		k, body, err := wire.DecodeBridge(f)
		if err != nil {
			return
		}
		switch k {
		case wire.BridgeData:
			if b.identified {
				b.curCh = 1
				b.core.Packet(1, body, now, b.emitF)
				n++
			}
		case wire.BridgeHello:
			var hello wire.BridgeHelloFrame
			if wire.DecodeBridgeHello(body, &hello) != nil {
				return
			}
			if hello.Site() == "B" {
				b.w.fail("bridge: a hello names this site as the origin")
			}
			if s := b.rsvc.Store().Tip().Session(); s != 0 && hello.Session != s {
				b.w.fail("bridge: hello of session %d, the store holds %d", hello.Session, s)
			}
			b.identified, b.heardAt = true, now
		}
	})
	if !b.identified {
		return n, nil // the TCP channel waits (its backpressure)
	}
	k := 0
	for _, p := range b.tcp.q {
		if p.at > now {
			break
		}
		b.curCh = 0
		b.core.Packet(0, p.b, now, b.emitF)
		k++
		n++
	}
	b.tcp.q = append(b.tcp.q[:0], b.tcp.q[k:]...)
	if hb := b.core.Heartbeat(b.rsvc.Store().Contiguous(), now); hb != nil {
		_ = b.bsrv.Publish(hb)
		_ = b.bsrv.Flush()
	}
	if b.core.GapRestart(now) && b.tcp.downUntil == 0 && b.ssvc != nil {
		// A hole outlived GapTimeout: ask the sending end's store from it
		// (a sending end that is down is asked once it is back: faults
		// reconnects the channel from the merged position then).
		b.tcp.connect(b, b.core.Merge().NextSeq())
		b.core.Merge().AddRepair(0)
		b.gapRestarts++
	}
	return n, nil
}

// emit persists (the Service's handler) and republishes a packet the
// merge let through, and checks it against the origin's stream.
func (b *simBridge) emit(pkt []byte) {
	b.checkRepublished(pkt)
	b.handler(pkt, transport.NoPeer)
	_ = b.bsrv.Publish(pkt)
	if b.emitted++; b.tamperDup > 0 && b.emitted%b.tamperDup == 0 {
		b.checkRepublished(pkt)
		b.handler(pkt, transport.NoPeer)
		_ = b.bsrv.Publish(pkt)
	}
}

// simSiteServer is the receiving end's NAK endpoint: B's server. NAKs go
// to the Service; commands go back over the UDP channel.
type simSiteServer simBridge

func (s *simSiteServer) Publish(frame []byte) error { return s.bsrv.Publish(frame) }
func (s *simSiteServer) SendTo(to transport.Peer, frame []byte) error {
	return s.bsrv.SendTo(to, frame)
}
func (s *simSiteServer) Flush() error { return s.bsrv.Flush() }
func (s *simSiteServer) Close() error { return nil }
func (s *simSiteServer) Poll(h transport.Handler, _ time.Duration) (int, error) {
	s.nakH = h
	return s.bsrv.Poll(s.onSite, 0)
}

func (b *simBridge) siteFrame(frame []byte, from transport.Peer) {
	k, err := wire.PeekKind(frame)
	switch {
	case err != nil:
	case k == wire.KindCommand:
		// To the sending end if heard lately (three missed hellos: gone).
		if b.identified && b.w.now-b.heardAt <= 3*int64(b.cfg.HelloInterval) {
			if f, err := wire.AppendBridgeFrame(b.cmd, wire.BridgeCommand, frame); err == nil {
				b.back.send(b.w.now, f)
			}
		}
	case k == wire.KindNak:
		b.nakH(frame, from)
	}
}

// checkRepublished: every record of a republished packet is the origin's,
// of an epoch not cut there, and the stream goes on from where it was
// without a gap and without a packet that brings nothing new (a packet
// may repeat records already republished if it reaches past them: a
// channel resumed at a record boundary; the site's receivers drop those).
// Places are seqs and, inside a fragmented message, fragment offsets.
func (b *simBridge) checkRepublished(pkt []byte) {
	w := b.w
	p, r := &b.pkt, &b.rec
	if err := wire.DecodePacket(pkt, p); err != nil {
		w.fail("bridge republished a packet that does not decode: %v", err)
		return
	}
	if p.Flags&wire.PacketRetransmit != 0 {
		w.fail("bridge republished a packet with the retransmit flag (seq %d)", p.FirstSeq)
	}
	moved := false
	for p.Next(r) {
		switch {
		case r.Seq > b.next || r.Seq == b.next && r.Offset > b.nextOff:
			w.fail("bridge republished seq %d (offset %d) after %d: a gap (packet from ch %d: epoch %d first %d count %d epochStart %d; merge next %d)",
				r.Seq, r.Offset, b.next-1, b.curCh, p.Epoch, p.FirstSeq, p.Count, p.EpochStart, b.core.Merge().NextSeq())
			return
		case r.Seq > uint64(len(w.log)):
			w.fail("bridge republished seq %d, the origin published up to %d", r.Seq, len(w.log))
			return
		}
		if _, cut := w.cutEntry(p.Epoch, r.Seq); cut {
			w.fail("bridge republished seq %d of epoch %d, which the failover cut", r.Seq, p.Epoch)
			return
		}
		if e := w.entryOf(p, r); w.log[r.Seq-1] != e {
			w.fail("bridge republished seq %d unlike the origin's: %+v, want %+v", r.Seq, e, w.log[r.Seq-1])
			return
		}
		if r.Seq == b.next && r.Offset == b.nextOff {
			moved = true
			if end := r.Offset + uint32(len(r.Payload)); r.Fragment() && end < r.Total {
				b.nextOff = end
			} else {
				b.next, b.nextOff = b.next+1, 0
			}
		}
	}
	if !moved {
		w.fail("bridge republished a duplicate: epoch %d seqs %d..%d, all republished before (next %d)", p.Epoch, p.FirstSeq, p.FirstSeq+uint64(p.Count)-1, b.next)
	}
}

// checkCommands: B's commands in the origin's stream are numbered 1, 2,
// 3, ... per sender: none sequenced twice, none skipped.
func (b *simBridge) checkCommands() {
	w := b.w
	if len(w.log) < b.scanned || len(w.cuts) != b.cutsSeen {
		// An epoch change cut the log: count again from the start. (The
		// log may have grown past the scanned length again before this
		// runs: the new epoch's primary publishing in the same step.)
		b.scanned, b.cutsSeen = 0, len(w.cuts)
		clear(b.farCmd)
	}
	for i := b.scanned; i < len(w.log); i++ {
		e := &w.log[i]
		if e.flags&wire.FlagInternal != 0 && (e.flags&wire.FlagSeqGen != 0 || e.cmdSeq == 0) {
			continue
		}
		n := b.farNode(e.account)
		if n == nil {
			continue
		}
		if last := b.farCmd[e.account]; e.cmdSeq != last+1 {
			w.fail("%s's command %d sequenced at seq %d after its command %d (twice, or one skipped)", n.name, e.cmdSeq, i+1, last)
			return
		}
		b.farCmd[e.account] = e.cmdSeq
	}
	b.scanned = len(w.log)
}

func (b *simBridge) farNode(a wire.Account) *simNode {
	for _, n := range b.far {
		if n.account == a && !n.readOnly {
			return n
		}
	}
	return nil
}

// done: B's nodes have the whole stream and B's commands are all
// sequenced; then the end checks.
func (b *simBridge) done() bool {
	last := uint64(len(b.w.log))
	for _, n := range b.far {
		if !n.readOnly && (n.sent < uint64(n.target) || n.core.InFlight() > 0) {
			return false
		}
		if n.core.Delivered() < last {
			return false
		}
	}
	return b.ssvc != nil && b.rsvc != nil && b.rsvc.Store().Contiguous() >= last
}

func (b *simBridge) check() error {
	for _, n := range b.far {
		if err := n.finalCheck(); err != nil {
			return err
		}
		if !n.readOnly && b.farCmd[n.account] != n.cmds {
			return fmt.Errorf("%w: %s sent %d commands, the origin sequenced %d", ErrInvariant, n.name, n.cmds, b.farCmd[n.account])
		}
	}
	if err := storeHolds(b.w, b.rsvc.Store(), "the bridge's receiving end"); err != nil {
		return err
	}
	return storeHolds(b.w, b.ssvc.Store(), "the bridge's sending end")
}

func (b *simBridge) progress() string {
	if b.ssvc == nil || b.rsvc == nil {
		return fmt.Sprintf("bridge{an end down: send=%v recv=%v}", b.ssvc != nil, b.rsvc != nil)
	}
	s := fmt.Sprintf("bridge{send=%d recv=%d next=%d max=%d tcp_up=%v udp_up=%v identified=%v}", b.ssvc.Store().Contiguous(),
		b.rsvc.Store().Contiguous(), b.core.Merge().NextSeq(), b.core.Merge().MaxSeq(), b.tcp.downUntil == 0, b.w.now >= b.udp.downUntil, b.identified)
	if debug {
		st := b.rsvc.Stats()
		s += fmt.Sprintf(" recvstats{%+v %+v}", st.Receiver, st.Persist)
	}
	for _, n := range b.far {
		s += fmt.Sprintf(" %s{sent=%d/%d inflight=%d delivered=%d err=%v}", n.name, n.sent, n.target, n.core.InFlight(), n.core.Delivered(), n.core.Err())
	}
	return s
}

func (b *simBridge) close() {
	b.tcp.close()
	if b.udpRd != nil {
		_ = b.udpRd.Close()
	}
	if b.ssvc != nil {
		_ = b.ssvc.Close()
	}
	if b.rsvc != nil {
		_ = b.rsvc.Close()
	}
}

// newFarNode is a node of site B: its client on B's network, its repairs
// from the receiving end (the site's server answers NAKs).
func newFarNode(w *world, b *simBridge, i int, readOnly bool) (*simNode, error) {
	n := &simNode{w: w, idx: 100 + i, name: fmt.Sprintf("f%d", i), instance: 1, readOnly: readOnly, incarnation: 1, far: true}
	if !readOnly {
		n.target = max(1, w.cfg.Commands/w.cfg.Senders/2)
	}
	n.account = wire.MustAccount(n.name)
	n.client = b.bnet.Client()
	n.peer = n.client.(interface{ Peer() transport.Peer }).Peer()
	n.onFrame = n.frame
	return n, n.start()
}

// storeHolds compares what a store holds with the stream, record by
// record (a fragmented message at its first fragment).
func storeHolds(w *world, st *replayer.Store, who string) error {
	var err error
	next := uint64(1)
	st.Records(1, uint64(len(w.log)), func(rec *wire.Record, epoch uint32) bool {
		if rec.Seq != next {
			if rec.Seq == next-1 && rec.Fragment() && rec.Offset > 0 {
				return true
			}
			err = fmt.Errorf("%w: %s's store holds seq %d after %d", ErrInvariant, who, rec.Seq, next-1)
			return false
		}
		e := &w.log[rec.Seq-1]
		if e.account != rec.Account || e.cmdSeq != rec.CmdSeq || e.time != rec.Time || e.epoch != epoch {
			err = fmt.Errorf("%w: %s's store differs from the stream at seq %d (epoch %d, want %d)", ErrInvariant, who, rec.Seq, epoch, e.epoch)
			return false
		}
		next++
		return true
	})
	if err == nil && next != uint64(len(w.log))+1 {
		err = fmt.Errorf("%w: %s's store serves up to %d, the stream is at %d", ErrInvariant, who, next-1, len(w.log))
	}
	if err == nil {
		err = st.Err()
	}
	return err
}
