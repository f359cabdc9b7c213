package ops

import (
	"fmt"
	"os"
	"time"

	"github.com/seqd/seqd/bridge"
	"github.com/seqd/seqd/replayer"
)

// KindBridge is a bridge end (seqd bridge).
const KindBridge = "bridge"

// BridgeStatus is a bridge end's section of ProcessStatus.
type BridgeStatus struct {
	Role   string `json:"role"` // send | receive
	Site   string `json:"site"`
	Origin string `json:"origin,omitempty"`
	// The end's store, as a replayer's.
	Session    uint64 `json:"session"`
	Contiguous uint64 `json:"contiguous"` // held from seq 1 (or the first kept) on, no hole
	Stable     uint64 `json:"stable"`     // the stable seq it has seen
	// Receiving end: the merge.
	NextSeq   uint64          `json:"next_seq,omitempty"`  // the first seq not yet held whole
	MaxSeq    uint64          `json:"max_seq,omitempty"`   // the highest seq any channel brought
	Published uint64          `json:"published,omitempty"` // packets republished on the site
	Commands  uint64          `json:"commands"`            // commands carried over the link
	Channels  []BridgeChannel `json:"channels,omitempty"`
	// Sending end: the UDP flows.
	UDPPackets uint64 `json:"udp_packets,omitempty"`
	UDPRefused uint64 `json:"udp_refused,omitempty"`
}

// BridgeChannel is one channel of a receiving end.
type BridgeChannel struct {
	Name       string  `json:"name"` // "tcp ADDR" | "udp ADDR"
	Packets    uint64  `json:"packets"`
	Bytes      uint64  `json:"bytes"`
	FirstShare float64 `json:"first_share"` // of the packets the merge let through, the share this channel brought first
	Dups       uint64  `json:"duplicates"`
	LastSeq    uint64  `json:"last_seq"`
	LagMeanUS  float64 `json:"lag_mean_us"` // how long after the first arrival this channel's copies came
	LagMaxUS   float64 `json:"lag_max_us"`
	Repairs    uint64  `json:"repairs"`
}

// BridgeSnap is what a bridge end's surface reads, once per status or
// scrape: Send for a sending end, Receive for a receiving end.
type BridgeSnap struct {
	Send    *bridge.SendStats
	Receive *bridge.ReceiveStats
}

func (s *BridgeSnap) service() replayer.ServiceStats {
	if s.Send != nil {
		return s.Send.Service
	}
	return s.Receive.Service
}

// BridgeSurface is a bridge end's admin surface: its status (the store,
// the merge and each channel), health (the store's loop turns), readiness
// (it follows a session; a receiving end also holds within ReadyLagSeqs
// of the highest seq a channel brought) and metrics, per channel labelled
// channel="tcp ADDR". snap must be safe from any goroutine (SendEnd.Stats
// and ReceiveEnd.Stats are); channels are the receiving end's channel
// names, fixed at start (ReceiveStats.Names; none for a sending end).
func BridgeSurface(auth Auth, role, site, origin string, channels []string, snap func() BridgeSnap) *Surface {
	started := time.Now().UnixNano()
	st := StatusFunc(func() ProcessStatus {
		sn := snap()
		return ProcessStatus{Process: KindBridge, Name: "bridge " + role + " " + site, PID: os.Getpid(), StartedAt: started, Bridge: bridgeStatus(role, site, origin, &sn)}
	})
	ready := func() error {
		sn := snap()
		svc := sn.service()
		if svc.Session == 0 {
			return fmt.Errorf("%w: no stream heard yet (holds %d)", ErrNotReady, svc.Contiguous)
		}
		if r := sn.Receive; r != nil && r.MaxSeq > r.NextSeq+ReadyLagSeqs {
			return fmt.Errorf("%w: catching up: holds up to %d whole, a channel brought %d (more than %d ahead)", ErrNotReady, r.NextSeq, r.MaxSeq, ReadyLagSeqs)
		}
		return nil
	}
	live := ProgressLive("the bridge's store loop", func() uint64 { sn := snap(); return sn.service().Snapshots }, DefaultStall)
	s := NewSurface(auth, st, HealthFuncs{LiveFunc: live, ReadyFunc: ready})
	s.Registry.MustRegister(newBridgeCollector(channels, snap))
	return s
}

func bridgeStatus(role, site, origin string, sn *BridgeSnap) *BridgeStatus {
	svc := sn.service()
	b := &BridgeStatus{Role: role, Site: site, Origin: origin, Session: svc.Session, Contiguous: svc.Contiguous, Stable: svc.Stable}
	if s := sn.Send; s != nil {
		b.Commands, b.UDPPackets, b.UDPRefused = s.Commands, s.UDPPackets, s.UDPRefused
	}
	if r := sn.Receive; r != nil {
		b.NextSeq, b.MaxSeq, b.Published, b.Commands = r.NextSeq, r.MaxSeq, r.Published, r.Commands
		for i, c := range r.Channels {
			ch := BridgeChannel{Packets: c.Packets, Bytes: c.Bytes, FirstShare: c.FirstShare(r.Delivered), Dups: c.Dups, LastSeq: c.LastSeq,
				LagMaxUS: float64(c.LagMaxNs) / 1e3, Repairs: c.Repairs}
			if i < len(r.Names) {
				ch.Name = r.Names[i]
			}
			if c.LagSamples > 0 {
				ch.LagMeanUS = float64(c.LagSumNs) / float64(c.LagSamples) / 1e3
			}
			b.Channels = append(b.Channels, ch)
		}
	}
	return b
}

