package inventory

// State is the inventory in memory: the pure, single-threaded processor
// of the LMAX design. It has no goroutines, locks, clock or I/O; the
// Service calls Apply for each transaction of the stream, in stream
// order, and hands the changes to the Flusher in batches (TakeBatch).
// Its digest is a function of the stream prefix alone, so two instances
// that applied the same seqs hold the same digest.
type State struct {
	index   map[string]int32 // key -> record
	keys    []string
	keyHash []uint64 // a hash of each key's bytes, for the digest
	stock   []int64
	dirty   []bool  // changed since the last TakeBatch
	changed []int32 // the dirty records, in order of first change
	orders  []Order // recorded successes since the last TakeBatch

	seq        uint64 // the last seq observed (any message)
	taken      uint64 // seq at the last TakeBatch
	digest     uint64
	digestBase uint64 // the digest before the ring's first entry (NewState, Restore)
	baseSeq    uint64 // the seq digestBase is the digest at
	txns       uint64 // transactions applied (every outcome)
	failed     uint64 // transactions refused

	ring    [digestRing]digestAt // (seq, digest) after each of the last transactions
	ringLen int
	ringPos int

	tv      TxnView
	touched [MaxUpdates]int32
}

// digestRing is how many transactions back DigestAt can answer.
const digestRing = 8192

type digestAt struct{ seq, digest uint64 }

// Order is a recorded success (FlagRecord): who got what, at which seq.
type Order struct {
	Seq     uint64
	Account uint64 // the sender (wire.Account)
	Ref     uint64
	Key     string
	Delta   int64
}

// NewState returns an empty inventory sized for about keys keys.
func NewState(keys int) *State {
	s := &State{index: make(map[string]int32, keys), digest: digestSeed, digestBase: digestSeed}
	s.keys = make([]string, 0, keys)
	s.keyHash = make([]uint64, 0, keys)
	s.stock = make([]int64, 0, keys)
	s.dirty = make([]bool, 0, keys)
	s.changed = make([]int32, 0, keys)
	return s
}

const digestSeed = 0x5eed_1d1e_57a7_e000

// mix folds x into the running hash h (a multiply-xorshift step: cheap,
// and every bit of x reaches every bit of h).
func mix(h, x uint64) uint64 {
	h ^= x
	h *= 0x9e3779b97f4a7c15
	return h ^ h>>29
}

func hashKey(k []byte) uint64 {
	h := uint64(0xcbf29ce484222325)
	for _, c := range k {
		h = (h ^ uint64(c)) * 0x100000001b3
	}
	return mix(h, uint64(len(k)))
}

// Observe records that the stream reached seq (a message that is not a
// transaction): the flushed seq covers it, the digest does not change.
func (s *State) Observe(seq uint64) {
	if seq > s.seq {
		s.seq = seq
	}
}

// Applied is the last seq observed or applied.
func (s *State) Applied() uint64 { return s.seq }

// Digest is the running hash over every transaction applied: seqs,
// outcomes and the stock each update left.
func (s *State) Digest() uint64 { return s.digest }

// Txns and Refused count the transactions applied and refused.
func (s *State) Txns() uint64    { return s.txns }
func (s *State) Refused() uint64 { return s.failed }

// Keys is the number of keys held.
func (s *State) Keys() int { return len(s.keys) }

// Stock is key's stock (0 for an unknown key).
func (s *State) Stock(key string) int64 {
	if i, ok := s.index[key]; ok {
		return s.stock[i]
	}
	return 0
}

// DigestAt is the digest after every transaction up to seq, for the
// last digestRing transactions (ok false when seq is older, or beyond
// Applied): what two instances compare at a seq both applied.
func (s *State) DigestAt(seq uint64) (uint64, bool) {
	if seq > s.seq {
		return 0, false
	}
	// Newest first: the first entry at or below seq.
	for k := 0; k < s.ringLen; k++ {
		i := (s.ringPos - 1 - k + digestRing) % digestRing
		if s.ring[i].seq <= seq {
			return s.ring[i].digest, true
		}
	}
	if s.ringLen < digestRing && seq >= s.baseSeq {
		return s.digestBase, true // no transaction between the restore and seq
	}
	return 0, false
}

// lookup returns key's record, or -1.
func (s *State) lookup(key []byte) int32 {
	if i, ok := s.index[string(key)]; ok { // no allocation: a lookup
		return i
	}
	return -1
}

func (s *State) insert(key []byte, v int64) int32 {
	i := int32(len(s.keys))
	k := string(key)
	s.index[k] = i
	s.keys = append(s.keys, k)
	s.keyHash = append(s.keyHash, hashKey(key))
	s.stock = append(s.stock, v)
	s.dirty = append(s.dirty, false)
	return i
}

func (s *State) markDirty(i int32) {
	if !s.dirty[i] {
		s.dirty[i] = true
		s.changed = append(s.changed, i)
	}
}

