package sequencer

// PacketInfo describes a stored stream packet without decoding it: what the
// Core knew when it wrote the packet. Package wire keeps the byte layout.
type PacketInfo struct {
	FirstSeq uint64 // seq of the first record
	Count    int    // records (>= 1)
	// Fragment: the first record is a fragment of a larger message, holding
	// its bytes FragFrom..FragTo (the whole message when not a fragment).
	Fragment bool
	FragFrom uint32
	FragTo   uint32
	// EpochEnd, set by a store that saw the epoch after the packet's own
	// begin (Range only), is the last seq of the packet's epoch: the
	// cut, past which its records were never kept. 0: not known (the
	// store's newest epoch, or it missed where the next one began).
	EpochEnd uint64
}

// LastSeq is the seq of the packet's last record.
func (p *PacketInfo) LastSeq() uint64 { return p.FirstSeq + uint64(p.Count) - 1 }

// PacketFunc receives one packet of a RetransmitStore.Range; it returns
// false to stop the iteration.
type PacketFunc func(pkt []byte, info PacketInfo) bool

// RetransmitStore holds published stream packets for repair. The Core's
// retransmit ring implements it; a replayer's segment store can too, and
// then answers NAKs with the same policy (per-NAK cap, bandwidth cap,
// multicast answers, Gone).
//
// Packets are stored in publish order; their first seqs never decrease
// (several packets share a first seq when they carry fragments of one
// message). A store may forget its oldest packets at any Put.
//
// Ownership: Put copies pkt (the caller keeps its buffer). The pkt handed
// to a PacketFunc belongs to the store and is valid only during the call;
// the callee may patch the header fields that wire.SetStable and
// wire.SetPacketFlags write (a store whose own bytes are read-only hands
// out a copy) and must not change anything else.
//
// Concurrency: a store is used by one goroutine at a time (the Core's);
// it has no locks. Range must not call Put.
//
// Allocation: Range and the lookups allocate nothing; Put allocates only
// while the store grows to its configured size.
type RetransmitStore interface {
	// Put stores a published packet described by info.
	Put(pkt []byte, info PacketInfo)
	// Oldest describes the oldest packet held; false when empty.
	Oldest() (PacketInfo, bool)
	// Newest describes the newest packet held; false when empty.
	Newest() (PacketInfo, bool)
	// Range calls fn, oldest first, for every packet held that carries a
	// record of from..to (inclusive), until fn returns false.
	Range(from, to uint64, fn PacketFunc)
}
