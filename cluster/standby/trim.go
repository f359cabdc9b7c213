package standby

import (
	"slices"

	"github.com/seqd/seqd/wire"
)

// trimPacket rewrites the data packet p with only its records up to seq
// last, into dst (grown as needed), keeping its header fields.
func trimPacket(dst, p []byte, last uint64) ([]byte, error) {
	var in wire.Packet
	if err := wire.DecodePacket(p, &in); err != nil {
		return nil, err
	}
	dst = slices.Grow(dst[:0], len(p))[:len(p)]
	var w wire.PacketWriter
	if err := w.Reset(dst, in.Kind, in.Epoch, in.Session, in.FirstSeq, in.BaseTime, in.EpochStart); err != nil {
		return nil, err
	}
	var r wire.Record
	for in.Next(&r) && r.Seq <= last {
		if err := w.Append(&r); err != nil {
			return nil, err
		}
	}
	out := w.Bytes()
	wire.SetStable(out, min(in.Stable, last))
	wire.SetPacketFlags(out, in.Flags)
	return out, nil
}
