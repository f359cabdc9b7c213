package wire_test

import (
	"reflect"
	"testing"

	"github.com/seqd/seqd/wire"
)

// FuzzDecodeCheckedPacket: on every input DecodePacket accepts,
// DecodeCheckedPacket reads the same header and the same records (the
// receiver's hold relies on it).
func FuzzDecodeCheckedPacket(f *testing.F) {
	hb, _ := wire.AppendHeartbeat(make([]byte, wire.PacketHeaderBytes), 1, 2, 3, 2, 99, 1)
	f.Add(validPacket(f))
	f.Add(hb)
	f.Add(validPacket(f)[:50])
	f.Fuzz(func(t *testing.T, b []byte) {
		var full, checked wire.Packet
		if wire.DecodePacket(b, &full) != nil {
			return
		}
		if err := wire.DecodeCheckedPacket(b, &checked); err != nil {
			t.Fatalf("DecodeCheckedPacket refused what DecodePacket took: %v", err)
		}
		var a, c []wire.Record
		var r wire.Record
		for full.Next(&r) {
			a = append(a, r)
		}
		for checked.Next(&r) {
			c = append(c, r)
		}
		if !reflect.DeepEqual(full, checked) || !reflect.DeepEqual(a, c) {
			t.Fatalf("checked decode differs:\n%+v %+v\n%+v %+v", full, a, checked, c)
		}
	})
}
