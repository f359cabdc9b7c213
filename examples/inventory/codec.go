package inventory

import (
	"encoding/binary"
)

// The two payloads of the service, as they travel in the stream (little
// endian; a command's bytes are the sequencer's payload, opaque to it).
//
// A transaction (magic 'T'), sent by a front or any gateway node:
//
//	[0]     'T'
//	[1]     flags (FlagRecord: the outcome, when it succeeds, is an order
//	        recorded in the database)
//	[2:10]  ref: the sender's request id, echoed in the reply
//	[10]    n, the number of updates, 1..MaxUpdates
//	then n times: [0] key length k (1..MaxKeyBytes), k key bytes, an
//	        int64 delta (negative: a reservation)
//
// A reply (magic 'R'), sent by the service for each transaction it applied:
//
//	[0]     'R'
//	[1]     outcome (Outcome)
//	[2]     the index of the update that failed (0 when none)
//	[3:11]  seq of the transaction in the stream
//	[11:19] the transaction's sender account (wire.Account as uint64)
//	[19:27] ref
//	[27:35] the stock of the first update's key after the transaction
const (
	magicTxn   = 'T'
	magicReply = 'R'

	// MaxUpdates bounds the updates of one transaction.
	MaxUpdates = 32
	// MaxKeyBytes bounds a key.
	MaxKeyBytes = 64

	// FlagRecord marks a transaction whose success is an order the
	// database records (the hot deal's winners).
	FlagRecord = 1 << 0

	txnHeaderBytes = 11
	// ReplyBytes is the size of an encoded reply.
	ReplyBytes = 35
)

// Outcome is what applying a transaction gave, the same on every instance.
type Outcome uint8

const (
	// OK: every update applied.
	OK Outcome = iota
	// Oversold: an update would take a key's stock below zero; nothing
	// of the transaction applied.
	Oversold
	// Overflow: an update would take a key's stock beyond int64.
	Overflow
	// Malformed: the payload started like a transaction but did not
	// decode; nothing applied.
	Malformed
)

func (o Outcome) String() string {
	switch o {
	case OK:
		return "ok"
	case Oversold:
		return "oversold"
	case Overflow:
		return "overflow"
	case Malformed:
		return "malformed"
	}
	return "unknown"
}

// Update is one change of a transaction: Delta added to Key's stock.
type Update struct {
	Key   string
	Delta int64
}

// AppendTxn appends the encoding of a transaction to b.
func AppendTxn(b []byte, flags uint8, ref uint64, updates ...Update) ([]byte, error) {
	if len(updates) == 0 || len(updates) > MaxUpdates {
		return b, ErrTooMany
	}
	b = append(b, magicTxn, flags)
	b = binary.LittleEndian.AppendUint64(b, ref)
	b = append(b, byte(len(updates)))
	for _, u := range updates {
		if len(u.Key) == 0 || len(u.Key) > MaxKeyBytes {
			return b, ErrKey
		}
		b = append(b, byte(len(u.Key)))
		b = append(b, u.Key...)
		b = binary.LittleEndian.AppendUint64(b, uint64(u.Delta))
	}
	return b, nil
}

// IsTxn reports whether p claims to be a transaction (its magic byte).
func IsTxn(p []byte) bool { return len(p) > 0 && p[0] == magicTxn }

// IsReply reports whether p claims to be a reply.
func IsReply(p []byte) bool { return len(p) > 0 && p[0] == magicReply }

// TxnView is a decoded transaction: views into the payload, valid while
// the payload is.
type TxnView struct {
	Flags uint8
	Ref   uint64
	n     int
	keys  [MaxUpdates][]byte
	delta [MaxUpdates]int64
}

// Len is the number of updates.
func (t *TxnView) Len() int { return t.n }

// Key is update i's key (a view into the payload).
func (t *TxnView) Key(i int) []byte { return t.keys[i] }

// Delta is update i's delta.
func (t *TxnView) Delta(i int) int64 { return t.delta[i] }

// DecodeTxn decodes p into t without allocating. Trailing bytes are
// malformed too, so that one payload has one meaning.
func DecodeTxn(p []byte, t *TxnView) error {
	if len(p) < txnHeaderBytes {
		if len(p) > 0 && p[0] != magicTxn {
			return ErrNotTxn
		}
		return ErrMalformed
	}
	if p[0] != magicTxn {
		return ErrNotTxn
	}
	t.Flags = p[1]
	t.Ref = binary.LittleEndian.Uint64(p[2:10])
	n := int(p[10])
	if n == 0 || n > MaxUpdates {
		return ErrMalformed
	}
	p = p[txnHeaderBytes:]
	for i := range n {
		if len(p) < 1 {
			return ErrMalformed
		}
		k := int(p[0])
		if k == 0 || k > MaxKeyBytes || len(p) < 1+k+8 {
			return ErrMalformed
		}
		t.keys[i] = p[1 : 1+k]
		t.delta[i] = int64(binary.LittleEndian.Uint64(p[1+k:]))
		p = p[1+k+8:]
	}
	if len(p) != 0 {
		return ErrMalformed
	}
	t.n = n
	return nil
}

// Reply is the service's answer to one transaction.
type Reply struct {
	Outcome Outcome
	Failed  uint8  // the update that failed (Oversold, Overflow)
	Seq     uint64 // the transaction's seq
	Account uint64 // the transaction's sender (wire.Account)
	Ref     uint64
	Stock   int64 // the first key's stock after the transaction
}

// AppendReply appends r's encoding to b.
func AppendReply(b []byte, r *Reply) []byte {
	b = append(b, magicReply, byte(r.Outcome), r.Failed)
	b = binary.LittleEndian.AppendUint64(b, r.Seq)
	b = binary.LittleEndian.AppendUint64(b, r.Account)
	b = binary.LittleEndian.AppendUint64(b, r.Ref)
	return binary.LittleEndian.AppendUint64(b, uint64(r.Stock))
}

// DecodeReply decodes p into r.
func DecodeReply(p []byte, r *Reply) error {
	if len(p) == 0 || p[0] != magicReply {
		return ErrNotReply
	}
	if len(p) != ReplyBytes || p[1] > uint8(Malformed) {
		return ErrMalformed
	}
	r.Outcome, r.Failed = Outcome(p[1]), p[2]
	r.Seq = binary.LittleEndian.Uint64(p[3:])
	r.Account = binary.LittleEndian.Uint64(p[11:])
	r.Ref = binary.LittleEndian.Uint64(p[19:])
	r.Stock = int64(binary.LittleEndian.Uint64(p[27:]))
	return nil
}
