package wire_test

import (
	"reflect"
	"testing"

	"github.com/seqd/seqd/wire"
)

// FuzzDecodeCheckedPacket: on every input DecodePacket accepts,
// DecodeCheckedPacket reads the same header and the same records (the
// receiver's hold relies on it), and Packet.Last is the last record.
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
		if !reflect.DeepEqual(a, c) {
			t.Fatalf("checked decode differs:\n%+v %+v\n%+v %+v", full, a, checked, c)
		}
		// Last is the last record Next returned, with no walk.
		var again wire.Packet
		_ = wire.DecodePacket(b, &again)
		ok := again.Last(&r)
		if ok != (len(a) > 0) || ok && !reflect.DeepEqual(r, a[len(a)-1]) {
			t.Fatalf("Last = %v %+v, want the last of %+v", ok, r, a)
		}
		if again.Next(&r) {
			t.Fatal("Next after Last returned a record")
		}
		if checked.Last(&r) {
			t.Fatal("Last of a checked decode found a record")
		}
	})
}