// newBridgeCollector reports a bridge end's counters: the store's (as a
// replayer's, seqd_bridge_ prefixed), the sending end's UDP flows and
// commands, the receiving end's merge and, per channel, packets, bytes,
// first arrivals, duplicates, lag and repairs.
func newBridgeCollector(channels []string, snap func() BridgeSnap) *SnapCollector[BridgeSnap] {
	type S = BridgeSnap
	svc := func(f func(*replayer.ServiceStats) uint64) func(*S) float64 {
		return func(s *S) float64 { v := s.service(); return u(f(&v)) }
	}
	send := func(f func(*bridge.SendStats) uint64) func(*S) float64 {
		return func(s *S) float64 {
			if s.Send == nil {
				return 0
			}
			return u(f(s.Send))
		}
	}
	recv := func(f func(*bridge.ReceiveStats) uint64) func(*S) float64 {
		return func(s *S) float64 {
			if s.Receive == nil {
				return 0
			}
			return u(f(s.Receive))
		}
	}
	fields := []Field[S]{
		Gauge("seqd_bridge_held_seq", "the last seq the end's store holds with no hole before it", svc(func(s *replayer.ServiceStats) uint64 { return s.Contiguous })),
		Gauge("seqd_bridge_stable_seq", "the stable seq the end has seen", svc(func(s *replayer.ServiceStats) uint64 { return s.Stable })),
		Gauge("seqd_bridge_session", "the session the end carries (0: none yet)", svc(func(s *replayer.ServiceStats) uint64 { return s.Session })),
		Counter("seqd_bridge_udp_packets_total", "sending end: stream packets sent on each UDP flow", send(func(s *bridge.SendStats) uint64 { return s.UDPPackets })),
		Counter("seqd_bridge_udp_bytes_total", "sending end: datagram bytes sent, all flows", send(func(s *bridge.SendStats) uint64 { return s.UDPBytes })),
		Counter("seqd_bridge_udp_refused_total", "sending end: datagrams the kernel refused", send(func(s *bridge.SendStats) uint64 { return s.UDPRefused })),
		Counter("seqd_bridge_commands_injected_total", "sending end: commands from the far site sent into this site's command group", send(func(s *bridge.SendStats) uint64 { return s.Injected })),
		Counter("seqd_bridge_commands_dropped_total", "sending end: commands dropped (queue full, malformed)", send(func(s *bridge.SendStats) uint64 { return s.Dropped })),
		Counter("seqd_bridge_commands_total", "commands carried over the link (received by a sending end, forwarded by a receiving end)",
			func(s *S) float64 {
				if s.Send != nil {
					return u(s.Send.Commands)
				}
				return u(s.Receive.Commands)
			}),
		Counter("seqd_bridge_merged_packets_total", "receiving end: packets the merge let through (each once)", recv(func(s *bridge.ReceiveStats) uint64 { return s.Delivered })),
		Counter("seqd_bridge_republished_packets_total", "receiving end: packets republished on this site", recv(func(s *bridge.ReceiveStats) uint64 { return s.Published })),
		Gauge("seqd_bridge_next_seq", "receiving end: the first seq not yet held whole", recv(func(s *bridge.ReceiveStats) uint64 { return s.NextSeq })),
		Gauge("seqd_bridge_lag_seqs", "receiving end: how far the highest seq a channel brought is ahead of what is held whole",
			recv(func(s *bridge.ReceiveStats) uint64 {
				if s.MaxSeq > s.NextSeq {
					return s.MaxSeq - s.NextSeq
				}
				return 0
			})),
	}
	for i, name := range channels {
		ch := func(f func(*bridge.ChannelStats) float64) func(*S) float64 {
			return func(s *S) float64 {
				if s.Receive == nil || i >= len(s.Receive.Channels) {
					return 0
				}
				return f(&s.Receive.Channels[i])
			}
		}
		fields = append(fields,
			Counter("seqd_bridge_channel_packets_total", "data packets a channel brought", ch(func(c *bridge.ChannelStats) float64 { return u(c.Packets) })).With("channel", name),
			Counter("seqd_bridge_channel_bytes_total", "bytes of the data packets a channel brought", ch(func(c *bridge.ChannelStats) float64 { return u(c.Bytes) })).With("channel", name),
			Counter("seqd_bridge_channel_first_total", "packets a channel brought first (its first-arrival share over merged_packets)", ch(func(c *bridge.ChannelStats) float64 { return u(c.Firsts) })).With("channel", name),
			Counter("seqd_bridge_channel_duplicates_total", "packets another channel (or this one) had brought first", ch(func(c *bridge.ChannelStats) float64 { return u(c.Dups) })).With("channel", name),
			Counter("seqd_bridge_channel_repairs_total", "restarts of a channel from the merged position (hole repairs, reconnections)", ch(func(c *bridge.ChannelStats) float64 { return u(c.Repairs) })).With("channel", name),
			Gauge("seqd_bridge_channel_last_seq", "the highest seq a channel brought", ch(func(c *bridge.ChannelStats) float64 { return u(c.LastSeq) })).With("channel", name),
			Gauge("seqd_bridge_channel_lag_max_seconds", "the worst delay of a channel's copy after the first arrival", ch(func(c *bridge.ChannelStats) float64 { return float64(c.LagMaxNs) / 1e9 })).With("channel", name),
			Gauge("seqd_bridge_channel_lag_mean_seconds", "the mean delay of a channel's copies after the first arrival", ch(func(c *bridge.ChannelStats) float64 {
				if c.LagSamples == 0 {
					return 0
				}
				return float64(c.LagSumNs) / float64(c.LagSamples) / 1e9
			})).With("channel", name),
		)
	}
	return NewSnapCollector(snap, fields...)
}
