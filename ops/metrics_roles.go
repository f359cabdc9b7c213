package ops

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seqd/seqd/cluster/standby"
	"github.com/seqd/seqd/node"
	"github.com/seqd/seqd/receiver"
	"github.com/seqd/seqd/replayer"
	"github.com/seqd/seqd/sequencer"
	"github.com/seqd/seqd/transport"
)

// SequencerSnap is what a standalone sequencer's surface reads: the
// agent's counters and its last seq.
type SequencerSnap struct {
	Stats   sequencer.Stats
	LastSeq uint64
}

// NewSequencerCollector reports a sequencer Core's counters (commands,
// messages, packets, rejections by reason, drops by reason, NAKs and
// repairs, flow-control pauses) from snap, taken once per scrape.
func NewSequencerCollector(snap func() sequencer.Stats) prometheus.Collector {
	type S = sequencer.Stats
	st := func(f func(*sequencer.Stats) uint64) func(*S) float64 {
		return func(s *S) float64 { return u(f(s)) }
	}
	rej := func(reason string, f func(*sequencer.Stats) uint64) Field[S] {
		return Counter("seqd_sequencer_rejected_commands_total", "commands refused (each told to its sender in the stream), by reason", st(f)).With("reason", reason)
	}
	drop := func(reason string, f func(*sequencer.Stats) uint64) Field[S] {
		return Counter("seqd_sequencer_dropped_commands_total", "command frames dropped without a record, by reason", st(f)).With("reason", reason)
	}
	return NewSnapCollector(snap,
		Counter("seqd_sequencer_commands_total", "commands sequenced (whole or reassembled)", st(func(s *sequencer.Stats) uint64 { return s.Commands })),
		Counter("seqd_sequencer_messages_total", "sequence numbers assigned (messages published)", st(func(s *sequencer.Stats) uint64 { return s.Messages })),
		Counter("seqd_sequencer_packets_total", "data packets published (first sends)", st(func(s *sequencer.Stats) uint64 { return s.Packets })),
		Counter("seqd_sequencer_heartbeats_total", "heartbeats published", st(func(s *sequencer.Stats) uint64 { return s.Heartbeats })),
		Counter("seqd_sequencer_timers_fired_total", "centralized timer messages emitted", st(func(s *sequencer.Stats) uint64 { return s.TimersFired })),
		rej("too_large", func(s *sequencer.Stats) uint64 { return s.RejectedTooLarge }),
		rej("sender_table_full", func(s *sequencer.Stats) uint64 { return s.RejectedSenderTableFull }),
		rej("reassembly_full", func(s *sequencer.Stats) uint64 { return s.RejectedReassemblyFull }),
		rej("timer_cap", func(s *sequencer.Stats) uint64 { return s.RejectedTimerCap }),
		rej("timer_request", func(s *sequencer.Stats) uint64 { return s.RejectedTimerRequest }),
		rej("fragmented_timer", func(s *sequencer.Stats) uint64 { return s.RejectedFragmentedTimer }),
		rej("timer_rate", func(s *sequencer.Stats) uint64 { return s.RejectedTimerRate }),
		drop("duplicate", func(s *sequencer.Stats) uint64 { return s.Duplicates }),
		drop("out_of_order", func(s *sequencer.Stats) uint64 { return s.OutOfOrder }),
		drop("stale_incarnation", func(s *sequencer.Stats) uint64 { return s.StaleFrames }),
		drop("bad_fragment", func(s *sequencer.Stats) uint64 { return s.BadFragments }),
		drop("ahead_fragment", func(s *sequencer.Stats) uint64 { return s.AheadFragments }),
		drop("wrong_session", func(s *sequencer.Stats) uint64 { return s.WrongSession }),
		Counter("seqd_malformed_frames_total", "frames rejected by a decoder or a sanity check", st(func(s *sequencer.Stats) uint64 { return s.Malformed })),
		Counter("seqd_sequencer_flow_paused_total", "command frames not taken: the slowest sending receiver is a flow window behind", st(func(s *sequencer.Stats) uint64 { return s.FlowPaused })),
		Counter("seqd_sequencer_senders_forgotten_total", "senders forgotten by a full sender table", st(func(s *sequencer.Stats) uint64 { return s.SendersForgotten })),
		Counter("seqd_sequencer_reassemblies_expired_total", "command reassemblies dropped after their timeout", st(func(s *sequencer.Stats) uint64 { return s.ReassembliesExpired })),
		Counter("seqd_naks_received_total", "NAKs received for this session", st(func(s *sequencer.Stats) uint64 { return s.Naks })),
		Counter("seqd_naks_beyond_tail_total", "NAKs for seqs not published yet (ignored)", st(func(s *sequencer.Stats) uint64 { return s.NaksBeyondTail })),
		Counter("seqd_retransmitted_packets_total", "packets sent again in answer to NAKs", st(func(s *sequencer.Stats) uint64 { return s.Retransmitted })),
		Counter("seqd_repairs_multicast_total", "NAK answers published to everyone (several receivers asked)", st(func(s *sequencer.Stats) uint64 { return s.RepairsMulticast })),
		Counter("seqd_repairs_throttled_total", "NAK answers cut short by the retransmit bandwidth cap", st(func(s *sequencer.Stats) uint64 { return s.Throttled })),
		Counter("seqd_repairs_gone_total", "Gone answers: the range asked left the retransmit ring", st(func(s *sequencer.Stats) uint64 { return s.Gones })),
		Counter("seqd_receiver_statuses_total", "receiver position reports taken", st(func(s *sequencer.Stats) uint64 { return s.Statuses })),
	)
}

