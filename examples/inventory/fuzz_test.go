package inventory

import (
	"bytes"
	"testing"
)

// FuzzDecode: transaction and reply payloads come from the network (any
// node may send any bytes). The decoders never panic; what decodes
// re-encodes to the same bytes (one payload, one meaning); applying any
// payload leaves no stock below zero.
func FuzzDecode(f *testing.F) {
	seed := func(p []byte, err error) {
		if err == nil {
			f.Add(p)
		}
	}
	seed(AppendTxn(nil, 0, 1, Update{"phone", 10}))
	seed(AppendTxn(nil, FlagRecord, 7, Update{"phone", -1}, Update{"case", -1}))
	f.Add(AppendReply(nil, &Reply{Outcome: Oversold, Failed: 1, Seq: 9, Account: 3, Ref: 7, Stock: 2}))
	f.Add([]byte{'T'})
	f.Add([]byte{'T', 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 64})
	s := NewState(0)
	var seq uint64
	f.Fuzz(func(t *testing.T, p []byte) {
		var tv TxnView
		if err := DecodeTxn(p, &tv); err == nil {
			ups := make([]Update, tv.Len())
			for i := range ups {
				ups[i] = Update{string(tv.Key(i)), tv.Delta(i)}
			}
			q, err := AppendTxn(nil, tv.Flags, tv.Ref, ups...)
			if err != nil || !bytes.Equal(p, q) {
				t.Fatalf("decoded %x, re-encoded %x (%v)", p, q, err)
			}
		}
		var r Reply
		if err := DecodeReply(p, &r); err == nil {
			if q := AppendReply(nil, &r); !bytes.Equal(p, q) {
				t.Fatalf("reply %x re-encoded %x", p, q)
			}
		}
		seq++
		s.Apply(seq, 1, p, &r)
		for i := range s.stock {
			if s.stock[i] < 0 {
				t.Fatalf("%s below zero after %x", s.keys[i], p)
			}
		}
	})
}