// Apply applies the transaction payload p, sequenced at seq by account,
// and fills r with the outcome. All of a transaction's updates apply, in
// order (a key may appear twice: +3 then -1), or none does: an update
// that would take a stock below zero (Oversold) or beyond int64
// (Overflow) undoes the ones before it. The outcome depends on the
// stream alone, so every instance refuses the same reservations.
// It allocates nothing unless p names a key never seen.
func (s *State) Apply(seq, account uint64, p []byte, r *Reply) {
	s.Observe(seq)
	s.txns++
	*r = Reply{Seq: seq, Account: account}
	t := &s.tv
	if err := DecodeTxn(p, t); err != nil {
		r.Outcome = Malformed
		s.failed++
		s.record(seq, r)
		return
	}
	r.Ref = t.Ref
	n := t.n
	for i := 0; i < n; i++ {
		idx := s.lookup(t.keys[i])
		var cur int64
		if idx >= 0 {
			cur = s.stock[idx]
		}
		d := t.delta[i]
		v := cur + d
		switch {
		case d > 0 && v < cur, d < 0 && v > cur:
			r.Outcome = Overflow
		case d < 0 && v < 0:
			r.Outcome = Oversold
		}
		if r.Outcome != OK {
			r.Failed = uint8(i)
			for j := i - 1; j >= 0; j-- {
				s.stock[s.touched[j]] -= t.delta[j]
			}
			if idx0 := s.lookup(t.keys[0]); idx0 >= 0 {
				r.Stock = s.stock[idx0]
			}
			s.failed++
			s.record(seq, r)
			return
		}
		if idx < 0 {
			idx = s.insert(t.keys[i], v)
		} else {
			s.stock[idx] = v
		}
		s.touched[i] = idx
	}
	h := s.digest
	for i := 0; i < n; i++ {
		idx := s.touched[i]
		s.markDirty(idx)
		h = mix(h, s.keyHash[idx]^uint64(s.stock[idx]))
	}
	s.digest = h
	r.Stock = s.stock[s.touched[0]]
	if t.Flags&FlagRecord != 0 {
		s.orders = append(s.orders, Order{Seq: seq, Account: account, Ref: t.Ref,
			Key: s.keys[s.touched[0]], Delta: t.delta[0]})
	}
	s.record(seq, r)
}

// record folds the transaction's seq and outcome into the digest and
// notes the digest at seq.
func (s *State) record(seq uint64, r *Reply) {
	s.digest = mix(mix(s.digest, seq), uint64(r.Outcome)|uint64(r.Failed)<<8)
	s.ring[s.ringPos] = digestAt{seq, s.digest}
	s.ringPos = (s.ringPos + 1) % digestRing
	if s.ringLen < digestRing {
		s.ringLen++
	}
}

// Pending reports whether changes wait for a TakeBatch.
func (s *State) Pending() bool { return len(s.changed) > 0 || len(s.orders) > 0 || s.seq > s.taken }

// TakeBatch moves the changes since the last call into b (reusing its
// slices): the stock of every key changed, the orders recorded, the seq
// and digest they bring the database to.
func (s *State) TakeBatch(b *Batch) {
	b.Seq, b.Digest, b.Txns, b.Refused = s.seq, s.digest, s.txns, s.failed
	b.Keys, b.Stock = b.Keys[:0], b.Stock[:0]
	for _, i := range s.changed {
		b.Keys = append(b.Keys, s.keys[i])
		b.Stock = append(b.Stock, s.stock[i])
		s.dirty[i] = false
	}
	s.changed = s.changed[:0]
	b.Orders = append(b.Orders[:0], s.orders...)
	clear(s.orders) // drop the key strings' references
	s.orders = s.orders[:0]
	s.taken = s.seq
}

// Restore replaces the state by a snapshot loaded from the database.
func (s *State) Restore(snap *Snapshot) {
	*s = *NewState(len(snap.Keys))
	for i, k := range snap.Keys {
		s.insert([]byte(k), snap.Stock[i])
	}
	s.seq, s.taken, s.baseSeq = snap.Seq, snap.Seq, snap.Seq
	s.digest, s.digestBase = snap.Digest, snap.Digest
	s.txns, s.failed = snap.Txns, snap.Refused
	if snap.Seq == 0 && snap.Digest == 0 {
		s.digest, s.digestBase = digestSeed, digestSeed
	}
}

// Batch is one flush: the database's new state up to Seq.
type Batch struct {
	Seq    uint64 // the last seq the batch covers
	Digest uint64 // State.Digest at Seq
	// Txns and Refused count the transactions up to Seq, so that a
	// restarted instance's counts go on from its partner's.
	Txns, Refused uint64
	Keys          []string
	Stock         []int64
	Orders        []Order
}

// Snapshot is what the database holds: the stock of every key, and the
// seq and digest it was flushed at.
type Snapshot struct {
	Seq           uint64
	Digest        uint64
	Txns, Refused uint64
	Keys          []string
	Stock         []int64
}