// NewTransportCollector reports an endpoint's frames and bytes by
// direction, dropped frames and refused sends; end names it ("stream",
// "naks", ...).
func NewTransportCollector(end string, counters func() transport.Counters) prometheus.Collector {
	type S = transport.Counters
	f := func(name, help string, get func(*S) float64) Field[S] {
		return Counter(name, help, get).With("endpoint", end)
	}
	return NewSnapCollector(counters,
		f("seqd_transport_frames_total", "frames through the endpoint, by direction", func(s *S) float64 { return u(s.FramesSent) }).With("endpoint", end, "direction", "sent"),
		f("seqd_transport_frames_total", "frames through the endpoint, by direction", func(s *S) float64 { return u(s.FramesReceived) }).With("endpoint", end, "direction", "received"),
		f("seqd_transport_bytes_total", "bytes through the endpoint, by direction", func(s *S) float64 { return u(s.BytesSent) }).With("endpoint", end, "direction", "sent"),
		f("seqd_transport_bytes_total", "bytes through the endpoint, by direction", func(s *S) float64 { return u(s.BytesReceived) }).With("endpoint", end, "direction", "received"),
		f("seqd_transport_dropped_frames_total", "frames the endpoint discarded (malformed, faults, full queues, unknown peers)", func(s *S) float64 { return u(s.Dropped) }),
		f("seqd_transport_refused_sends_total", "sends the kernel or the network refused (loss, repaired by the protocol)", func(s *S) float64 { return u(s.Refused) }),
		f("seqd_auth_failures_total", "received frames that failed authentication (unsigned, unknown key, a key that may not sign them, bad tag) and were dropped, by endpoint", func(s *S) float64 { return u(s.AuthFailed) }),
	)
}

// receiverFields are the receiving half's counters of any role that
// follows the stream (node, replayer), from get's receiver.Stats.
func receiverFields[S any](get func(*S) *receiver.Stats) []Field[S] {
	r := func(f func(*receiver.Stats) uint64) func(*S) float64 {
		return func(s *S) float64 { return u(f(get(s))) }
	}
	return []Field[S]{
		Counter("seqd_delivered_messages_total", "messages delivered (to the handler, or to the store)", r(func(s *receiver.Stats) uint64 { return s.Delivered })),
		Counter("seqd_duplicate_records_total", "records dropped because already held or delivered", r(func(s *receiver.Stats) uint64 { return s.Duplicates })),
		Counter("seqd_gaps_total", "gaps detected (each NAKed until repaired)", r(func(s *receiver.Stats) uint64 { return s.Gaps })),
		Counter("seqd_gap_seqs_total", "seqs missing in the gaps detected, when each was found (over seqd_gaps_total: the mean gap size)", r(func(s *receiver.Stats) uint64 { return s.GapSeqs })),
		Counter("seqd_naks_sent_total", "NAKs sent", r(func(s *receiver.Stats) uint64 { return s.NaksSent })),
		Counter("seqd_malformed_frames_total", "frames or records rejected by a decoder or a sanity check", r(func(s *receiver.Stats) uint64 { return s.Malformed })),
		Counter("seqd_fenced_packets_total", "packets or records of another session or an epoch they do not belong to", r(func(s *receiver.Stats) uint64 { return s.Fenced })),
		Counter("seqd_receive_overflow_records_total", "records dropped beyond the receive ring", r(func(s *receiver.Stats) uint64 { return s.Overflow })),
		Counter("seqd_dropped_by_epoch_records_total", "buffered records a new epoch cut", r(func(s *receiver.Stats) uint64 { return s.DroppedByEpoch })),
		Counter("seqd_repair_source_switches_total", "NAKs moved to another repair source", r(func(s *receiver.Stats) uint64 { return s.SourceSwitches })),
		Counter("seqd_repair_source_timeouts_total", "repair sources left without an answer", r(func(s *receiver.Stats) uint64 { return s.SourceTimeouts })),
		Counter("seqd_rewound_packets_total", "packets taken from a rewind", r(func(s *receiver.Stats) uint64 { return s.Rewound })),
		Counter("seqd_held_packets_total", "packets held until stable covered them (safe mode)", r(func(s *receiver.Stats) uint64 { return s.HeldPackets })),
	}
}

