package ops

import (
	"github.com/seqd/seqd/fsm"
)

// The status every process serves (GET /v1/status, the console's
// `status`). One JSON schema, snake_case throughout, documented in
// docs/ops.md; a status page or an admin node reads it as these Go types.

// Process kinds, the "process" field of ProcessStatus.
const (
	KindMember    = "member"    // a sequencer cluster member (seqd sequencer --cluster)
	KindSequencer = "sequencer" // a standalone sequencer
	KindReplayer  = "replayer"
	KindNode      = "node"
	KindTail      = "tail"
)

// ProcessStatus is what any process's admin surface says of itself: its
// kind and name, whether it is ready (and why not), and the section of
// its kind. Exactly one of the sections is set.
type ProcessStatus struct {
	Process   string `json:"process"` // KindMember, KindReplayer, ...
	Name      string `json:"name,omitempty"`
	PID       int    `json:"pid,omitempty"`
	StartedAt int64  `json:"started_at_ns,omitempty"` // wall ns the process started
	Ready     bool   `json:"ready"`
	Reason    string `json:"reason,omitempty"` // why not ready

	Member    *MemberStatus    `json:"member,omitempty"`
	Sequencer *SequencerStatus `json:"sequencer,omitempty"`
	Replayer  *ReplayerStatus  `json:"replayer,omitempty"`
	Node      *NodeStatus      `json:"node,omitempty"`
	Bridge    *BridgeStatus    `json:"bridge,omitempty"`
}

// StatusProvider is a process's status, read by the admin surface, a
// status page or a test; safe from any goroutine.
type StatusProvider interface {
	ProcessStatus() ProcessStatus
}

// StatusFunc adapts a function to StatusProvider.
type StatusFunc func() ProcessStatus

// ProcessStatus calls f.
func (f StatusFunc) ProcessStatus() ProcessStatus { return f() }

// Peer is one member of a sequencer cluster as the status shows it: the
// JSON form of fsm.Member (whose Go field names are no schema).
type Peer struct {
	ID          uint64 `json:"id"`
	Role        string `json:"role"` // voter | nonvoter
	RaftAddr    string `json:"raft_addr"`
	AdminAddr   string `json:"admin_addr"`
	PeerAddr    string `json:"peer_addr,omitempty"` // seal and fetch (fsm.Member.StreamAddr)
	CommandAddr string `json:"command_addr,omitempty"`
}

// PeerOf is the status form of m.
func PeerOf(m fsm.Member) Peer {
	return Peer{ID: m.ID, Role: m.Role.String(), RaftAddr: m.RaftAddr, AdminAddr: m.AdminAddr, PeerAddr: m.StreamAddr, CommandAddr: m.CommandAddr}
}

// PeersOf is the status form of ms.
func PeersOf(ms []fsm.Member) []Peer {
	out := make([]Peer, len(ms))
	for i, m := range ms {
		out[i] = PeerOf(m)
	}
	return out
}

// Member is the fsm form of p; a role other than "nonvoter" is a voter.
func (p Peer) Member() fsm.Member {
	r := fsm.Voter
	if p.Role == fsm.Nonvoter.String() {
		r = fsm.Nonvoter
	}
	return fsm.Member{ID: p.ID, Role: r, RaftAddr: p.RaftAddr, AdminAddr: p.AdminAddr, StreamAddr: p.PeerAddr, CommandAddr: p.CommandAddr}
}

// SequencerStatus is a standalone sequencer's, or a cluster primary's,
// sequencing position and counters.
type SequencerStatus struct {
	Session   uint64 `json:"session"`
	Epoch     uint64 `json:"epoch"`
	Published uint64 `json:"published"` // last seq assigned
	Stable    uint64 `json:"stable"`
	Commands  uint64 `json:"commands_total"`
	Rejected  uint64 `json:"rejected_total"`
}

// ReplayerStatus is a replayer's position: what it holds of which
// session, and the stable seq it last saw.
type ReplayerStatus struct {
	Session    uint64 `json:"session"`
	First      uint64 `json:"first"`      // lowest seq held (0: none)
	Contiguous uint64 `json:"contiguous"` // highest seq stored whole
	Durable    uint64 `json:"durable"`    // highest seq fsynced
	Stable     uint64 `json:"stable"`     // highest stable seen in the stream
	Rewinds    uint64 `json:"rewinds_total"`
	Active     int64  `json:"rewinds_active"`
	NakAddr    string `json:"nak_addr,omitempty"`
	RewindAddr string `json:"rewind_addr,omitempty"`
}

// NodeStatus is a node's (or a tail's) state and counters.
type NodeStatus struct {
	Account      string `json:"account"`
	Incarnation  uint64 `json:"incarnation"`
	Session      uint64 `json:"session"`
	Epoch        uint64 `json:"epoch"`
	DeliveredSeq uint64 `json:"delivered_seq"` // last seq delivered
	Stable       uint64 `json:"stable"`        // highest stable seq believed
	Rewinding    bool   `json:"rewinding"`
	InFlight     int    `json:"in_flight"` // commands queued or unacked
	Delivered    uint64 `json:"delivered_total"`
	Gaps         uint64 `json:"gaps_total"`
	NaksSent     uint64 `json:"naks_sent_total"`
	CommandsSent uint64 `json:"commands_sent_total"`
	Acked        uint64 `json:"acked_total"`
	Rejected     uint64 `json:"rejected_total"`
}