// NodeSnap is what a node collector reads per scrape.
type NodeSnap struct {
	Stats     node.Stats
	Rewinding bool
	InFlight  int
	WallNS    int64 // the wall clock when the snapshot was taken
}

// delivered is the last seq a node delivered.
func delivered(s *node.Stats) uint64 {
	if s.Next == 0 {
		return 0
	}
	return s.Next - 1
}

// NewNodeCollector reports a node's receiving counters (delivered, gaps,
// NAKs, rewinds) and sending ones (commands sent, resent, acked,
// rejected), its ack round trip and in-flight commands.
func NewNodeCollector(snap func() NodeSnap) prometheus.Collector {
	type S = NodeSnap
	fs := receiverFields(func(s *S) *receiver.Stats { return &s.Stats.Stats })
	fs = append(fs,
		Counter("seqd_node_commands_sent_total", "commands accepted by Send", func(s *S) float64 { return u(s.Stats.CommandsSent) }),
		Counter("seqd_node_command_resends_total", "commands sent again after their resend timeout", func(s *S) float64 { return u(s.Stats.Resends) }),
		Counter("seqd_node_commands_acked_total", "commands seen in the stream", func(s *S) float64 { return u(s.Stats.Acked) }),
		Counter("seqd_node_commands_rejected_total", "commands the sequencer refused", func(s *S) float64 { return u(s.Stats.Rejected) }),
		Gauge("seqd_node_ack_rtt_seconds", "smoothed command round trip (send to seen in the stream)", func(s *S) float64 { return s.Stats.SmoothedRTT.Seconds() }),
		Gauge("seqd_node_resend_timeout_seconds", "the resend timeout in use", func(s *S) float64 { return s.Stats.ResendTimeout.Seconds() }),
		Gauge("seqd_node_in_flight_commands", "commands queued or unacked", func(s *S) float64 { return float64(s.InFlight) }),
		Gauge("seqd_node_rewinding", "1 while the node rewinds (replays history before going live)", func(s *S) float64 { return b2f(s.Rewinding) }),
		Gauge("seqd_epoch", "the newest epoch seen", func(s *S) float64 { return float64(s.Stats.Epoch) }),
		Gauge("seqd_stable_seq", "the highest stable seq believed", func(s *S) float64 { return u(s.Stats.StableSeq) }),
		Gauge("seqd_delivered_seq", "the last seq delivered", func(s *S) float64 { return u(delivered(&s.Stats)) }),
		Gauge("seqd_receiver_lag_seqs", "stable seqs not delivered yet", func(s *S) float64 {
			if d := delivered(&s.Stats); s.Stats.StableSeq > d {
				return u(s.Stats.StableSeq - d)
			}
			return 0
		}),
		Gauge("seqd_receiver_lag_seconds", "wall clock minus the sequencer time of the last message delivered (or heartbeat once caught up): includes clock skew between hosts and, when idle, up to a heartbeat interval", func(s *S) float64 {
			if s.Stats.SeqTimeNS == 0 {
				return 0
			}
			return float64(s.WallNS-s.Stats.SeqTimeNS) / 1e9
		}),
	)
	return NewSnapCollector(snap, fs...)
}

// ReplayerSnap is what a replayer collector reads per scrape.
type ReplayerSnap struct {
	Service replayer.ServiceStats
	Rewind  replayer.RewindStats
}

// NewReplayerCollector reports a replayer's position (held, durable,
// stable seen, lag), what it stored, the NAKs it answered and the
// rewinds it served.
func NewReplayerCollector(snap func() ReplayerSnap) prometheus.Collector {
	type S = ReplayerSnap
	fs := receiverFields(func(s *S) *receiver.Stats { return &s.Service.Receiver })
	fs = append(fs,
		Gauge("seqd_replayer_first_seq", "the lowest seq held (0: none): with held_seq, the range it serves", func(s *S) float64 { return u(s.Service.First) }),
		Gauge("seqd_replayer_held_seq", "the highest seq stored whole", func(s *S) float64 { return u(s.Service.Contiguous) }),
		Gauge("seqd_replayer_durable_seq", "the highest seq fsynced", func(s *S) float64 { return u(s.Service.Durable) }),
		Gauge("seqd_stable_seq", "the highest stable seq seen in the stream", func(s *S) float64 { return u(s.Service.Stable) }),
		Gauge("seqd_replayer_lag_seqs", "seqs stable in the stream and not stored yet", func(s *S) float64 {
			if s.Service.Stable > s.Service.Contiguous {
				return u(s.Service.Stable - s.Service.Contiguous)
			}
			return 0
		}),
		Counter("seqd_replayer_appended_bytes_total", "packet bytes appended to the store", func(s *S) float64 { return u(s.Service.Store.AppendedBytes) }),
		Counter("seqd_replayer_appended_packets_total", "packets appended to the store", func(s *S) float64 { return u(s.Service.Store.Appended) }),
		Counter("seqd_replayer_fsyncs_total", "fsyncs of the store", func(s *S) float64 { return u(s.Service.Store.Fsyncs) }),
		Counter("seqd_replayer_segments_total", "segments started", func(s *S) float64 { return u(s.Service.Store.Rolls) }),
		Counter("seqd_naks_received_total", "NAKs received for this session", func(s *S) float64 { return u(s.Service.Naks.Naks) }),
		Counter("seqd_naks_not_held_total", "NAKs beyond the highest seq held (not answered)", func(s *S) float64 { return u(s.Service.Naks.NotHeld) }),
		Counter("seqd_retransmitted_packets_total", "packets sent again in answer to NAKs", func(s *S) float64 { return u(s.Service.Naks.Retransmitted) }),
		Counter("seqd_repairs_multicast_total", "NAK answers published to everyone (several receivers asked)", func(s *S) float64 { return u(s.Service.Naks.RepairsMulticast) }),
		Counter("seqd_repairs_throttled_total", "NAK answers cut short by the retransmit bandwidth cap", func(s *S) float64 { return u(s.Service.Naks.Throttled) }),
		Counter("seqd_repairs_gone_total", "Gone answers: the range asked is no longer held", func(s *S) float64 { return u(s.Service.Naks.Gones) }),
		Counter("seqd_rewinds_total", "rewinds started", func(s *S) float64 { return u(s.Rewind.Accepted) }),
		Gauge("seqd_rewinds_active", "rewinds streaming now", func(s *S) float64 { return float64(s.Rewind.Active) }),
		Counter("seqd_rewinds_refused_total", "rewind requests answered with an error", func(s *S) float64 { return u(s.Rewind.Refused) }),
		Counter("seqd_rewind_bytes_total", "stream bytes sent by rewinds", func(s *S) float64 { return u(s.Rewind.Bytes) }),
	)
	return NewSnapCollector(snap, fs...)
}

// NewStandbyCollector reports a cluster member's standby counters
// (stored, fetched, acked, fsyncs; its store's positions) from snap
// (false: no standby runs now; the metrics then read 0).
func NewStandbyCollector(snap func() (standby.Stats, bool)) prometheus.Collector {
	type S = standby.Stats
	get := func() S { s, _ := snap(); return s }
	return NewSnapCollector(get,
		Counter("seqd_standby_appended_packets_total", "packets the standby appended to its store", func(s *S) float64 { return u(s.Appended) }),
		Counter("seqd_standby_stashed_packets_total", "packets held until the gap before them filled", func(s *S) float64 { return u(s.Stashed) }),
		Counter("seqd_standby_duplicate_packets_total", "packets the store held already", func(s *S) float64 { return u(s.Duplicates) }),
		Counter("seqd_standby_fetched_packets_total", "packets fetched from peers to catch up", func(s *S) float64 { return u(s.Fetched) }),
		Counter("seqd_standby_acks_sent_total", "acks sent to the primary", func(s *S) float64 { return u(s.AcksSent) }),
		Counter("seqd_standby_sealed_drops_total", "stream frames of a sealed epoch dropped", func(s *S) float64 { return u(s.SealedDrops) }),
		Counter("seqd_standby_fsyncs_total", "fsyncs of the standby's store", func(s *S) float64 { return u(s.Fsyncs) }),
		Counter("seqd_standby_receiver_errors_total", "malformed frames the standby's receiver counted", func(s *S) float64 { return u(s.ReceiverErrs) }),
		Gauge("seqd_standby_durable_seq", "highest seq the standby fsynced", func(s *S) float64 { return u(s.Durable) }),
		Gauge("seqd_standby_acked_seq", "last seq the standby acked", func(s *S) float64 { return u(s.Acked) }),
	)
}
